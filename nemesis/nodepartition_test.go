package nemesis_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/kubelet"
)

func TestNodePartitions(t *testing.T) {
	c := startNodes(t, 3, 2)
	cs := admin(t, c)
	rng := seeded()
	for _, n := range []string{"node-0", "node-1"} {
		eventually(t, "a lease of "+n, 10*time.Second, func() bool { return !leaseRenewed(cs, n).IsZero() })
	}

	t.Run("partition-node", func(t *testing.T) {
		inj := inject(t, c, "partition-node", rng)
		node := inj.Targets[0]
		var want []string
		for _, h := range c.MemberHosts() {
			want = append(want, node+"->"+h, h+"->"+node)
		}
		slices.Sort(want)
		if diff := cmp.Diff(want, cutLinks(c)); diff != "" {
			t.Errorf("cut links (-want +got):\n%s", diff)
		}
		// The kubelet's HTTP traffic stops: no lease renewal gets through.
		before := assertLeaseFrozen(t, c, cs, node)
		heal(t, inj)
		if got := cutLinks(c); len(got) != 0 {
			t.Errorf("after heal, still cut: %v", got)
		}
		eventually(t, "a renewal after the heal", 30*time.Second, func() bool { return leaseRenewed(cs, node).After(before) })
	})

	t.Run("one-way-node", func(t *testing.T) {
		inj := inject(t, c, "one-way-node", rng)
		node := inj.Targets[0]
		cut := cutLinks(c)
		_, sym := cutPeers(c)
		if len(cut) != c.Members() || sym {
			t.Errorf("cut %v, want %d links one way only", cut, c.Members())
		}
		for _, l := range cut {
			from, to, _ := strings.Cut(l, "->")
			if from != node && to != node {
				t.Errorf("cut link %s does not touch %s", l, node)
			}
		}
		heal(t, inj)
		if got := cutLinks(c); len(got) != 0 {
			t.Errorf("after heal, still cut: %v", got)
		}
	})

	t.Run("partition-node-node", func(t *testing.T) {
		inj := inject(t, c, "partition-node-node", rng)
		if diff := cmp.Diff([]string{"node-0->node-1", "node-1->node-0"}, cutLinks(c)); diff != "" {
			t.Errorf("cut links (-want +got):\n%s", diff)
		}
		heal(t, inj)
		if got := cutLinks(c); len(got) != 0 {
			t.Errorf("after heal, still cut: %v", got)
		}
	})

	t.Run("partition-storage", func(t *testing.T) {
		storageWrite := func(node string, seq int64, timeout time.Duration) error {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			return c.StorageClient(node).Write(ctx, kubelet.StorageWrite{Volume: "v", Node: node, Namespace: "default",
				Pod: "p", UID: "u-" + node, Container: "app", Seq: seq})
		}
		inj := inject(t, c, "partition-storage", rng)
		node := inj.Targets[0]
		other := "node-0"
		if node == other {
			other = "node-1"
		}
		if err := storageWrite(node, 1, 300*time.Millisecond); err == nil {
			t.Errorf("a write from %s reached the storage across the cut", node)
		}
		if err := storageWrite(other, 1, 5*time.Second); err != nil {
			t.Errorf("a write from %s, not cut, failed: %v", other, err)
		}
		// The kubelet of the cut node still reaches the control plane.
		before := leaseRenewed(cs, node)
		eventually(t, "a renewal while cut from the storage", 30*time.Second, func() bool { return leaseRenewed(cs, node).After(before) })
		heal(t, inj)
		eventually(t, "a write after the heal", 30*time.Second, func() bool { return storageWrite(node, 2, time.Second) == nil })
	})

	if fault(t, "partition-node").Available(cluster.AsTarget(startCluster(t, 1))) {
		t.Error("partition-node claims to be available on a cluster without kubelets")
	}
}
