package nemesis_test

import (
	"testing"
	"time"

	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/cluster/scaledclock"
)

// readsOffset reports whether view reads the cluster clock plus off.
func readsOffset(c *cluster.Cluster, view *scaledclock.Clock, off time.Duration) bool {
	before := c.Clock().Now()
	got := view.Now().Add(-off)
	after := c.Clock().Now()
	return !got.Before(before) && !got.After(after)
}

func abs(d time.Duration) time.Duration { return max(d, -d) }

func TestClockFaults(t *testing.T) {
	c := startNodes(t, 1, 1, withControllers)
	rng := seeded()
	for _, tt := range []struct {
		name   string
		lo, hi time.Duration
	}{
		{"clock-skew", time.Second, time.Minute},
		{"clock-jump", 5 * time.Minute, 2 * time.Hour},
	} {
		t.Run(tt.name, func(t *testing.T) {
			inj := inject(t, c, tt.name, rng)
			view := c.ComponentClock(inj.Targets[0])
			off := view.Offset()
			if abs(off) < tt.lo || abs(off) >= tt.hi {
				t.Errorf("offset %s, want a magnitude in [%s, %s)", off, tt.lo, tt.hi)
			}
			if !readsOffset(c, view, off) {
				t.Errorf("%s reads %s, want the cluster's %s plus %s", inj.Targets[0], view.Now(), c.Clock().Now(), off)
			}
			for _, other := range c.ClockComponents() {
				if other != inj.Targets[0] && c.ComponentClock(other).Offset() != 0 {
					t.Errorf("%s moved the clock of %s too", tt.name, other)
				}
			}
			heal(t, inj)
			if view.Offset() != 0 || !readsOffset(c, view, 0) {
				t.Errorf("after heal %s reads offset %s", inj.Targets[0], view.Offset())
			}
		})
	}

	t.Run("clock-strobe", func(t *testing.T) {
		inj := inject(t, c, "clock-strobe", rng)
		view := c.ComponentClock(inj.Targets[0])
		seen := map[bool]bool{}
		eventually(t, "the strobe flipping both ways", 30*time.Second, func() bool {
			seen[view.Offset() != 0] = true
			return seen[true] && seen[false]
		})
		heal(t, inj)
		for range 5 {
			if view.Offset() != 0 {
				t.Fatalf("offset %s after the strobe was healed", view.Offset())
			}
			scaled(c, 10*time.Second)
		}
	})
}

// A jumped kubelet stamps its lease with its own reading.
func TestClockJumpReachesTheKubelet(t *testing.T) {
	c := startNodes(t, 1, 1) // the kubelet is the only component with a view
	cs := admin(t, c)
	inj := inject(t, c, "clock-jump", seeded())
	if inj.Targets[0] != cluster.KubeletComponent("node-0") {
		t.Fatalf("clock-jump targets %v, want the only kubelet", inj.Targets)
	}
	off := c.ComponentClock(inj.Targets[0]).Offset()
	stamped := func(want time.Duration) func() bool {
		return func() bool {
			return abs(leaseRenewed(cs, "node-0").Sub(c.Clock().Now())-want) < 30*time.Second
		}
	}
	eventually(t, "a lease stamped with the jump", 30*time.Second, stamped(off))
	heal(t, inj)
	eventually(t, "a lease stamped at the cluster's time", 30*time.Second, stamped(0))
}

func TestClockNeedsViews(t *testing.T) {
	c := startCluster(t, 1) // no kubelets, no controllers
	for _, name := range []string{"clock-skew", "clock-jump", "clock-strobe"} {
		if fault(t, name).Available(cluster.AsTarget(c)) {
			t.Errorf("%s claims to be available with no component on its own clock", name)
		}
	}
}
