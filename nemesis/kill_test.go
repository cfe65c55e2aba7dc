package nemesis_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/podsafe/podsafe/cluster"
)

func TestKillFaults(t *testing.T) {
	c := startNodes(t, 3, 1, durable(t), withScheduler, withControllers)
	cs := admin(t, c)
	rng := seeded()
	ctx := context.Background()
	controllers := slices.Sorted(slices.Values(cluster.ControllerNames))

	for _, name := range []string{"kill-member", "kill-leader"} {
		t.Run(name, func(t *testing.T) {
			if err := c.WaitLeader(ctx); err != nil {
				t.Fatal(err)
			}
			leader := c.LeaderIndex()
			inj := inject(t, c, name, rng)
			i := memberIndex(t, inj.Targets[0])
			if name == "kill-leader" && i != leader {
				t.Errorf("kill-leader killed %s, the leader was %s", inj.Targets[0], cluster.MemberHost(leader))
			}
			if c.MemberUp(i) {
				t.Errorf("member %d still up after %s", i, name)
			}
			heal(t, inj)
			if !c.MemberUp(i) {
				t.Errorf("member %d down after the heal", i)
			}
			if err := c.WaitLeader(ctx); err != nil {
				t.Fatal(err)
			}
			eventually(t, "a write after the restart", 20*time.Second, func() bool {
				return write(memberClient(t, c, i), "after-"+name, 2*time.Second) != 0
			})
		})
	}

	t.Run("kill-kubelet", func(t *testing.T) {
		runPod(t, c, cs, "survivor", "node-0")
		inj := inject(t, c, "kill-kubelet", rng)
		if inj.Targets[0] != cluster.KubeletComponent("node-0") {
			t.Errorf("targets %v, want the kubelet of node-0", inj.Targets)
		}
		if c.KubeletRunning("node-0") {
			t.Error("kubelet still running")
		}
		if n := running(t, c, "node-0"); n == 0 {
			t.Error("the containers of a killed kubelet stopped")
		}
		before := leaseRenewed(cs, "node-0")
		heal(t, inj)
		if !c.KubeletRunning("node-0") {
			t.Error("kubelet not running after the heal")
		}
		eventually(t, "a renewal by the restarted kubelet", 30*time.Second, func() bool {
			return leaseRenewed(cs, "node-0").After(before)
		})
	})

	t.Run("kill-scheduler", func(t *testing.T) {
		inj := inject(t, c, "kill-scheduler", rng)
		if c.SchedulerRunning() {
			t.Error("scheduler still running")
		}
		heal(t, inj)
		if !c.SchedulerRunning() {
			t.Error("scheduler not running after the heal")
		}
	})

	t.Run("kill-controller", func(t *testing.T) {
		inj := inject(t, c, "kill-controller", rng)
		name := strings.TrimPrefix(inj.Targets[0], cluster.ControllerComponent(""))
		if c.ControllerRunning(name) {
			t.Errorf("controller %s still running", name)
		}
		heal(t, inj)
		if diff := cmp.Diff(controllers, c.RunningControllers()); diff != "" {
			t.Errorf("running controllers after the heal (-want +got):\n%s", diff)
		}
	})

	t.Run("kill-controllers", func(t *testing.T) {
		inj := inject(t, c, "kill-controllers", rng)
		if len(inj.Targets) < 2 {
			t.Errorf("kill-controllers killed %v, want at least two", inj.Targets)
		}
		if got := len(c.RunningControllers()); got != len(controllers)-len(inj.Targets) {
			t.Errorf("%d controllers running after killing %d of %d", got, len(inj.Targets), len(controllers))
		}
		heal(t, inj)
		if diff := cmp.Diff(controllers, c.RunningControllers()); diff != "" {
			t.Errorf("running controllers after the heal (-want +got):\n%s", diff)
		}
	})

	if fault(t, "kill-fencing").Available(cluster.AsTarget(c)) {
		t.Error("kill-fencing claims to be available without a fencing controller")
	}
}

func TestKillFencing(t *testing.T) {
	c := startNodes(t, 1, 1, withFencing)
	inj := inject(t, c, "kill-fencing", seeded())
	if c.ControllerRunning(cluster.ControllerFencing) {
		t.Error("fencing controller still running")
	}
	heal(t, inj)
	if !c.ControllerRunning(cluster.ControllerFencing) {
		t.Error("fencing controller not running after the heal")
	}
}

// Without durable storage a member cannot restart, so crashing one is not
// offered.
func TestKillMemberNeedsDurable(t *testing.T) {
	c := startCluster(t, 3)
	for _, name := range []string{"kill-member", "kill-leader", "kill-kubelet", "kill-scheduler", "kill-controller"} {
		if fault(t, name).Available(cluster.AsTarget(c)) {
			t.Errorf("%s claims to be available on an in-memory cluster with no components", name)
		}
	}
}
