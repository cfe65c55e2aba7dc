// Package target is the seam between podsafe's harness (workloads, nemesis,
// history) and the system under test. A target hands out its components —
// store members, API servers, schedulers, controllers, kubelets — as names on
// network hosts, and says what can be done to them: cut their links, kill and
// restart them, pause them, move their clocks, slow a store member, switch
// failpoints. Faults declare the capabilities they need and are offered only
// where the target has them.
//
// Three targets implement it: the embedded in-process cluster (package
// cluster), a real Kubernetes control plane of OS processes in network
// namespaces (package target/kube), and an existing cluster reached through a
// kubeconfig, where podsafe controls only its own nodes.
package target

import (
	"context"
	"errors"
	"slices"
)

// Capability is something a target can do to its components.
type Capability string

// The capabilities faults may need.
const (
	// Network: cut links between hosts (packets dropped, not refused).
	Network Capability = "network"
	// Kill: crash a component abruptly and restart it on its own data.
	Kill Capability = "kill"
	// Pause: stop a component (SIGSTOP or its in-process equivalent) and
	// resume it.
	Pause Capability = "pause"
	// Clock: skew, jump or strobe one component's clock.
	Clock Capability = "clock"
	// SlowApply: make one store member apply committed changes late.
	SlowApply Capability = "slow-apply"
	// Power: power a node off and on (a fence agent's view of a node).
	Power Capability = "power"
	// Failpoint: switch pingcap/failpoint failpoints in the components.
	Failpoint Capability = "failpoint"
)

// Role is what a component is.
type Role string

// Component roles.
const (
	RoleStore      Role = "store"      // a raft member or an etcd member
	RoleAPIServer  Role = "apiserver"  // an API server
	RoleScheduler  Role = "scheduler"  // a scheduler
	RoleController Role = "controller" // a controller or a controller-manager
	RoleKubelet    Role = "kubelet"    // a node agent
	RoleFencing    Role = "fencing"    // the fencing controller
	RoleStorage    Role = "storage"    // the shared storage server
)

// Component is one part of the system under test.
type Component struct {
	// Name identifies the component in faults and histories ("etcd-1",
	// "kube-apiserver-0", "kubelet/node-2", "cp-0").
	Name string `json:"name"`
	Role Role   `json:"role"`
	// Host is the network host the component's packets come from and go to:
	// the unit a partition cuts. Components may share a host.
	Host string `json:"host"`
	// Member is the control-plane member the component belongs to (-1: none).
	Member int `json:"member"`
	// Node is the node a kubelet runs ("" for the control plane).
	Node string `json:"node,omitempty"`
	// Zone is a kubelet's node's topology zone (its
	// topology.kubernetes.io/zone label), "" when it has none.
	Zone string `json:"zone,omitempty"`
}

// Link is one direction of traffic between two hosts: cut, the packets From
// sends to To are dropped.
//
// With Port set, the link is narrower: only the connections From opens to
// port Port of To, both directions of those connections, as a firewall rule
// naming a destination port would drop them; every other packet between the
// two hosts flows. A member's API server cut from its store while the store
// member keeps replicating is such a link (see APIStore).
type Link struct {
	From string `json:"from"`
	To   string `json:"to"`
	Port string `json:"port,omitempty"`
}

// String renders the link as "from->to" or "from->to:port".
func (l Link) String() string {
	if l.Port != "" {
		return l.From + "->" + l.To + ":" + l.Port
	}
	return l.From + "->" + l.To
}

// Target is a system under test.
type Target interface {
	// Kind is "embedded", "kube" or "kubeconfig".
	Kind() string
	// Components lists every component, control plane first, in a stable
	// order.
	Components() []Component
	// Can reports whether the target can apply capability c to the
	// named component ("" asks whether it can to any).
	Can(c Capability, component string) bool
	// Members is the number of control-plane members (raft or etcd
	// members; 0 when the target does not own its control plane).
	Members() int
	// Leader returns the current store leader's member index, or an error
	// when there is none or it cannot be known. It does not wait for an
	// election: a fault that needs the leader picks another member while
	// none is known.
	Leader(ctx context.Context) (int, error)
}

// Networker cuts and heals links between hosts. Cut drops the packets of
// each link until the returned heal runs; heal undoes exactly those cuts.
type Networker interface {
	Cut(ctx context.Context, links []Link) (heal func() error, err error)
}

// Processes crashes, restarts, pauses and resumes components by name.
type Processes interface {
	// Kill crashes the component: no shutdown path runs.
	Kill(ctx context.Context, component string) error
	// Restart starts a killed component again on its own data.
	Restart(ctx context.Context, component string) error
	// Running reports whether the component is running (paused counts).
	Running(component string) bool
	// Pause stops the component's execution; Resume continues it.
	Pause(ctx context.Context, component string) error
	Resume(ctx context.Context, component string) error
	// Paused reports whether the component is paused.
	Paused(component string) bool
}

// ErrUnsupported: the target cannot do what was asked.
var ErrUnsupported = errors.New("not supported by this target")

// ErrUnknownComponent: no component has the given name.
var ErrUnknownComponent = errors.New("unknown component")

// Outcomes of Processes calls that found the component already as asked.
// Implementations wrap them (they may wrap their own errors too), so that a
// fault's heal can tell "already done" from a failure.
var (
	// ErrRunning: Restart found the component running.
	ErrRunning = errors.New("component already running")
	// ErrNotRunning: Kill found the component stopped.
	ErrNotRunning = errors.New("component not running")
	// ErrNotPaused: Resume found the component running, not paused.
	ErrNotPaused = errors.New("component not paused")
	// ErrPoweredOff: Restart of a component on a node that is powered off
	// (see PowerSwitch); only powering the node on brings it back.
	ErrPoweredOff = errors.New("node powered off")
	// ErrNoLeader: Leader found no store leader.
	ErrNoLeader = errors.New("no store leader")
)

// ByRole returns the components of t with role r, in t's order.
func ByRole(t Target, r Role) []Component {
	var out []Component
	for _, c := range t.Components() {
		if c.Role == r {
			out = append(out, c)
		}
	}
	return out
}

// Find returns the component named name.
func Find(t Target, name string) (Component, bool) {
	for _, c := range t.Components() {
		if c.Name == name {
			return c, true
		}
	}
	return Component{}, false
}

// MemberHosts returns, for each control-plane member, the hosts of its
// components (its store, API server and whatever else runs with it).
func MemberHosts(t Target) [][]string {
	out := make([][]string, t.Members())
	for _, c := range t.Components() {
		if c.Member >= 0 && c.Member < len(out) && !slices.Contains(out[c.Member], c.Host) {
			out[c.Member] = append(out[c.Member], c.Host)
		}
	}
	return out
}

// Hosts returns the distinct hosts of components with role r.
func Hosts(t Target, r Role) []string {
	var out []string
	for _, c := range ByRole(t, r) {
		if !slices.Contains(out, c.Host) {
			out = append(out, c.Host)
		}
	}
	return out
}
