package record

import (
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/podsafe/podsafe/apiserver"
)

// Identities of real components that podsafe's embedded cluster does not
// have.
const (
	// IdentityControllerManager is kube-controller-manager's own user,
	// system:kube-controller-manager. With --use-service-account-credentials
	// (which the kube target must set) each controller calls the API as its
	// own service account and this user only renews the leader lease, runs
	// the shared informers and asks for the controllers' tokens; without it
	// every controller's call would carry this one name and the checkers
	// could not tell pod GC from the ReplicaSet controller. It is none of
	// podsafe's controller identities, so a force deletion under it is
	// judged as a controller's (PS-9).
	IdentityControllerManager = "kube-controller-manager"
	// IdentityAPIServer is kube-apiserver's loopback user, system:apiserver:
	// the API server's own bootstrap writes (default namespaces, priority
	// classes, its identity lease). It is in group system:masters but it is
	// not the harness's admin.
	IdentityAPIServer = "kube-apiserver"
	// UnknownIdentityPrefix starts the identity of a user no rule maps:
	// "user:" and the user name, "user:(unauthenticated)" for a request
	// that carried none. No podsafe identity starts with it, so no checker
	// mistakes such a user for one of its own.
	UnknownIdentityPrefix = "user:"
)

// Real user and group names (Kubernetes' own spelling).
const (
	nodeUserPrefix           = "system:node:"
	nodesGroup               = "system:nodes"
	mastersGroup             = "system:masters"
	kubeSystemAccountPrefix  = "system:serviceaccount:kube-system:"
	schedulerUser            = "system:kube-scheduler"
	controllerManagerUser    = "system:kube-controller-manager"
	apiServerUser            = "system:apiserver"
	unauthenticatedUserLabel = "(unauthenticated)"
)

// fixedUsers maps the control plane's own users to podsafe identities.
var fixedUsers = map[string]string{
	schedulerUser:         apiserver.IdentityScheduler,
	controllerManagerUser: IdentityControllerManager,
	apiServerUser:         IdentityAPIServer,
}

// kubeSystemAccounts maps the kube-system service accounts of
// kube-controller-manager's controllers to the podsafe controller playing
// the same part. taint-eviction-controller (NoExecute taint evictions,
// split from the node lifecycle controller in 1.29) maps to the node
// controller: podsafe's node lifecycle controller does those evictions
// itself, and both only delete gracefully, which is what the authority
// checker expects of node-controller (PS-9). kube-controller-manager 1.37
// runs that controller with the node-controller account anyway; the entry
// covers builds that give it its own.
var kubeSystemAccounts = map[string]string{
	"statefulset-controller":    apiserver.IdentityPetController,
	"replicaset-controller":     apiserver.IdentityReplicaSetController,
	"node-controller":           apiserver.IdentityNodeController,
	"taint-eviction-controller": apiserver.IdentityNodeController,
	"pod-garbage-collector":     apiserver.IdentityPodGC,
	"attachdetach-controller":   apiserver.IdentityAttachDetachController,
	"disruption-controller":     apiserver.IdentityDisruptionController,
	"deployment-controller":     apiserver.IdentityDeploymentController,
	"generic-garbage-collector": apiserver.IdentityGarbageCollector,
	"namespace-controller":      apiserver.IdentityNamespaceController,
}

// Identity maps a real user, by its name and groups as the API server
// authenticated it, to the podsafe identity the checkers know it by:
//
//   - system:node:NAME in group system:nodes (a kubelet, as the Node
//     authorizer identifies it): "kubelet:NAME";
//   - system:kube-scheduler: "scheduler";
//   - system:kube-controller-manager: IdentityControllerManager;
//   - system:apiserver: IdentityAPIServer;
//   - the kube-system service accounts of the controllers podsafe has a
//     counterpart of: statefulset-controller "pet-controller",
//     replicaset-controller, node-controller (and taint-eviction-controller)
//     "node-controller", pod-garbage-collector "podgc",
//     attachdetach-controller, disruption-controller, deployment-controller,
//     generic-garbage-collector "garbage-collector", namespace-controller;
//   - any other member of system:masters (unconditionally allowed
//     everything): "admin".
//
// Every other user is unknown: known is false and the identity is
// UnknownIdentityPrefix and the user name. The harness's own users (the
// workload, the fencing controller, an admin not in system:masters) are
// the caller's to name: see IdentityMap.
func Identity(user string, groups []string) (identity string, known bool) {
	if node, ok := strings.CutPrefix(user, nodeUserPrefix); ok && node != "" && slices.Contains(groups, nodesGroup) {
		return apiserver.KubeletIdentityPrefix + node, true
	}
	if id, ok := fixedUsers[user]; ok {
		return id, true
	}
	if sa, ok := strings.CutPrefix(user, kubeSystemAccountPrefix); ok {
		if id, ok := kubeSystemAccounts[sa]; ok {
			return id, true
		}
	}
	if slices.Contains(groups, mastersGroup) {
		return apiserver.IdentityAdmin, true
	}
	if user == "" {
		return UnknownIdentityPrefix + unauthenticatedUserLabel, false
	}
	return UnknownIdentityPrefix + user, false
}

