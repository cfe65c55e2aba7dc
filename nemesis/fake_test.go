package nemesis_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/podsafe/podsafe/nemesis"
	"github.com/podsafe/podsafe/target"
)

// fakeTarget is an in-memory target.Target that records what the faults ask
// of it: a test double for the harness side of the seam. It implements
// Networker and Processes; richTarget adds the optional interfaces and
// bareTarget hides everything but Target.
type fakeTarget struct {
	comps   []target.Component
	members int
	leader  int // -1: none known
	can     map[target.Capability][]target.Role

	mu      sync.Mutex
	calls   []string
	cut     map[target.Link]bool
	down    map[string]bool
	paused  map[string]bool
	offsets map[string]time.Duration
	off     map[string]bool // powered-off nodes
}

// kubeLike is a control plane of three members whose store and API server
// run on hosts of their own, a scheduler, a controller-manager, two nodes and
// a storage server. can says which roles each capability applies to.
func kubeLike(can map[target.Capability][]target.Role) *fakeTarget {
	f := &fakeTarget{members: 3, leader: 1, can: can}
	for i := range 3 {
		f.comps = append(f.comps, target.Component{Name: fmt.Sprintf("etcd-%d", i), Role: target.RoleStore, Host: fmt.Sprintf("etcd-%d", i), Member: i})
	}
	for i := range 3 {
		f.comps = append(f.comps, target.Component{Name: fmt.Sprintf("kube-apiserver-%d", i), Role: target.RoleAPIServer, Host: fmt.Sprintf("api-%d", i), Member: i})
	}
	f.comps = append(f.comps,
		target.Component{Name: "kube-scheduler", Role: target.RoleScheduler, Host: "sched", Member: -1},
		target.Component{Name: "kube-controller-manager", Role: target.RoleController, Host: "kcm", Member: -1},
		target.Component{Name: "kubelet/n0", Role: target.RoleKubelet, Host: "n0", Member: -1, Node: "n0", Zone: "zone-a"},
		target.Component{Name: "kubelet/n1", Role: target.RoleKubelet, Host: "n1", Member: -1, Node: "n1", Zone: "zone-b"},
		target.Component{Name: "storage", Role: target.RoleStorage, Host: "nfs", Member: -1},
	)
	return f
}

// everything lets every capability apply to every role.
func everything() map[target.Capability][]target.Role {
	all := []target.Role{target.RoleStore, target.RoleAPIServer, target.RoleScheduler, target.RoleController,
		target.RoleKubelet, target.RoleFencing, target.RoleStorage}
	out := map[target.Capability][]target.Role{}
	for _, c := range []target.Capability{target.Network, target.Kill, target.Pause, target.Clock, target.SlowApply, target.Power, target.Failpoint} {
		out[c] = all
	}
	return out
}

func (f *fakeTarget) record(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
}

// take returns the calls recorded since the last take.
func (f *fakeTarget) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.calls
	f.calls = nil
	return out
}

func (f *fakeTarget) Kind() string                        { return "fake" }
func (f *fakeTarget) Components() []target.Component      { return slices.Clone(f.comps) }
func (f *fakeTarget) Members() int                        { return f.members }
func (f *fakeTarget) Leader(context.Context) (int, error) { return f.leaderIndex() }
func (f *fakeTarget) leaderIndex() (int, error) {
	if f.leader < 0 {
		return -1, target.ErrNoLeader
	}
	return f.leader, nil
}

func (f *fakeTarget) Can(c target.Capability, name string) bool {
	for _, comp := range f.comps {
		if (name == "" || comp.Name == name) && slices.Contains(f.can[c], comp.Role) {
			return true
		}
	}
	return false
}

func (f *fakeTarget) Cut(_ context.Context, links []target.Link) (func() error, error) {
	f.mu.Lock()
	if f.cut == nil {
		f.cut = map[target.Link]bool{}
	}
	for _, l := range links {
		f.cut[l] = true
	}
	f.mu.Unlock()
	f.record("cut %d", len(links))
	return func() error {
		f.mu.Lock()
		for _, l := range links {
			delete(f.cut, l)
		}
		f.mu.Unlock()
		f.record("heal %d", len(links))
		return nil
	}, nil
}

// cutNow lists the links cut now, sorted.
func (f *fakeTarget) cutNow() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for l := range f.cut {
		out = append(out, l.String())
	}
	slices.Sort(out)
	return out
}

