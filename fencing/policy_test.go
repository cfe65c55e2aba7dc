package fencing

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsafe/podsafe/controller"
)

func TestDefaultPolicyWants(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy DefaultPolicy
		pod    *corev1.Pod
		want   bool
	}{
		{name: "running pet", pod: makePod("p").node("n").pet().obj(), want: true},
		{name: "pending pet", pod: makePod("p").node("n").pet().phase(corev1.PodPending).obj(), want: true},
		{name: "terminating pet still counts", pod: makePod("p").node("n").pet().terminating().obj(), want: true},
		{name: "unbound pet", pod: makePod("p").pet().obj(), want: false},
		{name: "succeeded pet", pod: makePod("p").node("n").pet().phase(corev1.PodSucceeded).obj(), want: false},
		{name: "failed pet", pod: makePod("p").node("n").pet().phase(corev1.PodFailed).obj(), want: false},
		{name: "pet failed for a lost node may still run", pod: makePod("p").node("n").pet().phase(corev1.PodFailed).nodeDown().obj(), want: true},
		{name: "replica set pod", pod: makePod("p").node("n").owner("ReplicaSet").obj(), want: false},
		{name: "bare pod", pod: makePod("p").node("n").obj(), want: false},
		{name: "bare pod opted in", pod: makePod("p").node("n").annotate(AnnotationFencing, "true").obj(), want: true},
		{name: "pet opted out", pod: makePod("p").node("n").pet().annotate(AnnotationFencing, "false").obj(), want: false},
		{name: "other annotation value leaves the default", pod: makePod("p").node("n").pet().annotate(AnnotationFencing, "yes").obj(), want: true},
		{name: "terminal pod opted in", pod: makePod("p").node("n").phase(corev1.PodFailed).annotate(AnnotationFencing, "true").obj(), want: false},
		{name: "pet at min priority", policy: DefaultPolicy{MinPriority: ptrTo[int32](100)},
			pod: makePod("p").node("n").pet().priority(100).obj(), want: true},
		{name: "pet below min priority", policy: DefaultPolicy{MinPriority: ptrTo[int32](100)},
			pod: makePod("p").node("n").pet().priority(99).obj(), want: false},
		{name: "opted in below min priority", policy: DefaultPolicy{MinPriority: ptrTo[int32](100)},
			pod: makePod("p").node("n").annotate(AnnotationFencing, "true").priority(5).obj(), want: false},
		{name: "no priority counts as 0", policy: DefaultPolicy{MinPriority: ptrTo[int32](1)},
			pod: makePod("p").node("n").pet().obj(), want: false},
		{name: "negative min priority admits unset", policy: DefaultPolicy{MinPriority: ptrTo[int32](-10)},
			pod: makePod("p").node("n").pet().obj(), want: true},
		{name: "nil pod", pod: nil, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.policy.Wants(tc.pod); got != tc.want {
				t.Errorf("Wants = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPolicyFunc(t *testing.T) {
	var p Policy = PolicyFunc(func(pod *corev1.Pod) bool { return pod.Name == "yes" })
	if !p.Wants(makePod("yes").obj()) || p.Wants(makePod("no").obj()) {
		t.Error("PolicyFunc does not call its function")
	}
}

// The policy reads the node lifecycle controller's condition by name.
func TestNodeDownConditionMatchesController(t *testing.T) {
	if podConditionNodeDown != controller.PodConditionNodeDown {
		t.Fatalf("podConditionNodeDown %q != controller.PodConditionNodeDown %q", podConditionNodeDown, controller.PodConditionNodeDown)
	}
}
