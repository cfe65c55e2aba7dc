package nemesis_test

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/podsafe/podsafe/nemesis"
	"github.com/podsafe/podsafe/target"
)

// available lists the faults available on t, sorted.
func available(t target.Target) []string {
	var out []string
	for _, f := range nemesis.All() {
		if f.Available(t) {
			out = append(out, f.Name())
		}
	}
	return out
}

// faultNames lists every fault but those given.
func faultNames(except ...string) []string {
	var out []string
	for _, f := range nemesis.All() {
		if !slices.Contains(except, f.Name()) {
			out = append(out, f.Name())
		}
	}
	return out
}

// TestFakeAvailability: a fault is offered exactly where the target has the
// interface and the capability it needs for the components it acts on.
func TestFakeAvailability(t *testing.T) {
	// Faults that need what no three-member target of kubeLike has.
	const fencing, ring = "kill-fencing", "ring"
	without := func(caps ...target.Capability) map[target.Capability][]target.Role {
		m := everything()
		for _, c := range caps {
			delete(m, c)
		}
		return m
	}
	kubeletsOnly := func(m map[target.Capability][]target.Role, c target.Capability) map[target.Capability][]target.Role {
		m[c] = []target.Role{target.RoleKubelet}
		return m
	}
	cpPartitions := []string{"api-store", "bridge", "halves", "isolate-leader", "isolate-one", "majority-minority", "one-way-member"}
	for _, tc := range []struct {
		name string
		t    target.Target
		want []string
	}{
		{"everything", richTarget{kubeLike(everything())}, faultNames(fencing, ring)},
		{"no kill", richTarget{kubeLike(without(target.Kill))},
			faultNames(fencing, ring, "kill-member", "kill-leader", "kill-kubelet", "kill-scheduler", "kill-controller", "kill-controllers", "power-failure")},
		{"kill kubelets only", richTarget{kubeLike(kubeletsOnly(everything(), target.Kill))},
			faultNames(fencing, ring, "kill-member", "kill-leader", "kill-scheduler", "kill-controller", "kill-controllers", "power-failure")},
		{"no pause", richTarget{kubeLike(without(target.Pause))},
			faultNames(fencing, ring, "pause-kubelet", "pause-controller", "pause-scheduler")},
		{"no network", richTarget{kubeLike(without(target.Network))},
			faultNames(append([]string{fencing, ring, "partition-node", "partition-node-node", "partition-storage", "partition-zone", "one-way-node"}, cpPartitions...)...)},
		{"no clock, slow, power, failpoint", richTarget{kubeLike(without(target.Clock, target.SlowApply, target.Power, target.Failpoint))},
			faultNames(fencing, ring, "clock-skew", "clock-jump", "clock-strobe", "slow-leader", "slow-member", "lose-node", "failpoint")},
		// The capabilities without the interfaces that carry them offer
		// only cuts and processes.
		{"no optional interfaces", kubeLike(everything()),
			faultNames(fencing, ring, "api-store", "clock-skew", "clock-jump", "clock-strobe", "slow-leader", "slow-member", "lose-node", "failpoint")},
		{"no interfaces at all", bareTarget{kubeLike(everything())}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, available(tc.t)); diff != "" {
				t.Errorf("available faults (-want +got):\n%s", diff)
			}
		})
	}

	// A target that does not own its control plane (Members() == 0, an
	// API endpoint of no member) offers no control-plane partition, kill
	// or slow, but still cuts its own nodes from the API.
	t.Run("no members", func(t *testing.T) {
		f := &fakeTarget{leader: -1, can: map[target.Capability][]target.Role{
			target.Network: {target.RoleKubelet}, target.Kill: {target.RoleKubelet}, target.Power: {target.RoleKubelet},
		}}
		f.comps = []target.Component{
			{Name: "apiserver", Role: target.RoleAPIServer, Host: "api", Member: -1},
			{Name: "kubelet/n0", Role: target.RoleKubelet, Host: "n0", Member: -1, Node: "n0"},
			{Name: "kubelet/n1", Role: target.RoleKubelet, Host: "n1", Member: -1, Node: "n1"},
		}
		want := []string{"kill-kubelet", "lose-node", "one-way-node", "partition-node", "partition-node-node"}
		if diff := cmp.Diff(want, available(richTarget{f})); diff != "" {
			t.Errorf("available faults (-want +got):\n%s", diff)
		}
		inj, err := fault(t, "partition-node").Inject(context.Background(), richTarget{f}, seeded())
		if err != nil {
			t.Fatal(err)
		}
		node := inj.Params["node"]
		if diff := cmp.Diff(sortedLinks(both([]string{node}, []string{"api"})), f.cutNow()); diff != "" {
			t.Errorf("partition-node on a target without members cut (-want +got):\n%s", diff)
		}
	})
}

// A schedule on the fake target records each injection's structured
// fields, and only the available faults are drawn.
func TestFakeScheduleOffersAvailableOnly(t *testing.T) {
	f := kubeLike(map[target.Capability][]target.Role{target.Kill: {target.RoleKubelet}})
	fs, err := nemesis.Lookup("kill,partition")
	if err != nil {
		t.Fatal(err)
	}
	s := &nemesis.Schedule{Faults: fs, Interval: 2 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := s.Run(ctx, f, seeded()); err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(s.Counts())); !slices.Equal(got, []string{"kill-kubelet"}) {
		t.Errorf("injected %v, want kill-kubelet only (the only fault the target can do)", got)
	}
}