func (f *fakeTarget) Kill(_ context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down == nil {
		f.down = map[string]bool{}
	}
	if f.down[name] {
		return target.ErrNotRunning
	}
	f.down[name] = true
	f.calls = append(f.calls, "kill "+name)
	return nil
}

func (f *fakeTarget) Restart(_ context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.down[name] {
		return fmt.Errorf("%s: %w", name, target.ErrRunning)
	}
	delete(f.down, name)
	f.calls = append(f.calls, "restart "+name)
	return nil
}

func (f *fakeTarget) Running(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.down[name]
}

func (f *fakeTarget) Pause(_ context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.paused == nil {
		f.paused = map[string]bool{}
	}
	f.paused[name] = true
	f.calls = append(f.calls, "pause "+name)
	return nil
}

func (f *fakeTarget) Resume(_ context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.paused[name] {
		return fmt.Errorf("%s: %w", name, target.ErrNotPaused)
	}
	delete(f.paused, name)
	f.calls = append(f.calls, "resume "+name)
	return nil
}

func (f *fakeTarget) Paused(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.paused[name]
}

// richTarget adds the optional interfaces.
type richTarget struct{ *fakeTarget }

func (r richTarget) ClockOffset(name string) (time.Duration, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.offsets[name], nil
}

func (r richTarget) SetClockOffset(name string, d time.Duration) error {
	r.mu.Lock()
	if r.offsets == nil {
		r.offsets = map[string]time.Duration{}
	}
	r.offsets[name] = d
	r.mu.Unlock()
	r.record("clock %s %s", name, d)
	return nil
}

func (r richTarget) ResetClock(name string) error {
	r.mu.Lock()
	delete(r.offsets, name)
	r.mu.Unlock()
	r.record("reset clock %s", name)
	return nil
}

func (r richTarget) WallFor(d time.Duration) time.Duration { return d / 1000 }

func (r richTarget) SlowApply(_ context.Context, member int, d time.Duration) (func() error, error) {
	r.record("slow %d %s", member, d)
	return func() error { r.record("unslow %d", member); return nil }, nil
}

func (r richTarget) PowerOff(_ context.Context, node string) error {
	r.mu.Lock()
	if r.off == nil {
		r.off = map[string]bool{}
	}
	r.off[node] = true
	r.mu.Unlock()
	r.record("power off %s", node)
	return nil
}

func (r richTarget) PowerOn(_ context.Context, node string) error {
	r.mu.Lock()
	delete(r.off, node)
	r.mu.Unlock()
	r.record("power on %s", node)
	return nil
}

func (r richTarget) PoweredOff(node string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.off[node]
}

func (r richTarget) Fenced(string) bool { return false }

func (r richTarget) DeleteNode(_ context.Context, node string) error {
	r.record("delete node %s", node)
	return nil
}

// APIStoreLinks: API server i reaches every etcd member's client port.
func (r richTarget) APIStoreLinks(member int) []target.Link {
	var out []target.Link
	for i := range r.members {
		out = append(out, target.Link{From: fmt.Sprintf("api-%d", member), To: fmt.Sprintf("etcd-%d", i), Port: "2379"})
	}
	return out
}

func (r richTarget) EnableFailpoint(_ context.Context, name, term, _ string) (func() error, error) {
	r.record("failpoint %s=%s", name, term)
	return func() error { r.record("failpoint off %s", name); return nil }, nil
}

// bareTarget is only a Target: it cuts nothing and stops nothing.
type bareTarget struct{ f *fakeTarget }

func (b bareTarget) Kind() string                           { return "bare" }
func (b bareTarget) Components() []target.Component         { return b.f.Components() }
func (b bareTarget) Can(c target.Capability, n string) bool { return b.f.Can(c, n) }
func (b bareTarget) Members() int                           { return b.f.Members() }
func (b bareTarget) Leader(ctx context.Context) (int, error) {
	return b.f.Leader(ctx)
}

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

// both is every link between a host of a and a host of b, both ways.
func both(a, b []string) []target.Link {
	var out []target.Link
	for _, x := range a {
		for _, y := range b {
			out = append(out, target.Link{From: x, To: y}, target.Link{From: y, To: x})
		}
	}
	return out
}

