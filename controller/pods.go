package controller

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// podTerminating reports whether a pod has begun graceful deletion.
func podTerminating(p *corev1.Pod) bool { return p.DeletionTimestamp != nil }

// podTerminal reports whether a pod's phase is Succeeded or Failed.
func podTerminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// podActive reports whether a pod counts toward a replica count: not
// terminating and not terminated.
func podActive(p *corev1.Pod) bool { return !podTerminating(p) && !podTerminal(p) }

// podReady reports whether the pod's Ready condition is True.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// nodeReady reports whether node's Ready condition is True.
func nodeReady(n *corev1.Node) bool {
	c := nodeCondition(n, corev1.NodeReady)
	return c != nil && c.Status == corev1.ConditionTrue
}

// nodeCondition returns n's condition of type t, or nil.
func nodeCondition(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	if n == nil {
		return nil
	}
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// ownedBy reports whether obj's controller reference names uid.
func ownedBy(obj metav1.Object, uid types.UID) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID == uid
}

// controllerKey returns the "namespace/name" key of obj's controller of the
// given kind, or "" if it has none.
func controllerKey(obj metav1.Object, kind string) string {
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.Kind != kind {
		return ""
	}
	return obj.GetNamespace() + "/" + ref.Name
}

// podFromObj unwraps an informer object or tombstone into a pod.
func podFromObj(obj any) *corev1.Pod {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	p, _ := obj.(*corev1.Pod)
	return p
}

// preconditionUID makes a delete apply only to the pod instance the
// controller decided about, never to a successor with the same name.
func preconditionUID(uid types.UID) metav1.DeleteOptions {
	return metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
}

// everything selects all objects of a lister.
var everything = labels.Everything()
