// Package nemesis injects faults into a running system under test (a
// target.Target: the embedded cluster or another). Faults are values with
// a name; injecting one returns the function that heals it; a Schedule composes
// faults over time from a seeded generator and records every fault as an
// interval in the history.
//
// Faults come in groups, each also a name on the command line:
//
//   - partition: control-plane shapes (isolate-leader, isolate-one, halves,
//     majority-minority, bridge, ring, one-way-member, api-store);
//   - node-partition: shapes that involve worker nodes (partition-node,
//     partition-node-node, partition-storage, one-way-node);
//   - partition-zone (a name of its own): every node of one topology zone
//     cut from the control plane at once;
//   - kill: crashes and restarts (kill-member, kill-leader, kill-kubelet,
//     kill-scheduler, kill-controller, kill-controllers, kill-fencing);
//   - power-failure (a name of its own): every control-plane member
//     crashed at the same instant, losing what it had not synced, and
//     restarted from disk (the crash-consistency fault);
//   - pause: stopped processes (pause-kubelet, pause-controller,
//     pause-scheduler);
//   - clock: one component's clock (clock-skew, clock-jump, clock-strobe);
//   - slow: a member's state machine applies late (slow-leader,
//     slow-member), so followers stream changes the leader has not applied;
//   - node: everything that hits one node (the node partitions,
//     kill-kubelet, pause-kubelet, lose-node).
//
// A fault's heal undoes exactly what it did and nothing that something else
// decided: it never lifts a network fence, powers on a fenced node or
// resumes another fault's pause.
//
// Faults act on a target.Target, never on one system in particular: they
// compute the hosts to cut from its components (target.MemberHosts,
// target.Hosts) and cut them through target.Networker, kill and pause
// components by name through target.Processes, and reach for the optional
// interfaces of package target (Clocks, Slower, PowerSwitch, NodeAdmin,
// APIStore, Failpoints) where they need more. A fault is offered on a
// target that has the capabilities it needs for the components it would
// act on.
package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"

	"github.com/podsafe/podsafe/target"
)

// Fault is one kind of fault. Implementations are stateless values; Inject
// carries the state of one injection in the heal function it returns.
type Fault interface {
	// Name is the fault's name on the command line.
	Name() string
	// Describe is one line for `podsafe list`.
	Describe() string
	// Needs lists the capabilities the fault uses.
	Needs() []target.Capability
	// Available reports whether the fault makes sense on t: t has the
	// capabilities it needs for the components it would act on, and
	// enough of them (isolating one member of a one-member control plane
	// does not).
	Available(t target.Target) bool
	// Inject applies the fault and returns what it did and how to heal it.
	Inject(ctx context.Context, t target.Target, rng *rand.Rand) (Injection, error)
}

// Injection is one applied fault.
type Injection struct {
	// Description says what was done, e.g. "isolate leader cp-1".
	Description string
	// Targets are the hosts or components affected.
	Targets []string
	// Links are the links cut (partitions), in the order cut.
	Links []target.Link
	// Components are the components acted on: killed, paused, clock
	// moved, slowed, powered off.
	Components []string
	// Params are the fault's drawn parameters by name: "member" (a member
	// index), "node", "offset", "period", "delay", "direction", "failpoint",
	// "term" and the "component" it was aimed at, the sides of a partition
	// ("minority", "majority", "bridge", "ring", "a", "b").
	Params map[string]string
	// Heal undoes the fault.
	Heal func() error
}

// registry maps a fault or group name to its faults. Groups are the names
// Jepsen users know: "partition" picks among every partition shape.
var registry = map[string][]Fault{}

func register(group string, faults ...Fault) {
	registry[group] = append(registry[group], faults...)
	for _, f := range faults {
		if _, ok := registry[f.Name()]; !ok {
			registry[f.Name()] = []Fault{f}
		}
	}
}

// ErrUnknownFault: a nemesis name that is neither a fault nor a group.
var ErrUnknownFault = errors.New("unknown nemesis")

// Lookup resolves comma-separated names ("partition", "isolate-leader,halves",
// "none") into the faults they stand for.
func Lookup(names ...string) ([]Fault, error) {
	var out []Fault
	seen := map[string]bool{}
	for _, n := range names {
		for _, name := range strings.Split(n, ",") {
			name = strings.TrimSpace(name)
			if name == "" || name == "none" {
				continue
			}
			fs, ok := registry[name]
			if !ok {
				return nil, fmt.Errorf("%w %q: choose from %s", ErrUnknownFault, name, strings.Join(Names(), ", "))
			}
			for _, f := range fs {
				if !seen[f.Name()] {
					seen[f.Name()] = true
					out = append(out, f)
				}
			}
		}
	}
	return out, nil
}

// Names lists every fault and group name, sorted.
func Names() []string {
	names := make([]string, 0, len(registry)+1)
	for n := range registry {
		names = append(names, n)
	}
	names = append(names, "none")
	sort.Strings(names)
	return names
}

// Groups maps each group name to the faults in it, for `podsafe list`.
func Groups() map[string][]Fault {
	out := map[string][]Fault{}
	for name, fs := range registry {
		if len(fs) > 1 || fs[0].Name() != name {
			out[name] = fs
		}
	}
	return out
}

// All lists every single fault once, sorted by name.
func All() []Fault {
	var out []Fault
	for name, fs := range registry {
		if len(fs) == 1 && fs[0].Name() == name {
			out = append(out, fs[0])
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}
