package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/podsafe/podsafe/target"
)

// Crashes. Each stops a component as a crash would (whatever it was doing is
// abandoned: target.Processes.Kill) and heals by starting it again
// (Restart), which rebuilds its state from durable storage or from the API.
// A heal never starts what something else has meanwhile decided must stay
// down: a kubelet on a node powered off by a fence stays down.
func init() {
	register("kill", killMember{}, killLeader{}, killKubelet{}, killScheduler{}, killController{},
		killControllers{}, killFencing{})
	register("node", killKubelet{})
}

// needsKill is what every crash needs.
var needsKill = []target.Capability{target.Kill}

// killMember crashes a random control-plane member's store (on the embedded
// cluster its API server with it) and restarts it from its data directory.
// On the embedded cluster the crash is raftstore.Store.Crash: no shutdown
// path runs, and the member restarts from what it had synced, not from what
// a clean stop would have left. One member's crash loses no acknowledged
// write (the others hold it); power-failure crashes them all.
type killMember struct{}

func (killMember) Name() string { return "kill-member" }
func (killMember) Describe() string {
	return "crash a random control-plane member (raft and API server) and restart it from disk (durable clusters only)"
}
func (killMember) Needs() []target.Capability { return needsKill }

// Available needs a store the target can kill and restart: the embedded
// cluster can only when durable, since an in-memory member restarted empty
// would break raft's safety.
func (killMember) Available(t target.Target) bool { return canAny(t, target.Kill, target.RoleStore) }
func (killMember) Inject(ctx context.Context, t target.Target, rng *rand.Rand) (Injection, error) {
	return crashMember(ctx, t, rng.IntN(t.Members()), "kill member")
}

// killLeader crashes the raft leader and restarts it.
type killLeader struct{}

func (killLeader) Name() string { return "kill-leader" }
func (killLeader) Describe() string {
	return "crash the raft leader and restart it from disk (durable clusters of 3 or 5)"
}
func (killLeader) Needs() []target.Capability { return needsKill }
func (killLeader) Available(t target.Target) bool {
	return t.Members() > 1 && canAny(t, target.Kill, target.RoleStore)
}
func (killLeader) Inject(ctx context.Context, t target.Target, rng *rand.Rand) (Injection, error) {
	return crashMember(ctx, t, leaderOrAny(ctx, t, rng), "kill leader")
}

func crashMember(ctx context.Context, t target.Target, i int, what string) (Injection, error) {
	st, ok := storeOf(t, i)
	if !ok {
		return Injection{}, fmt.Errorf("%s: member %d has no store: %w", what, i, target.ErrUnknownComponent)
	}
	inj, err := crash(ctx, t, []string{st.Name}, fmt.Sprintf("%s %s", what, st.Name))
	if err != nil {
		return Injection{}, err
	}
	inj.Params = map[string]string{"member": member(i)}
	return inj, nil
}

// killKubelet crashes a kubelet; its containers keep running in the node's
// runtime, and the restarted kubelet adopts them.
type killKubelet struct{}

func (killKubelet) Name() string { return "kill-kubelet" }
func (killKubelet) Describe() string {
	return "crash a random kubelet (its containers keep running) and restart it"
}
func (killKubelet) Needs() []target.Capability     { return needsKill }
func (killKubelet) Available(t target.Target) bool { return canAny(t, target.Kill, target.RoleKubelet) }
func (killKubelet) Inject(ctx context.Context, t target.Target, rng *rand.Rand) (Injection, error) {
	running := runningOf(t, able(t, target.Kill, target.RoleKubelet))
	if len(running) == 0 {
		return Injection{}, fmt.Errorf("kill-kubelet: %w", target.ErrNotRunning)
	}
	k := running[rng.IntN(len(running))]
	inj, err := crash(ctx, t, []string{k.Name}, "kill kubelet of "+k.Node)
	if err != nil {
		return Injection{}, err
	}
	inj.Params = map[string]string{"node": k.Node}
	return inj, nil
}

// killScheduler crashes the scheduler and restarts it.
type killScheduler struct{}

func (killScheduler) Name() string               { return "kill-scheduler" }
func (killScheduler) Describe() string           { return "crash the scheduler and restart it" }
func (killScheduler) Needs() []target.Capability { return needsKill }
func (killScheduler) Available(t target.Target) bool {
	return canAny(t, target.Kill, target.RoleScheduler)
}
func (killScheduler) Inject(ctx context.Context, t target.Target, rng *rand.Rand) (Injection, error) {
	s := pickOne(able(t, target.Kill, target.RoleScheduler), rng)
	return crash(ctx, t, []string{s.Name}, "kill "+s.Name)
}

