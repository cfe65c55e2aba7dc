package target

import (
	"context"
	"time"
)

// Optional interfaces. Some faults need more than cutting links and
// stopping processes: moving one component's clock, slowing one store
// member, powering a node off, switching failpoints, knowing which links
// carry an API server's traffic to its store. A target offers each by
// implementing the interface below, and says for which components it can
// with Can and the matching Capability; a fault that needs one is offered
// only where both hold.
//
// The package imports nothing but the standard library, so that histories
// (package history) can record Links without depending on a target.

// Clocks moves the clocks of components (Capability Clock; Can says which
// components). Durations are in the target's own time: the embedded
// cluster's clock is scaled, a real cluster's is wall time. Only readings
// move: timers keep their durations, as a step of a machine's wall clock
// leaves monotonic timers alone.
type Clocks interface {
	// ClockOffset is how far component's clock reads from the true time
	// (negative: behind).
	ClockOffset(component string) (time.Duration, error)
	// SetClockOffset makes component's clock read d off the true time.
	SetClockOffset(component string, d time.Duration) error
	// ResetClock makes component's clock read the true time again.
	ResetClock(component string) error
	// WallFor converts a duration of the target's time to the wall time it
	// takes (a strobe paces itself on wall time).
	WallFor(d time.Duration) time.Duration
}

// Slower makes one store member apply committed changes late, as on a slow
// disk (Capability SlowApply on the member's store component): the others
// apply, and stream to their watchers, what it has not applied yet.
type Slower interface {
	// SlowApply delays each change member applies by delay until heal. A
	// member restarted meanwhile is not slowed; heal is then harmless.
	SlowApply(ctx context.Context, member int, delay time.Duration) (heal func() error, err error)
}

// PowerSwitch switches nodes off and on, as a power fence or a lost machine does
// (Capability Power on the node's kubelet component). Nodes are named as
// Component.Node names them.
type PowerSwitch interface {
	// PowerOff stops the node at once: its kubelet and every container on
	// it, with no signal. It returns once all of that is true.
	PowerOff(ctx context.Context, node string) error
	// PowerOn restores power: the node starts empty and its kubelet
	// starts again.
	PowerOn(ctx context.Context, node string) error
	// PoweredOff reports whether node is powered off.
	PoweredOff(node string) bool
	// Fenced reports whether a fence agent has fenced node (by the
	// network, at the storage): a fence outranks a fault, so a fault's
	// heal must not power on a node fenced meanwhile.
	Fenced(node string) bool
}

// NodeAdmin acts on Node objects as a cluster admin would, from a host no
// fault cuts.
type NodeAdmin interface {
	// DeleteNode deletes node's Node object once and returns the API's
	// answer as is (a NotFound included); the caller retries.
	DeleteNode(ctx context.Context, node string) error
}

// APIStore tells which links carry a member's API server's traffic to the
// store (Capability Network). Cutting exactly them leaves the member's store
// in the cluster, replicating, while every read and write sent to its API
// server stalls: the API↔store partition.
type APIStore interface {
	// APIStoreLinks returns, for member, the links from its API server's
	// host to the store endpoints it uses, usually narrowed to a port
	// (Link.Port). Empty when the member's API reaches its store without
	// the network.
	APIStoreLinks(member int) []Link
}

// Failpoints switches pingcap/failpoint failpoints in the target's
// components (Capability Failpoint, which a target reports, for each
// component, only where its markers are live).
type Failpoints interface {
	// EnableFailpoint switches the failpoint name (its package's import
	// path, a slash and the marker) on with term until heal, aimed at the
	// named component: its markers fire there only. An empty component
	// aims it everywhere.
	EnableFailpoint(ctx context.Context, name, term, component string) (heal func() error, err error)
}

// WatchFreezer freezes one component's watches of one resource: the
// streams stay open and say nothing while everything else the component
// does goes on, as behind a stuck watch cache.
type WatchFreezer interface {
	// FreezeWatch freezes component's watches of resource (its plural
	// name) until heal; what they missed then comes through in order.
	FreezeWatch(ctx context.Context, component, resource string) (heal func() error, err error)
}
