package apiserver

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The identities the API server knows. A bearer token maps to exactly one of
// them (Config.Tokens); the authority rules in authority.go decide what each
// may do. Kubelets are identified per node: see KubeletIdentity.
const (
	// IdentityAdmin is a person or the test harness acting as cluster admin:
	// allowed everything, including force deletion (PS-16's confirmed user).
	IdentityAdmin = "admin"
	// IdentityScheduler binds pods and writes scheduling conditions.
	IdentityScheduler = "scheduler"
	// IdentityNodeController watches node leases and marks nodes and their
	// pods as unreachable; it only deletes pods gracefully (PS-9).
	IdentityNodeController = "node-controller"
	// IdentityPodGC garbage-collects pods; it may force delete pods whose node
	// object no longer exists (PS-10).
	IdentityPodGC = "podgc"
	// IdentityPetController runs the StatefulSet-like pet controller (PS-11).
	IdentityPetController = "pet-controller"
	// IdentityReplicaSetController runs the ReplicaSet controller (PS-7).
	IdentityReplicaSetController = "replicaset-controller"
	// IdentityFencingController fences partitioned nodes and may force delete
	// the pods of a node whose fence is confirmed (PS-14).
	IdentityFencingController = "fencing-controller"
	// IdentityAttachDetachController attaches RWO volumes to the nodes of
	// the pods that use them and detaches them once those pods are gone
	// (PS-15).
	IdentityAttachDetachController = "attachdetach-controller"
	// IdentityDisruptionController keeps the status of PodDisruptionBudgets
	// (PR-7).
	IdentityDisruptionController = "disruption-controller"
	// IdentityWorkload is an ordinary user creating and deleting workloads.
	IdentityWorkload = "workload"

	// KubeletIdentityPrefix starts every kubelet identity: "kubelet:NODE".
	KubeletIdentityPrefix = "kubelet:"
)

// FencedCondition is the Node condition type a fencing controller sets to
// True once it has confirmed that the node is fenced (powered off, cut from
// storage or the network). It licenses the fencing controller to force delete
// the node's pods (PS-14), and only the fencing controller or admin may change
// it, so a fenced node cannot unfence itself.
const FencedCondition corev1.NodeConditionType = "podsafe.io/Fenced"

// FencedTaint and FenceTokenAnnotation are what a fencing controller puts on
// a fenced node besides FencedCondition (a NoExecute taint and the fence
// token); while the node is fenced only the fencing controller and admin may
// remove them or uncordon the node.
const (
	FencedTaint          = "podsafe.io/fenced"
	FenceTokenAnnotation = "podsafe.io/fence-token"
)

// KubeLeaseNamespace holds the node heart-beat leases, one per node, named
// after the node.
const KubeLeaseNamespace = corev1.NamespaceNodeLease

// KubeletIdentity returns the identity of the kubelet of node.
func KubeletIdentity(node string) string { return KubeletIdentityPrefix + node }

// KubeletNode returns the node of a kubelet identity, and false for every
// other identity.
func KubeletNode(identity string) (string, bool) {
	node, ok := strings.CutPrefix(identity, KubeletIdentityPrefix)
	if !ok || node == "" {
		return "", false
	}
	return node, true
}

// KnownIdentity reports whether identity is one of the identity constants or
// a kubelet identity with a non-empty node name.
func KnownIdentity(identity string) bool {
	switch identity {
	case IdentityAdmin, IdentityScheduler, IdentityNodeController, IdentityPodGC,
		IdentityPetController, IdentityReplicaSetController, IdentityFencingController,
		IdentityWorkload, IdentityAttachDetachController, IdentityDisruptionController:
		return true
	}
	_, ok := KubeletNode(identity)
	return ok
}

// identityKey is the context key of the authenticated identity.
type identityKey struct{}

// withIdentity returns ctx carrying the authenticated identity.
func withIdentity(ctx context.Context, identity string) context.Context {
	return context.WithValue(ctx, identityKey{}, identity)
}

// IdentityFrom returns the identity the request carrying ctx was
// authenticated as, or "" before authentication.
func IdentityFrom(ctx context.Context) string {
	id, _ := ctx.Value(identityKey{}).(string)
	return id
}