// killController crashes one random running controller (the fencing
// controller among them when it runs) and restarts it.
type killController struct{}

func (killController) Name() string { return "kill-controller" }
func (killController) Describe() string {
	return "crash one random controller (node lifecycle, pod GC, pet, ReplicaSet, attach/detach, disruption, fencing) and restart it"
}
func (killController) Needs() []target.Capability { return needsKill }
func (killController) Available(t target.Target) bool {
	return canAny(t, target.Kill, target.RoleController)
}
func (killController) Inject(ctx context.Context, t target.Target, rng *rand.Rand) (Injection, error) {
	running := runningControllers(t)
	if len(running) == 0 {
		return Injection{}, fmt.Errorf("kill-controller: %w", target.ErrNotRunning)
	}
	return crashControllers(ctx, t, []string{running[rng.IntN(len(running))]})
}

// killControllers crashes several running controllers at once, at least
// two, and restarts them.
type killControllers struct{}

func (killControllers) Name() string { return "kill-controllers" }
func (killControllers) Describe() string {
	return "crash several controllers at once (a random subset of at least two) and restart them"
}
func (killControllers) Needs() []target.Capability { return needsKill }
func (killControllers) Available(t target.Target) bool {
	return canAny(t, target.Kill, target.RoleController)
}
func (killControllers) Inject(ctx context.Context, t target.Target, rng *rand.Rand) (Injection, error) {
	running := shuffled(runningControllers(t), rng)
	if len(running) == 0 {
		return Injection{}, fmt.Errorf("kill-controllers: %w", target.ErrNotRunning)
	}
	n := len(running)
	if n > 2 {
		n = 2 + rng.IntN(n-1) // 2..len
	}
	names := running[:n]
	slices.Sort(names)
	return crashControllers(ctx, t, names)
}

// killFencing crashes the fencing controller, mid-fence or not, and restarts
// it: a fence it started must still be finished or safely abandoned.
type killFencing struct{}

func (killFencing) Name() string { return "kill-fencing" }
func (killFencing) Describe() string {
	return "crash the fencing controller and restart it (clusters that run it)"
}
func (killFencing) Needs() []target.Capability     { return needsKill }
func (killFencing) Available(t target.Target) bool { return canAny(t, target.Kill, target.RoleFencing) }
func (killFencing) Inject(ctx context.Context, t target.Target, rng *rand.Rand) (Injection, error) {
	running := runningOf(t, able(t, target.Kill, target.RoleFencing))
	if len(running) == 0 {
		return Injection{}, fmt.Errorf("kill-fencing: %w", target.ErrNotRunning)
	}
	return crashControllers(ctx, t, []string{pickOne(running, rng).Name})
}

// runningOf keeps the components that run now.
func runningOf(t target.Target, comps []target.Component) []target.Component {
	p, ok := t.(target.Processes)
	if !ok {
		return nil
	}
	var out []target.Component
	for _, c := range comps {
		if p.Running(c.Name) {
			out = append(out, c)
		}
	}
	return out
}

// runningControllers lists, sorted by name, the running controllers t can
// kill, the fencing controller among them.
func runningControllers(t target.Target) []string {
	out := names(runningOf(t, able(t, target.Kill, target.RoleController, target.RoleFencing)))
	slices.Sort(out)
	return out
}

// crashControllers kills names and returns the injection that restarts them,
// described by the controllers' own names.
func crashControllers(ctx context.Context, t target.Target, names []string) (Injection, error) {
	short := make([]string, len(names))
	for i, n := range names {
		short[i] = strings.TrimPrefix(n, "controller/")
	}
	return crash(ctx, t, names, "kill controller "+strings.Join(short, ","))
}

// crash kills names in order and returns the injection that restarts them.
// If one fails to die, the ones already killed are restarted.
func crash(ctx context.Context, t target.Target, names []string, desc string) (Injection, error) {
	p, ok := t.(target.Processes)
	if !ok {
		return Injection{}, fmt.Errorf("%s: %w", desc, target.ErrUnsupported)
	}
	hctx := context.WithoutCancel(ctx)
	var killed []string
	restart := func() error {
		var errs []error
		for _, n := range killed {
			// A node powered off meanwhile (a fence, an admin) stays off.
			errs = append(errs, ignore(p.Restart(hctx, n), target.ErrRunning, target.ErrPoweredOff))
		}
		return errors.Join(errs...)
	}
	for _, n := range names {
		if err := p.Kill(ctx, n); err != nil {
			return Injection{}, errors.Join(err, restart())
		}
		killed = append(killed, n)
	}
	return Injection{
		Description: desc,
		Targets:     slices.Clone(names),
		Components:  slices.Clone(names),
		Heal:        restart,
	}, nil
}
