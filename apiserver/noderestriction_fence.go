package apiserver

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// The fence record is what a fencing controller writes on a Node it has
// fenced: FencedCondition (every field), the FencedTaint taints (key, value,
// effect, timeAdded), the FenceTokenAnnotation and FenceRequestAnnotation
// annotations, and, while the node is fenced, spec.unschedulable. Only the
// fencing controller and admin may change any of it (PS-14): a weakened
// record (a PreferNoSchedule fence taint, a False or rewritten condition, a
// lost token, an uncordon) would let a fenced node come back to life, or
// let its pods be scheduled or kept there, without anyone deciding it.

// fenceRecordChange names the first part of the fence record that differs
// between two versions of a node, or "" when the record is the same. A nil
// old node is a node being created: any fence record on it is a change.
func fenceRecordChange(oldNode, newNode *corev1.Node) string {
	if newNode == nil {
		return ""
	}
	if oldNode == nil {
		oldNode = &corev1.Node{}
	}
	a, b := nodeCondition(oldNode, FencedCondition), nodeCondition(newNode, FencedCondition)
	switch {
	case (a == nil) != (b == nil) || (a != nil && !apiequality.Semantic.DeepEqual(*a, *b)):
		return "condition " + string(FencedCondition)
	case !apiequality.Semantic.DeepEqual(fenceTaints(oldNode), fenceTaints(newNode)):
		return "taint " + FencedTaint
	}
	for _, key := range []string{FenceTokenAnnotation, FenceRequestAnnotation} {
		av, aok := oldNode.Annotations[key]
		bv, bok := newNode.Annotations[key]
		if av != bv || aok != bok {
			return "annotation " + key
		}
	}
	if underFence(oldNode) && oldNode.Spec.Unschedulable != newNode.Spec.Unschedulable {
		return "spec.unschedulable of a fenced node"
	}
	return ""
}

// fenceTaints returns node's FencedTaint taints in order.
func fenceTaints(node *corev1.Node) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range node.Spec.Taints {
		if t.Key == FencedTaint {
			out = append(out, t)
		}
	}
	return out
}

// underFence reports whether node carries any part of a fence: the
// condition True, the taint or the token. Its cordon is then part of the
// record.
func underFence(node *corev1.Node) bool {
	_, token := node.Annotations[FenceTokenAnnotation]
	return nodeFenced(node) || token || slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == FencedTaint })
}

// nodeFenced reports whether node carries the fence condition with status True.
func nodeFenced(node *corev1.Node) bool {
	c := nodeCondition(node, FencedCondition)
	return c != nil && c.Status == corev1.ConditionTrue
}

// nodeReady reports whether node exists and its Ready condition is True.
func nodeReady(node *corev1.Node) bool {
	c := nodeCondition(node, corev1.NodeReady)
	return c != nil && c.Status == corev1.ConditionTrue
}

// nodeCondition returns node's condition of type t, or nil.
func nodeCondition(node *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	if node == nil {
		return nil
	}
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == t {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}
