package fencing

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Policy decides, pod by pod, whether a pod on a node that stopped
// heart-beating justifies fencing the node (PS-14's "decide"). A node is
// fenced only if some pod on it justifies it, or an admin asked for it with
// AnnotationFenceRequest. Wants must be pure and safe for concurrent use: it
// is called from the controller's workers on informer objects it must not
// modify.
type Policy interface {
	Wants(pod *corev1.Pod) bool
}

// PolicyFunc adapts a function to Policy.
type PolicyFunc func(pod *corev1.Pod) bool

// Wants calls f.
func (f PolicyFunc) Wants(pod *corev1.Pod) bool { return f(pod) }

// DefaultPolicy is the policy of a Config without one. A pod justifies
// fencing its node when all of these hold:
//
//   - it is bound to a node (spec.nodeName is set);
//   - it is not terminal (phase is neither Succeeded nor Failed); a pod that
//     is terminating still counts, since its deletion cannot finish on a node
//     that is gone, and so does a pod the node lifecycle controller set to
//     Failed because its node was lost (condition podsafe.io/NodeDown True):
//     its kubelet never reported it stopped, so its processes may still run;
//   - it is a pet — its controller reference has kind StatefulSet (apps/v1,
//     or a look-alike of another API group) — or it carries
//     AnnotationFencing "true"; AnnotationFencing "false" opts a pet out;
//   - its spec.priority (0 when unset) is at least MinPriority, if set.
//
// Pets are the pods that at-most-one keeps from being replaced while their
// node is partitioned (PS-11, PS-12), so they are the ones that stay
// unavailable until their node is fenced; replicas of a ReplicaSet are
// replaced anyway (PS-7) and do not justify powering a node off.
type DefaultPolicy struct {
	// MinPriority, if set, is the lowest spec.priority that justifies
	// fencing; pods below it never do, whatever their annotations say.
	MinPriority *int32

	_ struct{}
}

// Wants implements Policy.
func (p DefaultPolicy) Wants(pod *corev1.Pod) bool {
	if pod == nil || pod.Spec.NodeName == "" {
		return false
	}
	if podTerminal(pod) {
		return false
	}
	if p.MinPriority != nil && podPriority(pod) < *p.MinPriority {
		return false
	}
	switch pod.Annotations[AnnotationFencing] {
	case "true":
		return true
	case "false":
		return false
	}
	return isPet(pod)
}

// isPet reports whether pod's controller is a StatefulSet.
func isPet(pod *corev1.Pod) bool {
	ref := metav1.GetControllerOf(pod)
	return ref != nil && ref.Kind == "StatefulSet"
}

// podPriority is pod's spec.priority, 0 when unset.
func podPriority(pod *corev1.Pod) int32 {
	if pod.Spec.Priority == nil {
		return 0
	}
	return *pod.Spec.Priority
}

// podConditionNodeDown is the pod condition the node lifecycle controller
// sets on pods of a node that stopped heart-beating (controller package's
// PodConditionNodeDown; components share API names, not code).
const podConditionNodeDown corev1.PodConditionType = "podsafe.io/NodeDown"

// podTerminal reports whether pod is known to have stopped: phase Succeeded
// or Failed, unless the phase was set for a lost node (NodeDown True) rather
// than reported by the pod's kubelet.
func podTerminal(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == podConditionNodeDown && c.Status == corev1.ConditionTrue {
			return false
		}
	}
	return true
}
