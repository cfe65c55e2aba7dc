package nemesis_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
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
