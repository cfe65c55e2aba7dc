package apiserver

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
	// IdentityDeploymentController runs the deployment controller: it
	// writes ReplicaSets and the Deployments' status, never pods (PS-7).
	IdentityDeploymentController = "deployment-controller"
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
	// IdentityGarbageCollector runs the garbage collector: it deletes
	// dependents whose owners are gone or deleted in the foreground
	// (gracefully, PS-9), and removes owner references and the orphan and
	// foregroundDeletion finalizers.
	IdentityGarbageCollector = "garbage-collector"
	// IdentityNamespaceController deletes the content of terminating
	// namespaces (gracefully, PS-9) and then finalizes them.
	IdentityNamespaceController = "namespace-controller"
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
		IdentityPetController, IdentityReplicaSetController, IdentityDeploymentController, IdentityFencingController,
		IdentityGarbageCollector, IdentityNamespaceController,
		IdentityWorkload, IdentityAttachDetachController, IdentityDisruptionController:
		return true
	}
	_, ok := KubeletNode(identity)
	return ok
}

// NodeUserPrefix starts the user name kube-apiserver gives a node's kubelet
// ("system:node:NODE"). podsafe names that identity KubeletIdentity(NODE);
// impersonation accepts either spelling (IdentityForUser).
const NodeUserPrefix = "system:node:"

// The groups podsafe's identities belong to, as kube-apiserver names them.
// Authority in podsafe depends on the identity alone (authority.go), so the
// groups are fixed by it: they are reported (SelfSubjectReview) and checked
// when impersonated, never consulted by a rule.
const (
	GroupAuthenticated = "system:authenticated"
	GroupMasters       = "system:masters"
	GroupNodes         = "system:nodes"
)

// IdentityGroups returns the groups of identity: system:masters for admin
// (which may do everything, as that group may upstream), system:nodes for a
// kubelet, and system:authenticated for every identity, last, as
// kube-apiserver appends it. It is pure.
func IdentityGroups(identity string) []string {
	switch {
	case identity == IdentityAdmin:
		return []string{GroupMasters, GroupAuthenticated}
	case isKubelet(identity):
		return []string{GroupNodes, GroupAuthenticated}
	}
	return []string{GroupAuthenticated}
}

