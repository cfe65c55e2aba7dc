package fencing

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
)

// heartbeat returns node's last heart-beat as the node reported it: its
// lease's spec.renewTime; without a lease (or a renewal), the Ready
// condition's lastHeartbeatTime; without either, the node's creation time.
// It is pure.
func heartbeat(node *corev1.Node, lease *coordinationv1.Lease) time.Time {
	if lease != nil && lease.Spec.RenewTime != nil {
		return lease.Spec.RenewTime.Time
	}
	if c := nodeCondition(node, corev1.NodeReady); c != nil && !c.LastHeartbeatTime.IsZero() {
		return c.LastHeartbeatTime.Time
	}
	return node.CreationTimestamp.Time
}

// observation is what the controller saw of one node's heart-beat: the last
// heart-beat value, and when (on the controller's clock) it first saw that
// value.
type observation struct {
	beat time.Time
	seen time.Time
}

// observe returns the observation after seeing beat at now: unchanged if
// the beat is the one already observed, otherwise the new beat seen now. It
// is pure.
func observe(prev observation, known bool, beat, now time.Time) observation {
	if known && prev.beat.Equal(beat) {
		return prev
	}
	return observation{beat: beat, seen: now}
}

// stale reports whether a node is stale at now: its last heart-beat is older
// than threshold on the controller's clock, AND the controller has not seen
// that heart-beat change for threshold either. The first condition is the
// lease rule; the second keeps a node alive whose kubelet renews its lease
// but whose clock lags (a renewal the controller sees is proof of life
// whatever time it carries), and gives every node a full threshold after
// the controller starts, as Kubernetes' node lifecycle controller does. It
// is pure.
func stale(obs observation, now time.Time, threshold time.Duration) bool {
	return now.Sub(obs.beat) > threshold && now.Sub(obs.seen) > threshold
}

// Why a node is a fencing candidate.
type candidacy int

const (
	notCandidate candidacy = iota
	// candidateStale: the node stopped heart-beating.
	candidateStale
	// candidateRequested: an admin asked for the fence
	// (AnnotationFenceRequest); pods and lease do not matter.
	candidateRequested
)

// String names the candidacy for logs.
func (c candidacy) String() string {
	switch c {
	case candidateStale:
		return "heart-beat stale"
	case candidateRequested:
		return "fence requested"
	}
	return "not a candidate"
}

// candidate decides whether node is a fencing candidate at now, given the
// observation of its heart-beat. Nodes already fenced are not candidates:
// they are finished, not fenced again. It is pure.
func candidate(node *corev1.Node, obs observation, now time.Time, threshold time.Duration) candidacy {
	switch {
	case Fenced(node):
		return notCandidate
	case hasFenceRequest(node):
		return candidateRequested
	case stale(obs, now, threshold):
		return candidateStale
	}
	return notCandidate
}

// hasFenceRequest reports whether node carries AnnotationFenceRequest.
func hasFenceRequest(node *corev1.Node) bool {
	_, ok := node.Annotations[AnnotationFenceRequest]
	return ok
}

// justified reports whether a candidate should be fenced: an admin asked
// for it, or some pod on it (pods are the pods bound to the node) justifies
// it under policy. It returns the first pod that does, for the log. An empty
// node is never fenced for staleness: there is nothing to recover. It is
// pure as long as policy is.
func justified(why candidacy, pods []*corev1.Pod, policy Policy) (bool, *corev1.Pod) {
	for _, p := range pods {
		if policy.Wants(p) {
			return true, p
		}
	}
	return why == candidateRequested, nil
}
