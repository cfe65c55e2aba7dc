package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/podsafe/podsafe/target"
)

// Pauses. A paused component is a stopped process (target.Processes.Pause:
// SIGSTOP, or on the embedded cluster cluster.Pause): its traffic is held
// and its clock stands still, so it makes no progress; on resume it acts on
// the state it had, until its watches catch up. No other fault's heal lifts
// a pause.
func init() {
	register("pause", pauseKubelet{}, pauseController{}, pauseScheduler{})
	register("node", pauseKubelet{})
}

// needsPause is what every pause needs.
var needsPause = []target.Capability{target.Pause}

// pauseKubelet pauses a random kubelet; its containers keep running.
type pauseKubelet struct{}

func (pauseKubelet) Name() string { return "pause-kubelet" }
func (pauseKubelet) Describe() string {
	return "pause a random kubelet (SIGSTOP: no traffic, no timers; its containers keep running) and resume it"
}
func (pauseKubelet) Needs() []target.Capability { return needsPause }
func (pauseKubelet) Available(t target.Target) bool {
	return canAny(t, target.Pause, target.RoleKubelet)
}
func (pauseKubelet) Inject(ctx context.Context, t target.Target, rng *rand.Rand) (Injection, error) {
	k := pickNode(t, target.Pause, rng)
	return with(map[string]string{"node": k.Node})(pauseComponent(ctx, t, k.Name))
}

// pauseController pauses the controller-manager: every controller, the
// fencing controller too, since they share one process and host (the
// embedded cluster's "controller-manager" component).
type pauseController struct{}

func (pauseController) Name() string { return "pause-controller" }
func (pauseController) Describe() string {
	return "pause the controller-manager (every controller, fencing included) and resume it"
}
func (pauseController) Needs() []target.Capability { return needsPause }
func (pauseController) Available(t target.Target) bool {
	return canAny(t, target.Pause, target.RoleController)
}
func (pauseController) Inject(ctx context.Context, t target.Target, rng *rand.Rand) (Injection, error) {
	return pauseComponent(ctx, t, pickOne(able(t, target.Pause, target.RoleController), rng).Name)
}

// pauseScheduler pauses the scheduler.
type pauseScheduler struct{}

func (pauseScheduler) Name() string               { return "pause-scheduler" }
func (pauseScheduler) Describe() string           { return "pause the scheduler and resume it" }
func (pauseScheduler) Needs() []target.Capability { return needsPause }
func (pauseScheduler) Available(t target.Target) bool {
	return canAny(t, target.Pause, target.RoleScheduler)
}
func (pauseScheduler) Inject(ctx context.Context, t target.Target, rng *rand.Rand) (Injection, error) {
	return pauseComponent(ctx, t, pickOne(able(t, target.Pause, target.RoleScheduler), rng).Name)
}

func pauseComponent(ctx context.Context, t target.Target, component string) (Injection, error) {
	p, ok := t.(target.Processes)
	if !ok {
		return Injection{}, fmt.Errorf("pause %s: %w", component, target.ErrUnsupported)
	}
	if err := p.Pause(ctx, component); err != nil {
		return Injection{}, err
	}
	hctx := context.WithoutCancel(ctx)
	return Injection{
		Description: "pause " + component,
		Targets:     []string{component},
		Components:  []string{component},
		Heal:        func() error { return ignore(p.Resume(hctx, component), target.ErrNotPaused) },
	}, nil
}