func sortedLinks(links []target.Link) []string {
	var out []string
	for _, l := range links {
		out = append(out, l.String())
	}
	slices.Sort(out)
	return out
}

// fakeInject injects the named fault into f, checks that the links it
// reports are the links cut, and returns it with the calls it made.
func fakeInject(t *testing.T, tgt target.Target, f *fakeTarget, name string, rng *rand.Rand) (nemesis.Injection, []string) {
	t.Helper()
	flt := fault(t, name)
	if !flt.Available(tgt) {
		t.Fatalf("%s is not available", name)
	}
	f.take()
	inj, err := flt.Inject(context.Background(), tgt, rng)
	if err != nil {
		t.Fatalf("injecting %s: %v", name, err)
	}
	if inj.Description == "" || len(inj.Targets) == 0 || inj.Heal == nil {
		t.Fatalf("%s injected %+v: want a description, targets and a heal", name, inj)
	}
	if diff := cmp.Diff(sortedLinks(inj.Links), f.cutNow()); diff != "" {
		t.Errorf("%s: links reported (-) and cut (+):\n%s", name, diff)
	}
	return inj, f.take()
}

// fakeHeal heals inj and returns the calls it made; nothing may stay cut.
func fakeHeal(t *testing.T, f *fakeTarget, inj nemesis.Injection) []string {
	t.Helper()
	if err := inj.Heal(); err != nil {
		t.Fatalf("healing %s: %v", inj.Description, err)
	}
	if got := f.cutNow(); len(got) != 0 {
		t.Errorf("after healing %s, still cut: %v", inj.Description, got)
	}
	return f.take()
}

