package apiserver

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestDefaultPriorityClass: preemptionPolicy PreemptLowerPriority unless
// the class says Never.
func TestDefaultPriorityClass(t *testing.T) {
	for _, tc := range []struct {
		in, want *corev1.PreemptionPolicy
	}{
		{nil, ptr.To(corev1.PreemptLowerPriority)},
		{ptr.To(corev1.PreemptNever), ptr.To(corev1.PreemptNever)},
	} {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Value: 5}
		pc.PreemptionPolicy = tc.in
		applyDefaults(pc)
		if d := cmp.Diff(tc.want, pc.PreemptionPolicy); d != "" {
			t.Errorf("(-want +got)\n%s", d)
		}
	}
}

// TestDefaultPodVersusTemplate: a pod gets SetDefaults_Pod on top of the
// pod spec defaults a template gets: a negative grace becomes 1 s, limits
// become requests, service links are enabled.
func TestDefaultPodVersusTemplate(t *testing.T) {
	tmpl := simTemplate("p")
	tmpl.Spec.TerminationGracePeriodSeconds = ptr.To[int64](-5)
	tmpl.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
	pod := &corev1.Pod{Spec: *tmpl.Spec.DeepCopy()}
	applyDefaults(pod)
	defaultPodSpec(&tmpl.Spec)
	want := tmpl.Spec.DeepCopy()
	want.TerminationGracePeriodSeconds = ptr.To[int64](1)
	want.EnableServiceLinks = ptr.To(true)
	want.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
	if d := cmp.Diff(want, &pod.Spec); d != "" {
		t.Errorf("pod spec (-want +got)\n%s", d)
	}
	if g := *tmpl.Spec.TerminationGracePeriodSeconds; g != -5 {
		t.Errorf("template grace %d, want -5 kept", g)
	}
}
