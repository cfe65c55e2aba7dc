package nemesis

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/podsafe/podsafe/target"
)

// What the faults ask of a target, in terms of package target only.

// canCutMembers reports whether t has at least min control-plane members and
// can cut the links of every component they run.
func canCutMembers(t target.Target, min int) bool {
	n := t.Members()
	if n < min || n == 0 {
		return false
	}
	if _, ok := t.(target.Networker); !ok {
		return false
	}
	for _, hosts := range target.MemberHosts(t) {
		if len(hosts) == 0 {
			return false
		}
	}
	for _, c := range t.Components() {
		if c.Member >= 0 && c.Member < n && !t.Can(target.Network, c.Name) {
			return false
		}
	}
	return true
}

// flatten joins groups of hosts into one list, in order.
func flatten(groups [][]string) []string {
	var out []string
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

// controlPlaneHosts are the hosts a node's kubelet talks to: every member's
// hosts, then those of API servers that belong to no member (a target that
// does not own its control plane may still name its API endpoints).
func controlPlaneHosts(t target.Target) []string {
	out := flatten(target.MemberHosts(t))
	for _, h := range target.Hosts(t, target.RoleAPIServer) {
		if !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out
}

// leaderOrAny is the leader's index, or a random member while none is known.
func leaderOrAny(ctx context.Context, t target.Target, rng *rand.Rand) int {
	if l := leader(ctx, t); l >= 0 {
		return l
	}
	return rng.IntN(t.Members())
}

// leader is the leader's index, or -1 while none is known.
func leader(ctx context.Context, t target.Target) int {
	if l, err := t.Leader(ctx); err == nil && l >= 0 && l < t.Members() {
		return l
	}
	return -1
}

// storeOf returns member i's store component.
func storeOf(t target.Target, i int) (target.Component, bool) {
	for _, c := range target.ByRole(t, target.RoleStore) {
		if c.Member == i {
			return c, true
		}
	}
	return target.Component{}, false
}

// able lists the components of t with one of roles to which t can apply
// capability cp, in t's order.
func able(t target.Target, cp target.Capability, roles ...target.Role) []target.Component {
	var out []target.Component
	for _, c := range t.Components() {
		if slices.Contains(roles, c.Role) && t.Can(cp, c.Name) {
			out = append(out, c)
		}
	}
	return out
}

// canAny reports whether t implements Processes (for Kill and Pause) and can
// apply cp to some component with one of roles.
func canAny(t target.Target, cp target.Capability, roles ...target.Role) bool {
	if cp == target.Kill || cp == target.Pause {
		if _, ok := t.(target.Processes); !ok {
			return false
		}
	}
	return len(able(t, cp, roles...)) > 0
}

// pickOne picks one of comps, drawing from rng only when there is a choice.
func pickOne(comps []target.Component, rng *rand.Rand) target.Component {
	if len(comps) == 1 {
		return comps[0]
	}
	return comps[rng.IntN(len(comps))]
}

// names lists the components' names.
func names(comps []target.Component) []string {
	out := make([]string, len(comps))
	for i, c := range comps {
		out[i] = c.Name
	}
	return out
}

// pickNode picks a random kubelet to which t can apply cp whose node is
// powered on (a powered-off node has nothing left to fault), or any of them
// if all are off.
func pickNode(t target.Target, cp target.Capability, rng *rand.Rand) target.Component {
	nodes := able(t, cp, target.RoleKubelet)
	on := nodes
	if p, ok := t.(target.PowerSwitch); ok {
		on = nil
		for _, n := range nodes {
			if !p.PoweredOff(n.Node) {
				on = append(on, n)
			}
		}
		if len(on) == 0 {
			on = nodes
		}
	}
	return on[rng.IntN(len(on))]
}

// member renders a member index for Params.
func member(i int) string { return strconv.Itoa(i) }

// ignore returns err unless it is one of the expected outcomes of a heal
// that found the component already as wanted.
func ignore(err error, expected ...error) error {
	for _, e := range expected {
		if errors.Is(err, e) {
			return nil
		}
	}
	return err
}