// TestFakePartitions: each shape cuts exactly the links between the hosts
// of members on different sides, a member being all its hosts (store and
// API server apart), and heals exactly those.
func TestFakePartitions(t *testing.T) {
	f := kubeLike(everything())
	tgt := richTarget{f}
	rng := seeded()
	memberHosts := func(i int) []string { return []string{fmt.Sprintf("etcd-%d", i), fmt.Sprintf("api-%d", i)} }
	others := func(i int) []string {
		var out []string
		for j := range 3 {
			if j != i {
				out = append(out, memberHosts(j)...)
			}
		}
		return out
	}

	t.Run("isolate-leader", func(t *testing.T) {
		inj, calls := fakeInject(t, tgt, f, "isolate-leader", rng)
		if diff := cmp.Diff(sortedLinks(both(memberHosts(1), others(1))), sortedLinks(inj.Links)); diff != "" {
			t.Errorf("isolating leader etcd-1 cut (-want +got):\n%s", diff)
		}
		if inj.Params["member"] != "1" || !slices.Equal(calls, []string{"cut 16"}) {
			t.Errorf("params %v, calls %v; want member 1 and one cut of 16 links", inj.Params, calls)
		}
		if calls := fakeHeal(t, f, inj); !slices.Equal(calls, []string{"heal 16"}) {
			t.Errorf("heal calls %v", calls)
		}
	})

	t.Run("isolate-one", func(t *testing.T) {
		inj, _ := fakeInject(t, tgt, f, "isolate-one", rng)
		i, _ := strconv.Atoi(inj.Params["member"])
		if diff := cmp.Diff(sortedLinks(both(memberHosts(i), others(i))), sortedLinks(inj.Links)); diff != "" {
			t.Errorf("isolating member %d cut (-want +got):\n%s", i, diff)
		}
		fakeHeal(t, f, inj)
	})

	for _, name := range []string{"halves", "majority-minority"} {
		t.Run(name, func(t *testing.T) {
			inj, _ := fakeInject(t, tgt, f, name, rng)
			minority, majority := strings.Split(inj.Params["minority"], ","), strings.Split(inj.Params["majority"], ",")
			if len(minority) != 2 || len(majority) != 4 {
				t.Fatalf("sides %v | %v: want one member (two hosts) against two", minority, majority)
			}
			if name == "majority-minority" && !slices.Equal(minority, memberHosts(1)) {
				t.Errorf("minority %v, want the leader's hosts %v", minority, memberHosts(1))
			}
			if diff := cmp.Diff(sortedLinks(both(minority, majority)), sortedLinks(inj.Links)); diff != "" {
				t.Errorf("cut (-want +got):\n%s", diff)
			}
			fakeHeal(t, f, inj)
		})
	}

	t.Run("one-way-member", func(t *testing.T) {
		inj, _ := fakeInject(t, tgt, f, "one-way-member", rng)
		i, _ := strconv.Atoi(inj.Params["member"])
		for _, l := range inj.Links {
			from, to := slices.Contains(memberHosts(i), l.From), slices.Contains(memberHosts(i), l.To)
			if from == to || (inj.Params["direction"] == "outbound") != from {
				t.Errorf("%s link %s of member %d", inj.Params["direction"], l, i)
			}
		}
		if len(inj.Links) != 8 {
			t.Errorf("cut %d links, want 8 (two hosts to four)", len(inj.Links))
		}
		fakeHeal(t, f, inj)
	})

	t.Run("api-store", func(t *testing.T) {
		inj, calls := fakeInject(t, tgt, f, "api-store", rng)
		i, _ := strconv.Atoi(inj.Params["member"])
		if i == f.leader {
			t.Errorf("api-store cut the leader's API")
		}
		if diff := cmp.Diff(tgt.APIStoreLinks(i), inj.Links); diff != "" || !slices.Equal(calls, []string{"cut 3"}) {
			t.Errorf("api-store of member %d cut (-want +got):\n%s\ncalls %v", i, diff, calls)
		}
		fakeHeal(t, f, inj)
	})

	t.Run("partition-node", func(t *testing.T) {
		inj, _ := fakeInject(t, tgt, f, "partition-node", rng)
		cp := append(append(memberHosts(0), memberHosts(1)...), memberHosts(2)...)
		if diff := cmp.Diff(sortedLinks(both([]string{inj.Params["node"]}, cp)), sortedLinks(inj.Links)); diff != "" {
			t.Errorf("cut (-want +got):\n%s", diff)
		}
		fakeHeal(t, f, inj)
	})

	t.Run("one-way-node", func(t *testing.T) {
		inj, _ := fakeInject(t, tgt, f, "one-way-node", rng)
		if len(inj.Links) != 6 {
			t.Errorf("cut %v, want the node's six links to the control plane one way", inj.Links)
		}
		for _, l := range inj.Links {
			if (inj.Params["direction"] == "outbound") != (l.From == inj.Params["node"]) {
				t.Errorf("%s link %s of node %s", inj.Params["direction"], l, inj.Params["node"])
			}
		}
		fakeHeal(t, f, inj)
	})

	t.Run("partition-node-node", func(t *testing.T) {
		inj, _ := fakeInject(t, tgt, f, "partition-node-node", rng)
		if diff := cmp.Diff([]string{"n0->n1", "n1->n0"}, sortedLinks(inj.Links)); diff != "" {
			t.Errorf("cut (-want +got):\n%s", diff)
		}
		fakeHeal(t, f, inj)
	})

	t.Run("partition-storage", func(t *testing.T) {
		inj, _ := fakeInject(t, tgt, f, "partition-storage", rng)
		if diff := cmp.Diff(sortedLinks(both([]string{inj.Params["node"]}, []string{"nfs"})), sortedLinks(inj.Links)); diff != "" {
			t.Errorf("cut (-want +got):\n%s", diff)
		}
		fakeHeal(t, f, inj)
	})
}