// IdentityMap maps real users to podsafe identities: the entries the
// caller adds (the harness's own users, by exact user name) first, then
// the rules of Identity. It also knows which users are podsafe's own
// clients, whose calls its recording transport already records, so that
// the audit log does not record them twice. Its methods are safe for
// concurrent use; the zero value is an empty map.
type IdentityMap struct {
	mu    sync.RWMutex
	users map[string]string // caller's entries: user -> identity
	own   map[string]bool   // users whose calls podsafe records itself
	seen  map[string]string // users mapped by a rule so far -> identity
}

// NewIdentityMap returns a map with no entries of its own: the rules of
// Identity only.
func NewIdentityMap() *IdentityMap {
	return &IdentityMap{users: map[string]string{}, own: map[string]bool{}, seen: map[string]string{}}
}

// Add maps the user named user to identity; it wins over the rules of
// Identity and over an earlier Add of the same user.
func (m *IdentityMap) Add(user, identity string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.initLocked()
	m.users[user] = identity
	delete(m.own, user)
}

// AddOwn maps user to identity and marks it as one of podsafe's own
// clients, whose calls its recording transport already records: Skipped
// reports it and Convert drops its audit events.
func (m *IdentityMap) AddOwn(user, identity string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.initLocked()
	m.users[user] = identity
	m.own[user] = true
}

// Identity returns the identity of user: the caller's entry, else what
// the package's Identity answers. known is true for an entry.
func (m *IdentityMap) Identity(user string, groups []string) (identity string, known bool) {
	m.mu.RLock()
	id, ok := m.users[user]
	_, seen := m.seen[user]
	m.mu.RUnlock()
	if ok {
		return id, true
	}
	id, known = Identity(user, groups)
	if !seen {
		m.mu.Lock()
		m.initLocked()
		if len(m.seen) < maxSeenUsers {
			m.seen[user] = id
		}
		m.mu.Unlock()
	}
	return id, known
}

// initLocked makes the zero value usable; m.mu is held for writing.
func (m *IdentityMap) initLocked() {
	if m.users == nil {
		m.users, m.own, m.seen = map[string]string{}, map[string]bool{}, map[string]string{}
	}
}

// maxSeenUsers bounds what Map remembers of users mapped by rule.
const maxSeenUsers = 10000

// Skipped reports whether user is one of podsafe's own clients (AddOwn).
func (m *IdentityMap) Skipped(user string) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.own[user]
}

// Own returns podsafe's own users (AddOwn), sorted.
func (m *IdentityMap) Own() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return slices.Sorted(maps.Keys(m.own))
}

// Map returns which real user became which podsafe identity, to keep in
// the history (Meta.Extra or a log line; AuditTailer logs it as
// LogAuditIdentities): the caller's entries, the fixed users and
// service accounts of Identity, its two rules written as patterns
// ("system:node:*" for kubelets, "group:system:masters" for admins), and
// every other user mapped so far, unknown ones included. Keys are user
// names; the returned map is the caller's.
func (m *IdentityMap) Map() map[string]string {
	out := map[string]string{
		nodeUserPrefix + "*":    apiserver.KubeletIdentityPrefix + "*",
		"group:" + mastersGroup: apiserver.IdentityAdmin,
	}
	maps.Copy(out, fixedUsers)
	for sa, id := range kubeSystemAccounts {
		out[kubeSystemAccountPrefix+sa] = id
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	maps.Copy(out, m.seen)
	maps.Copy(out, m.users)
	return out
}
