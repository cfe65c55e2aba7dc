package fencing

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// podBuilder builds test pods: makePod("p").node("n1").pet().obj().
type podBuilder struct{ p corev1.Pod }

func makePod(name string) *podBuilder {
	return &podBuilder{p: corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}}
}

func (b *podBuilder) node(n string) *podBuilder { b.p.Spec.NodeName = n; return b }

func (b *podBuilder) phase(ph corev1.PodPhase) *podBuilder { b.p.Status.Phase = ph; return b }

func (b *podBuilder) priority(v int32) *podBuilder { b.p.Spec.Priority = &v; return b }

func (b *podBuilder) owner(kind string) *podBuilder {
	b.p.OwnerReferences = append(b.p.OwnerReferences, metav1.OwnerReference{
		APIVersion: "apps/v1", Kind: kind, Name: "owner", UID: "owner-uid", Controller: ptrTo(true),
	})
	return b
}

func (b *podBuilder) pet() *podBuilder { return b.owner("StatefulSet") }

func (b *podBuilder) annotate(k, v string) *podBuilder {
	if b.p.Annotations == nil {
		b.p.Annotations = map[string]string{}
	}
	b.p.Annotations[k] = v
	return b
}

func (b *podBuilder) terminating() *podBuilder {
	t := metav1.NewTime(time.Unix(1000, 0))
	b.p.DeletionTimestamp = &t
	return b
}

func (b *podBuilder) nodeDown() *podBuilder {
	b.p.Status.Conditions = append(b.p.Status.Conditions, corev1.PodCondition{Type: podConditionNodeDown, Status: corev1.ConditionTrue})
	return b
}

func (b *podBuilder) obj() *corev1.Pod { p := b.p.DeepCopy(); return p }

// nodeBuilder builds test nodes.
type nodeBuilder struct{ n corev1.Node }

func makeNode(name string) *nodeBuilder {
	return &nodeBuilder{n: corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}}}
}

func (b *nodeBuilder) heartbeat(t time.Time) *nodeBuilder {
	b.n.Status.Conditions = append(b.n.Status.Conditions, corev1.NodeCondition{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(t),
	})
	return b
}

func (b *nodeBuilder) created(t time.Time) *nodeBuilder {
	b.n.CreationTimestamp = metav1.NewTime(t)
	return b
}

func (b *nodeBuilder) annotate(k, v string) *nodeBuilder {
	if b.n.Annotations == nil {
		b.n.Annotations = map[string]string{}
	}
	b.n.Annotations[k] = v
	return b
}

func (b *nodeBuilder) condition(t corev1.NodeConditionType, st corev1.ConditionStatus, msg string) *nodeBuilder {
	b.n.Status.Conditions = append(b.n.Status.Conditions, corev1.NodeCondition{Type: t, Status: st, Message: msg})
	return b
}

func (b *nodeBuilder) fenced(token int64, agents ...string) *nodeBuilder {
	return b.condition(FencedCondition, corev1.ConditionTrue, fenceMessage(token, agents))
}

func (b *nodeBuilder) obj() *corev1.Node { return b.n.DeepCopy() }

// nodeLease builds a node heart-beat lease renewed at renew.
func nodeLease(node string, renew time.Time) *coordinationv1.Lease {
	t := metav1.NewMicroTime(renew)
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: NodeLeaseNamespace, Name: node},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptrTo(node), RenewTime: &t},
	}
}

func ptrTo[T any](v T) *T { return &v }
