package nemesis

import (
	"context"
	"math/rand/v2"

	"github.com/podsafe/podsafe/cluster"
)

// Pauses. A paused component is a stopped process (cluster.Pause): its
// traffic is held and its clock stands still, so it makes no progress; on
// resume it acts on the state it had, until its watches catch up. No other
// fault's heal lifts a pause.
func init() {
	register("pause", pauseKubelet{}, pauseController{}, pauseScheduler{})
	register("node", pauseKubelet{})
}

// pauseKubelet pauses a random kubelet; its containers keep running.
type pauseKubelet struct{}

func (pauseKubelet) Name() string { return "pause-kubelet" }
func (pauseKubelet) Describe() string {
	return "pause a random kubelet (SIGSTOP: no traffic, no timers; its containers keep running) and resume it"
}
func (pauseKubelet) Available(c *cluster.Cluster) bool { return hasKubelets(c) }
func (pauseKubelet) Inject(ctx context.Context, c *cluster.Cluster, rng *rand.Rand) (Injection, error) {
	return pauseComponent(c, cluster.KubeletComponent(pickNode(c, rng)))
}

// pauseController pauses the controller-manager: every controller, the
// fencing controller too, since they share one process and host.
type pauseController struct{}

func (pauseController) Name() string { return "pause-controller" }
func (pauseController) Describe() string {
	return "pause the controller-manager (every controller, fencing included) and resume it"
}
func (pauseController) Available(c *cluster.Cluster) bool { return c.Config().Controllers }
func (pauseController) Inject(ctx context.Context, c *cluster.Cluster, rng *rand.Rand) (Injection, error) {
	return pauseComponent(c, cluster.ComponentControllerManager)
}

// pauseScheduler pauses the scheduler.
type pauseScheduler struct{}

func (pauseScheduler) Name() string                      { return "pause-scheduler" }
func (pauseScheduler) Describe() string                  { return "pause the scheduler and resume it" }
func (pauseScheduler) Available(c *cluster.Cluster) bool { return c.Config().Scheduler }
func (pauseScheduler) Inject(ctx context.Context, c *cluster.Cluster, rng *rand.Rand) (Injection, error) {
	return pauseComponent(c, cluster.ComponentScheduler)
}

func pauseComponent(c *cluster.Cluster, component string) (Injection, error) {
	if err := c.Pause(component); err != nil {
		return Injection{}, err
	}
	return Injection{
		Description: "pause " + component,
		Targets:     []string{component},
		Heal:        func() error { return ignore(c.Resume(component), cluster.ErrNotPaused) },
	}, nil
}
