package controller

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// podBuilder builds test pods: makePod("p").node("n1").phase(Failed).obj().
type podBuilder struct{ p corev1.Pod }

func makePod(name string) *podBuilder {
	return &podBuilder{p: corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)}}}
}

func (b *podBuilder) node(n string) *podBuilder { b.p.Spec.NodeName = n; return b }

func (b *podBuilder) phase(ph corev1.PodPhase) *podBuilder { b.p.Status.Phase = ph; return b }

func (b *podBuilder) created(sec int) *podBuilder {
	b.p.CreationTimestamp = metav1.NewTime(time.Unix(int64(sec), 0))
	return b
}

func (b *podBuilder) terminating() *podBuilder {
	now := metav1.NewTime(time.Unix(1000, 0))
	b.p.DeletionTimestamp = &now
	return b
}

func (b *podBuilder) ready() *podBuilder {
	b.p.Status.Conditions = append(b.p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
	return b
}

func (b *podBuilder) toleration(t corev1.Toleration) *podBuilder {
	b.p.Spec.Tolerations = append(b.p.Spec.Tolerations, t)
	return b
}

func (b *podBuilder) obj() *corev1.Pod { p := b.p; return &p }

func makeNode(name string, ready bool) *corev1.Node {
	st := corev1.ConditionTrue
	if !ready {
		st = corev1.ConditionUnknown
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}},
	}
}

func names(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}