// TestFakeProcesses: crashes, pauses, clocks, slow members, power and
// failpoints ask the target for exactly the components expected, and heal
// exactly those.
func TestFakeProcesses(t *testing.T) {
	f := kubeLike(everything())
	tgt := richTarget{f}
	rng := seeded()
	for _, tc := range []struct {
		fault      string
		components []string // candidates; the injection must act on one
		inject     string   // the call, with %s for the component
		heal       string
	}{
		{"kill-member", []string{"etcd-0", "etcd-1", "etcd-2"}, "kill %s", "restart %s"},
		{"kill-leader", []string{"etcd-1"}, "kill %s", "restart %s"},
		{"kill-kubelet", []string{"kubelet/n0", "kubelet/n1"}, "kill %s", "restart %s"},
		{"kill-scheduler", []string{"kube-scheduler"}, "kill %s", "restart %s"},
		{"kill-controller", []string{"kube-controller-manager"}, "kill %s", "restart %s"},
		{"kill-controllers", []string{"kube-controller-manager"}, "kill %s", "restart %s"},
		{"pause-kubelet", []string{"kubelet/n0", "kubelet/n1"}, "pause %s", "resume %s"},
		{"pause-controller", []string{"kube-controller-manager"}, "pause %s", "resume %s"},
		{"pause-scheduler", []string{"kube-scheduler"}, "pause %s", "resume %s"},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			inj, calls := fakeInject(t, tgt, f, tc.fault, rng)
			if len(inj.Components) != 1 || !slices.Contains(tc.components, inj.Components[0]) {
				t.Fatalf("%s acted on %v, want one of %v", tc.fault, inj.Components, tc.components)
			}
			c := inj.Components[0]
			if diff := cmp.Diff([]string{fmt.Sprintf(tc.inject, c)}, calls); diff != "" {
				t.Errorf("inject calls (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{fmt.Sprintf(tc.heal, c)}, fakeHeal(t, f, inj)); diff != "" {
				t.Errorf("heal calls (-want +got):\n%s", diff)
			}
			// A second heal finds the component as wanted: no error.
			if err := inj.Heal(); err != nil {
				t.Errorf("second heal: %v", err)
			}
		})
	}

	t.Run("clock", func(t *testing.T) {
		inj, calls := fakeInject(t, tgt, f, "clock-skew", rng)
		d, err := time.ParseDuration(inj.Params["offset"])
		if err != nil || abs(d) < time.Second || abs(d) >= time.Minute {
			t.Errorf("offset %q, want 1s to 1m either way", inj.Params["offset"])
		}
		c := inj.Components[0]
		if !tgt.Can(target.Clock, c) || !slices.Equal(calls, []string{fmt.Sprintf("clock %s %s", c, d)}) {
			t.Errorf("clock-skew of %s by %s called %v", c, d, calls)
		}
		if diff := cmp.Diff([]string{"reset clock " + c}, fakeHeal(t, f, inj)); diff != "" {
			t.Errorf("heal calls (-want +got):\n%s", diff)
		}
		inj, _ = fakeInject(t, tgt, f, "clock-strobe", rng)
		fakeHeal(t, f, inj)
		if off, _ := tgt.ClockOffset(inj.Components[0]); off != 0 {
			t.Errorf("offset %s after the strobe's heal", off)
		}
	})

	t.Run("slow", func(t *testing.T) {
		inj, calls := fakeInject(t, tgt, f, "slow-leader", rng)
		d, _ := time.ParseDuration(inj.Params["delay"])
		if inj.Params["member"] != "1" || d < 5*time.Millisecond || d > 25*time.Millisecond ||
			!slices.Equal(calls, []string{fmt.Sprintf("slow 1 %s", d)}) || !slices.Equal(inj.Components, []string{"etcd-1"}) {
			t.Errorf("slow-leader: params %v, components %v, calls %v", inj.Params, inj.Components, calls)
		}
		if diff := cmp.Diff([]string{"unslow 1"}, fakeHeal(t, f, inj)); diff != "" {
			t.Errorf("heal calls (-want +got):\n%s", diff)
		}
	})

	t.Run("lose-node", func(t *testing.T) {
		inj, calls := fakeInject(t, tgt, f, "lose-node", rng)
		n := inj.Params["node"]
		if diff := cmp.Diff([]string{"power off " + n, "delete node " + n}, calls); diff != "" {
			t.Errorf("inject calls (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"power on " + n}, fakeHeal(t, f, inj)); diff != "" {
			t.Errorf("heal calls (-want +got):\n%s", diff)
		}
	})

	t.Run("failpoint", func(t *testing.T) {
		inj, calls := fakeInject(t, tgt, f, "failpoint", rng)
		want := fmt.Sprintf("failpoint %s=%s", inj.Params["failpoint"], inj.Params["term"])
		if !slices.ContainsFunc(nemesis.Failpoints, func(fp nemesis.Failpoint) bool { return fp.Name == inj.Params["failpoint"] }) ||
			!slices.Equal(calls, []string{want}) {
			t.Errorf("failpoint: params %v, calls %v", inj.Params, calls)
		}
		fakeHeal(t, f, inj)
	})

	if f.cutNow() != nil || len(f.down) != 0 || len(f.paused) != 0 || len(f.offsets) != 0 || len(f.off) != 0 {
		t.Errorf("left behind: cut %v, down %v, paused %v, clocks %v, off %v", f.cutNow(), f.down, f.paused, f.offsets, f.off)
	}
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