// IdentityForUser maps a user name as kubectl users type it (--as) to the
// podsafe identity it names: "system:node:NODE" is KubeletIdentity(NODE),
// every other name is taken as an identity name. It does not check that
// the identity exists. It is pure.
func IdentityForUser(user string) string {
	if node, ok := strings.CutPrefix(user, NodeUserPrefix); ok && node != "" {
		return KubeletIdentity(node)
	}
	return user
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

// FenceRequestAnnotation on a node, with any value, is an admin's request
// that the fencing controller fence it. With FencedTaint, FencedCondition and
// FenceTokenAnnotation it is part of the fence record that only the fencing
// controller and admin may change (PS-14).
const FenceRequestAnnotation = "podsafe.io/fence-request"

// FenceTokenLeaseNamespace and FenceTokenLeaseName name the Lease whose
// spec.leaseTransitions is the cluster-wide fence token counter: only the
// fencing controller and admin write it, so tokens strictly increase
// (PS-14).
const (
	FenceTokenLeaseNamespace = "kube-system"
	FenceTokenLeaseName      = "podsafe-fence-token"
)

// Grant lets an identity make the write Verbs on Resource (and
// Subresource, "" for the object itself). Namespace and Name, when set,
// narrow it to objects of that namespace and name.
type Grant struct {
	Resource        schema.GroupResource
	Subresource     string
	Verbs           []string
	Namespace, Name string
}

// String renders a grant as resource[/subresource] verbs, for docs and
// test failures.
func (g Grant) String() string {
	what := g.Resource.String()
	if g.Subresource != "" {
		what += "/" + g.Subresource
	}
	if g.Namespace != "" || g.Name != "" {
		what += fmt.Sprintf(" (%s)", objectRef(g.Namespace, g.Name))
	}
	return what + " " + strings.Join(g.Verbs, ",")
}

// matches reports whether g covers the write req.
func (g Grant) matches(req Request) bool {
	if g.Resource != req.Resource || g.Subresource != req.Subresource || !slices.Contains(g.Verbs, req.Verb) {
		return false
	}
	if g.Namespace != "" && g.Namespace != req.Namespace {
		return false
	}
	return g.Name == "" || g.Name == requestName(req)
}

var (
	grNamespaces   = schema.GroupResource{Resource: "namespaces"}
	grServices     = schema.GroupResource{Resource: "services"}
	grEvents       = schema.GroupResource{Resource: "events"}
	grEventsV1     = schema.GroupResource{Group: "events.k8s.io", Resource: "events"}
	grStatefulSets = schema.GroupResource{Group: "apps", Resource: "statefulsets"}
	grReplicaSets  = schema.GroupResource{Group: "apps", Resource: "replicasets"}
	grDeployments  = schema.GroupResource{Group: "apps", Resource: "deployments"}
)

// Write verb sets of the grant table.
var (
	verbsCreate = []string{VerbCreate}
	// verbsEvent are a recorder's writes: client-go's EventCorrelator
	// creates an Event and patches its count when it repeats.
	verbsEvent  = []string{VerbCreate, VerbPatch}
	verbsUpdate = []string{VerbUpdate, VerbPatch}
	verbsDelete = []string{VerbDelete}
	verbsAll    = []string{VerbCreate, VerbUpdate, VerbPatch, VerbDelete, VerbDeleteCollection}
)

// writeGrants is the write table: every write each identity may make,
// derived from the calls podsafe's components make (cited per row). A write
// no row grants is refused (see Authorize), and a granted write is still
// judged by the rules of authority.go and noderestriction.go. Admin is not
// in the table: it may make every write (the confirmed user of PS-16).
// Every kubelet shares the kubeletGrants row, narrowed to its own node by
// the node restriction.
var writeGrants = map[string][]Grant{
	// scheduler/binder.go: bind, nominate and condition patches, graceful
	// deletion of preemption victims; its events (events.go: Scheduled,
	// FailedScheduling, Preempted).
	IdentityScheduler: {
		{Resource: grPods, Subresource: subBinding, Verbs: verbsCreate},
		{Resource: grPods, Subresource: subStatus, Verbs: verbsUpdate},
		{Resource: grPods, Verbs: verbsDelete},
		{Resource: grEvents, Verbs: verbsEvent},
	},
	// controller/nodelifecycle.go: Ready=Unknown and the unreachable taint
	// on nodes, NodeDown on pods, graceful deletion of their pods; its
	// events (NodeNotReady, TaintManagerEviction).
	IdentityNodeController: {
		{Resource: grEvents, Verbs: verbsEvent},
		{Resource: grNodes, Verbs: verbsUpdate},
		{Resource: grNodes, Subresource: subStatus, Verbs: verbsUpdate},
		{Resource: grPods, Subresource: subStatus, Verbs: verbsUpdate},
		{Resource: grPods, Verbs: verbsDelete},
	},
	// controller/podgc.go: deletion of terminated and orphaned pods.
	IdentityPodGC: {
		{Resource: grPods, Verbs: verbsDelete},
	},
	// controller/pet.go: pets created and deleted, the set's status; its
	// events (SuccessfulCreate, SuccessfulDelete).
	IdentityPetController: {
		{Resource: grEvents, Verbs: verbsEvent},
		{Resource: grPods, Verbs: []string{VerbCreate, VerbDelete}},
		{Resource: grStatefulSets, Subresource: subStatus, Verbs: verbsUpdate},
	},
	// controller/replicaset.go: replicas created and deleted, the set's
	// status; its events (SuccessfulCreate, SuccessfulDelete).
	IdentityReplicaSetController: {
		{Resource: grEvents, Verbs: verbsEvent},
		{Resource: grPods, Verbs: []string{VerbCreate, VerbDelete}},
		{Resource: grReplicaSets, Subresource: subStatus, Verbs: verbsUpdate},
	},
	// controller/deployment*.go: ReplicaSets created, scaled and
	// annotated, old ones deleted past the revision history, the
	// Deployments' status and revision annotation (kube-apiserver takes
	// that annotation from a status write; podsafe's status writes keep
	// only the status, so it is an update). Pods are left to the
	// ReplicaSet controller.
	IdentityDeploymentController: {
		{Resource: grDeployments, Verbs: verbsUpdate},
		{Resource: grReplicaSets, Verbs: []string{VerbCreate, VerbUpdate, VerbPatch, VerbDelete}},
		{Resource: grReplicaSets, Subresource: subScale, Verbs: verbsUpdate},
		{Resource: grDeployments, Subresource: subStatus, Verbs: verbsUpdate},
	},
	// controller/gc.go: dependents deleted (never force: PS-9), their
	// ownerReferences to orphaning owners removed, the orphan and
	// foregroundDeletion finalizers removed from owners. Only what can
	// own or be owned in podsafe: workloads, their pods and the objects
	// users hang on them.
	IdentityGarbageCollector: {
		{Resource: grPods, Verbs: []string{VerbUpdate, VerbPatch, VerbDelete}},
		{Resource: grReplicaSets, Verbs: []string{VerbUpdate, VerbPatch, VerbDelete}},
		{Resource: grStatefulSets, Verbs: []string{VerbUpdate, VerbPatch, VerbDelete}},
		{Resource: grDeployments, Verbs: []string{VerbUpdate, VerbPatch, VerbDelete}},
		{Resource: grServices, Verbs: []string{VerbUpdate, VerbPatch, VerbDelete}},
		{Resource: grPDBs, Verbs: []string{VerbUpdate, VerbPatch, VerbDelete}},
		{Resource: grLeases, Verbs: []string{VerbUpdate, VerbPatch, VerbDelete}},
		{Resource: grNamespaces, Verbs: verbsUpdate},
	},
	// controller/namespace.go: the content of a terminating namespace
	// deleted (pods gracefully, PS-9), the namespace's conditions, its
	// finalizer removed.
	IdentityNamespaceController: {
		{Resource: grPods, Verbs: verbsDelete},
		{Resource: grReplicaSets, Verbs: verbsDelete},
		{Resource: grStatefulSets, Verbs: verbsDelete},
		{Resource: grDeployments, Verbs: verbsDelete},
		{Resource: grServices, Verbs: verbsDelete},
		{Resource: grPDBs, Verbs: verbsDelete},
		{Resource: grLeases, Verbs: verbsDelete},
		{Resource: grEvents, Verbs: verbsDelete},
		{Resource: grEventsV1, Verbs: verbsDelete},
		{Resource: grNamespaces, Subresource: subStatus, Verbs: verbsUpdate},
		{Resource: grNamespaces, Subresource: subFinalize, Verbs: []string{VerbUpdate}},
	},
	// controller/attachdetach.go: attachments created, marked attached
	// and deleted.
	IdentityAttachDetachController: {
		{Resource: grVolumeAttachments, Verbs: []string{VerbCreate, VerbUpdate, VerbPatch, VerbDelete}},
		{Resource: grVolumeAttachments, Subresource: subStatus, Verbs: verbsUpdate},
	},
	// controller/disruption.go: the budgets' status.
	IdentityDisruptionController: {
		{Resource: grPDBs, Subresource: subStatus, Verbs: verbsUpdate},
	},
	// fencing/: the fence token lease (token.go), the fence record and its
	// removal (record.go, unfence.go), force deletion of a fenced node's
	// pods and attachments (forcedelete.go), its events (controller.go).
	IdentityFencingController: {
		{Resource: grLeases, Verbs: []string{VerbCreate, VerbUpdate, VerbPatch}, Namespace: FenceTokenLeaseNamespace, Name: FenceTokenLeaseName},
		{Resource: grNodes, Verbs: verbsUpdate},
		{Resource: grNodes, Subresource: subStatus, Verbs: verbsUpdate},
		{Resource: grPods, Verbs: verbsDelete},
		{Resource: grVolumeAttachments, Verbs: verbsDelete},
		{Resource: grEvents, Verbs: verbsEvent},
	},
	// The written-down exception: workload is an ordinary user running
	// applications (workload/, specs/). It writes what an application
	// owner writes, in any namespace: pods (unbound, LC-3), their
	// evictions, the sets and their scale, budgets, leases (its
	// registers), services and events; and it sets up the namespaces and
	// priority classes its scenario names. It writes no status, binds
	// nothing and touches no node or attachment.
	IdentityWorkload: {
		{Resource: grPods, Verbs: verbsAll},
		{Resource: grPods, Subresource: subEviction, Verbs: verbsCreate},
		{Resource: grStatefulSets, Verbs: verbsAll},
		{Resource: grStatefulSets, Subresource: subScale, Verbs: verbsUpdate},
		{Resource: grReplicaSets, Verbs: verbsAll},
		{Resource: grReplicaSets, Subresource: subScale, Verbs: verbsUpdate},
		{Resource: grDeployments, Verbs: verbsAll},
		{Resource: grDeployments, Subresource: subScale, Verbs: verbsUpdate},
		{Resource: grPDBs, Verbs: verbsAll},
		{Resource: grLeases, Verbs: verbsAll},
		{Resource: grServices, Verbs: verbsAll},
		{Resource: grEvents, Verbs: verbsAll},
		{Resource: grEventsV1, Verbs: verbsAll},
		{Resource: grNamespaces, Verbs: verbsAll},
		{Resource: grPriorityClasses, Verbs: verbsAll},
	},
}

// kubeletGrants is every kubelet's row of the write table (kubelet/):
// register and heart-beat its Node (node.go; the cluster registers nodes
// with the same identity), renew its Lease (lease.go), report and finish
// its pods (status.go), record its events (events.go). Upstream's
// system:node role also lets a node create mirror pods and delete its
// lease; podsafe's kubelets do neither, so they are refused.
var kubeletGrants = []Grant{
	{Resource: grEvents, Verbs: verbsEvent},
	{Resource: grNodes, Verbs: []string{VerbCreate, VerbUpdate, VerbPatch}},
	{Resource: grNodes, Subresource: subStatus, Verbs: verbsUpdate},
	{Resource: grLeases, Verbs: []string{VerbCreate, VerbUpdate, VerbPatch}, Namespace: KubeLeaseNamespace},
	{Resource: grPods, Subresource: subStatus, Verbs: verbsUpdate},
	{Resource: grPods, Verbs: verbsDelete},
	{Resource: grPods, Subresource: subEviction, Verbs: verbsCreate},
}

// GrantsOf returns identity's row of the write table, and all true for
// admin, who may make every write. A kubelet's row is kubeletGrants; an
// unknown identity has none.
func GrantsOf(identity string) (grants []Grant, all bool) {
	if identity == IdentityAdmin {
		return nil, true
	}
	if isKubelet(identity) {
		return kubeletGrants, false
	}
	return writeGrants[identity], false
}

// granted reports whether the write table lets req's identity make req.
func granted(req Request) bool {
	grants, all := GrantsOf(req.Identity)
	return all || slices.ContainsFunc(grants, func(g Grant) bool { return g.matches(req) })
}
