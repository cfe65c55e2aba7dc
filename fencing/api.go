package fencing

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// FencedCondition is the Node condition type the controller sets to True
// once every agent confirmed the node's fence. The API server lets the
// fencing identity force delete the node's pods and break its volume
// attachments only while it is True, and lets nobody but the fencing
// controller and admin change it, so a fenced node cannot unfence itself.
// It equals apiserver.FencedCondition; this package does not import the API
// server (components talk to it only through client-go).
const FencedCondition corev1.NodeConditionType = "podsafe.io/Fenced"

// Reasons of FencedCondition.
const (
	// ReasonFenced: every agent confirmed the fence (status True).
	ReasonFenced = "Fenced"
	// ReasonUnfenced: an admin undid the fence with Unfence (status False).
	ReasonUnfenced = "Unfenced"
)

// Annotations and the taint the controller reads and writes on Nodes and
// Pods.
const (
	// AnnotationFencing on a pod: "true" makes the pod justify fencing its
	// node under DefaultPolicy, "false" opts a pet out.
	AnnotationFencing = "podsafe.io/fencing"
	// AnnotationFenceRequest on a node, with any value, is an admin's request
	// to fence it whatever its lease says (a hung node that still
	// heart-beats) and whatever pods it runs.
	AnnotationFenceRequest = "podsafe.io/fence-request"
	// AnnotationFenceToken on a fenced node holds the decimal fence token its
	// fence was confirmed with (see FenceToken).
	AnnotationFenceToken = "podsafe.io/fence-token"
	// TaintFenced is the NoExecute taint put on a fenced node, next to
	// spec.unschedulable, so that nothing is scheduled or kept there.
	TaintFenced = "podsafe.io/fenced"
)

// The Lease that holds the cluster-wide fence token counter in
// spec.leaseTransitions. Every fence attempt increments it with a
// compare-and-swap, so tokens strictly increase across fences, controller
// restarts and concurrent controllers.
const (
	TokenLeaseNamespace = "kube-system"
	TokenLeaseName      = "podsafe-fence-token"
)

// NodeLeaseNamespace holds the node heart-beat leases, one per node, named
// after the node; spec.renewTime is the heart-beat.
const NodeLeaseNamespace = corev1.NamespaceNodeLease

// Event reasons the controller records.
const (
	// EventFenced on a Node: the fence is confirmed and recorded.
	EventFenced = "Fenced"
	// EventFenceFailed on a Node: an agent did not confirm; the fence is
	// retried (recorded once per episode).
	EventFenceFailed = "FenceFailed"
	// EventFenceDeferred on a Node: the node should be fenced but the
	// budget is used up (recorded once per episode).
	EventFenceDeferred = "FenceDeferred"
	// EventFenceNotNeeded on a Node: the node stopped heart-beating but no
	// pod on it justifies fencing (recorded once per episode).
	EventFenceNotNeeded = "FenceNotNeeded"
	// EventForceDeleted on a Pod: the pod was force deleted because its
	// node is fenced.
	EventForceDeleted = "FencedForceDeleted"
	// EventAttachmentBroken on a Node: a volume attachment to the fenced
	// node was deleted (PS-15).
	EventAttachmentBroken = "FencedAttachmentBroken"
)

// FenceToken returns the fence token recorded on node (annotation
// AnnotationFenceToken) and whether there is a valid one. It is pure.
func FenceToken(node *corev1.Node) (int64, bool) {
	if node == nil {
		return 0, false
	}
	v, ok := node.Annotations[AnnotationFenceToken]
	if !ok {
		return 0, false
	}
	t, err := strconv.ParseInt(v, 10, 64)
	if err != nil || t <= 0 {
		return 0, false
	}
	return t, true
}

// Fenced reports whether node carries FencedCondition with status True. It
// is pure.
func Fenced(node *corev1.Node) bool {
	c := nodeCondition(node, FencedCondition)
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

// setNodeCondition replaces or appends c.
func setNodeCondition(n *corev1.Node, c corev1.NodeCondition) {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == c.Type {
			n.Status.Conditions[i] = c
			return
		}
	}
	n.Status.Conditions = append(n.Status.Conditions, c)
}

// fencedTaint returns node's TaintFenced NoExecute taint, or nil.
func fencedTaint(node *corev1.Node) *corev1.Taint {
	for i := range node.Spec.Taints {
		t := &node.Spec.Taints[i]
		if t.Key == TaintFenced && t.Effect == corev1.TaintEffectNoExecute {
			return t
		}
	}
	return nil
}
