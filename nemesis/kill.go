package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/podsafe/podsafe/cluster"
)

// Crashes. Each stops a component as a crash would (whatever it was doing is
// abandoned) and heals by starting it again, which rebuilds its state from
// durable storage or from the API. A heal never starts what something else
// has meanwhile decided must stay down: a kubelet on a node powered off by a
// fence stays down.
func init() {
	register("kill", killMember{}, killLeader{}, killKubelet{}, killScheduler{}, killController{},
		killControllers{}, killFencing{})
	register("node", killKubelet{})
}

// killMember crashes a random raft member (its API server with it) and
// restarts it from its data directory.
type killMember struct{}

func (killMember) Name() string { return "kill-member" }
func (killMember) Describe() string {
	return "crash a random control-plane member (raft and API server) and restart it from disk (durable clusters only)"
}

// Available needs durable storage: an in-memory member restarted empty would
// break raft's safety, so the cluster refuses to restart it.
func (killMember) Available(c *cluster.Cluster) bool { return c.Config().Durable }
func (killMember) Inject(ctx context.Context, c *cluster.Cluster, rng *rand.Rand) (Injection, error) {
	return crashMember(c, rng.IntN(c.Members()), "kill member")
}

// killLeader crashes the raft leader and restarts it.
type killLeader struct{}

func (killLeader) Name() string { return "kill-leader" }
func (killLeader) Describe() string {
	return "crash the raft leader and restart it from disk (durable clusters of 3 or 5)"
}
func (killLeader) Available(c *cluster.Cluster) bool { return c.Config().Durable && c.Members() > 1 }
func (killLeader) Inject(ctx context.Context, c *cluster.Cluster, rng *rand.Rand) (Injection, error) {
	return crashMember(c, leaderOrAny(c, rng), "kill leader")
}

func crashMember(c *cluster.Cluster, i int, what string) (Injection, error) {
	host := cluster.MemberHost(i)
	if err := c.CrashMember(i); err != nil {
		return Injection{}, err
	}
	return Injection{
		Description: fmt.Sprintf("%s %s", what, host),
		Targets:     []string{host},
		Heal:        func() error { return ignore(c.RestartMember(i), cluster.ErrMemberUp) },
	}, nil
}

// killKubelet crashes a kubelet; its containers keep running in the node's
// runtime, and the restarted kubelet adopts them.
type killKubelet struct{}

func (killKubelet) Name() string { return "kill-kubelet" }
func (killKubelet) Describe() string {
	return "crash a random kubelet (its containers keep running) and restart it"
}
func (killKubelet) Available(c *cluster.Cluster) bool { return hasKubelets(c) }
func (killKubelet) Inject(ctx context.Context, c *cluster.Cluster, rng *rand.Rand) (Injection, error) {
	var running []string
	for _, n := range nodeNames(c) {
		if c.KubeletRunning(n) {
			running = append(running, n)
		}
	}
	if len(running) == 0 {
		return Injection{}, fmt.Errorf("kill-kubelet: %w", cluster.ErrKubeletDown)
	}
	node := running[rng.IntN(len(running))]
	if err := c.StopKubelet(node); err != nil {
		return Injection{}, err
	}
	return Injection{
		Description: "kill kubelet of " + node,
		Targets:     []string{cluster.KubeletComponent(node)},
		Heal: func() error {
			// A node powered off meanwhile (a fence, an admin) stays off.
			return ignore(c.StartKubelet(node), cluster.ErrKubeletUp, cluster.ErrPoweredOff)
		},
	}, nil
}

// killScheduler crashes the scheduler and restarts it.
type killScheduler struct{}

func (killScheduler) Name() string                      { return "kill-scheduler" }
func (killScheduler) Describe() string                  { return "crash the scheduler and restart it" }
func (killScheduler) Available(c *cluster.Cluster) bool { return c.Config().Scheduler }
func (killScheduler) Inject(ctx context.Context, c *cluster.Cluster, rng *rand.Rand) (Injection, error) {
	if err := c.StopScheduler(); err != nil {
		return Injection{}, err
	}
	return Injection{
		Description: "kill scheduler",
		Targets:     []string{cluster.ComponentScheduler},
		Heal:        func() error { return ignore(c.StartScheduler(), cluster.ErrSchedulerRunning) },
	}, nil
}

// killController crashes one random running controller (the fencing
// controller among them when it runs) and restarts it.
type killController struct{}

func (killController) Name() string { return "kill-controller" }
func (killController) Describe() string {
	return "crash one random controller (node lifecycle, pod GC, pet, ReplicaSet, attach/detach, disruption, fencing) and restart it"
}
func (killController) Available(c *cluster.Cluster) bool { return c.Config().Controllers }
func (killController) Inject(ctx context.Context, c *cluster.Cluster, rng *rand.Rand) (Injection, error) {
	running := c.RunningControllers()
	if len(running) == 0 {
		return Injection{}, fmt.Errorf("kill-controller: %w", cluster.ErrControllerStopped)
	}
	return crashControllers(c, []string{running[rng.IntN(len(running))]})
}

// killControllers crashes several running controllers at once, at least
// two, and restarts them.
type killControllers struct{}

func (killControllers) Name() string { return "kill-controllers" }
func (killControllers) Describe() string {
	return "crash several controllers at once (a random subset of at least two) and restart them"
}
func (killControllers) Available(c *cluster.Cluster) bool { return c.Config().Controllers }
func (killControllers) Inject(ctx context.Context, c *cluster.Cluster, rng *rand.Rand) (Injection, error) {
	running := shuffled(c.RunningControllers(), rng)
	if len(running) == 0 {
		return Injection{}, fmt.Errorf("kill-controllers: %w", cluster.ErrControllerStopped)
	}
	n := len(running)
	if n > 2 {
		n = 2 + rng.IntN(n-1) // 2..len
	}
	names := running[:n]
	slices.Sort(names)
	return crashControllers(c, names)
}

// killFencing crashes the fencing controller, mid-fence or not, and restarts
// it: a fence it started must still be finished or safely abandoned.
type killFencing struct{}

func (killFencing) Name() string { return "kill-fencing" }
func (killFencing) Describe() string {
	return "crash the fencing controller and restart it (clusters that run it)"
}
func (killFencing) Available(c *cluster.Cluster) bool {
	return c.Config().Controllers && c.Config().Fencing.Enabled
}
func (killFencing) Inject(ctx context.Context, c *cluster.Cluster, rng *rand.Rand) (Injection, error) {
	if !c.ControllerRunning(cluster.ControllerFencing) {
		return Injection{}, fmt.Errorf("kill-fencing: %w", cluster.ErrControllerStopped)
	}
	return crashControllers(c, []string{cluster.ControllerFencing})
}

// crashControllers stops names and returns the injection that starts them
// again. If one fails to stop, the ones already stopped are started again.
func crashControllers(c *cluster.Cluster, names []string) (Injection, error) {
	var stopped []string
	restart := func() error {
		var errs []error
		for _, n := range stopped {
			errs = append(errs, ignore(c.StartController(n), cluster.ErrControllerRunning))
		}
		return errors.Join(errs...)
	}
	var targets []string
	for _, n := range names {
		if err := c.StopController(n); err != nil {
			return Injection{}, errors.Join(err, restart())
		}
		stopped = append(stopped, n)
		targets = append(targets, cluster.ControllerComponent(n))
	}
	return Injection{
		Description: "kill controller " + strings.Join(names, ","),
		Targets:     targets,
		Heal:        restart,
	}, nil
}

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
