package cluster_test

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/podsafe/podsafe/cluster"
)

// TestComponentClocks: every kubelet and controller runs on its own view;
// a skewed kubelet stamps its lease with the skew, and resetting the view
// heals it; a restarted kubelet keeps its node's view.
func TestComponentClocks(t *testing.T) {
	env := startCtlCluster(t, 1)
	c, cs := env.c, env.cs
	want := []string{cluster.KubeletComponent("node-0"), cluster.ComponentScheduler}
	for _, n := range cluster.ControllerNames {
		want = append(want, cluster.ControllerComponent(n))
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, c.ClockComponents()); diff != "" {
		t.Errorf("ClockComponents (-want +got):\n%s", diff)
	}

	view := c.ComponentClock(cluster.KubeletComponent("node-0"))
	view.Jump(time.Hour)
	if d := view.Now().Sub(c.Clock().Now()); d < 59*time.Minute || d > 61*time.Minute {
		t.Errorf("a view jumped by 1h reads %s ahead of the cluster clock", d)
	}
	if other := c.ComponentClock(cluster.ControllerComponent(cluster.ControllerPodGC)); other.Offset() != 0 {
		t.Errorf("skewing a kubelet moved the pod GC clock by %s", other.Offset())
	}
	waitFor(t, "a lease stamped an hour ahead", 30*time.Second, func() bool {
		return leaseRenewed(cs, "node-0").Sub(c.Clock().Now()) > 50*time.Minute
	})

	if err := c.StopKubelet("node-0"); err != nil {
		t.Fatal(err)
	}
	if err := c.StartKubelet("node-0"); err != nil {
		t.Fatal(err)
	}
	if c.ComponentClock(cluster.KubeletComponent("node-0")) != view || view.Offset() != time.Hour {
		t.Error("a restarted kubelet got a new clock view; the node's skew must survive a restart")
	}

	view.ResetOffset()
	if view.Offset() != 0 {
		t.Errorf("offset after ResetOffset = %s", view.Offset())
	}
	waitFor(t, "a lease stamped at the cluster's time", 30*time.Second, func() bool {
		d := leaseRenewed(cs, "node-0").Sub(c.Clock().Now())
		return d < time.Minute && d > -time.Minute
	})
}
