package fencing

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// Unfence is the admin action that undoes a fence; the controller never
// calls it, since a fenced node must not come back by itself (PS-14). admin
// is a clientset allowed to change FencedCondition (the admin or the
// fencing-controller identity).
//
// It calls every agent's Unfence in reverse order (so that storage and
// network are open again before the node is powered on), stopping at the
// first failure; then, on the Node, in three writes ordered so that a
// running controller never fences the node again nor re-applies the fence
// record halfway:
//
//  1. removes AnnotationFenceRequest (else the controller would fence the
//     node again as soon as the condition is cleared);
//  2. sets FencedCondition to False, reason ReasonUnfenced;
//  3. removes TaintFenced and AnnotationFenceToken and sets
//     spec.unschedulable to false.
//
// Timestamps are from the real clock. Unfencing a node that is not fenced
// clears what is left of a fence and is not an error.
func Unfence(ctx context.Context, admin kubernetes.Interface, agents []Agent, node string) error {
	for i := len(agents) - 1; i >= 0; i-- {
		a := agents[i]
		if err := a.Unfence(ctx, node); err != nil {
			return fmt.Errorf("unfencing node %s: agent %s: %w: %w", node, a.Name(), ErrAgentFailed, err)
		}
	}
	nodes := admin.CoreV1().Nodes()
	update := func(step string, change func(*corev1.Node) bool, write func(*corev1.Node) error) error {
		err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
			n, err := nodes.Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return err
			}
			n = n.DeepCopy()
			if !change(n) {
				return nil
			}
			return write(n)
		})
		if err != nil {
			return fmt.Errorf("unfencing node %s: %s: %w", node, step, err)
		}
		return nil
	}
	writeSpec := func(n *corev1.Node) error {
		_, err := nodes.Update(ctx, n, metav1.UpdateOptions{})
		return err
	}
	if err := update("removing the fence request", func(n *corev1.Node) bool {
		if _, ok := n.Annotations[AnnotationFenceRequest]; !ok {
			return false
		}
		delete(n.Annotations, AnnotationFenceRequest)
		return true
	}, writeSpec); err != nil {
		return err
	}
	if err := update("clearing condition "+string(FencedCondition), func(n *corev1.Node) bool {
		c := nodeCondition(n, FencedCondition)
		if c == nil || c.Status == corev1.ConditionFalse {
			return false
		}
		now := metav1.Now()
		setNodeCondition(n, corev1.NodeCondition{
			Type: FencedCondition, Status: corev1.ConditionFalse, Reason: ReasonUnfenced,
			Message: "fence undone by an admin", LastHeartbeatTime: now, LastTransitionTime: now,
		})
		return true
	}, func(n *corev1.Node) error {
		_, err := nodes.UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	}); err != nil {
		return err
	}
	return update("removing taint, token and cordon", func(n *corev1.Node) bool {
		changed := false
		if _, ok := n.Annotations[AnnotationFenceToken]; ok {
			delete(n.Annotations, AnnotationFenceToken)
			changed = true
		}
		kept := n.Spec.Taints[:0]
		for _, t := range n.Spec.Taints {
			if t.Key == TaintFenced {
				changed = true
				continue
			}
			kept = append(kept, t)
		}
		n.Spec.Taints = kept
		if n.Spec.Unschedulable {
			n.Spec.Unschedulable = false
			changed = true
		}
		return changed
	}, writeSpec)
}
