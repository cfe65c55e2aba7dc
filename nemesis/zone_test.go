package nemesis_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/podsafe/podsafe/cluster"
)

// TestPartitionZone: the zone partition cuts every node of one zone (and
// only those) from every control-plane member, both ways; their leases stop
// while the other zone's go on; heal restores all of it. One zone is not
// enough for it.
func TestPartitionZone(t *testing.T) {
	c := startNodes(t, 3, 4, func(cfg *cluster.Config) { cfg.Topology = cluster.DefaultTopology(3, 4, 2) })
	cs := admin(t, c)
	for _, n := range []string{"node-0", "node-1", "node-2", "node-3"} {
		eventually(t, "a lease of "+n, 10*time.Second, func() bool { return !leaseRenewed(cs, n).IsZero() })
	}
	inj := inject(t, c, "partition-zone", seeded())
	zone := inj.Params["zone"]
	// DefaultTopology spreads nodes round-robin: zone-a holds the even ones.
	in, out := []string{"node-0", "node-2"}, []string{"node-1", "node-3"}
	if zone == "zone-b" {
		in, out = out, in
	} else if zone != "zone-a" {
		t.Fatalf("partitioned zone %q, want zone-a or zone-b", zone)
	}
	var want []string
	for _, n := range in {
		for _, h := range c.MemberHosts() {
			want = append(want, n+"->"+h, h+"->"+n)
		}
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, cutLinks(c)); diff != "" {
		t.Errorf("cut links (-want +got):\n%s", diff)
	}
	if inj.Params["nodes"] != "2" || !strings.Contains(inj.Description, zone) {
		t.Errorf("injection %+v does not name the zone and its 2 nodes", inj)
	}
	before := assertLeaseFrozen(t, c, cs, in[0])
	renewed := leaseRenewed(cs, out[0])
	eventually(t, "the other zone renewing", 30*time.Second, func() bool { return leaseRenewed(cs, out[0]).After(renewed) })
	heal(t, inj)
	if got := cutLinks(c); len(got) != 0 {
		t.Errorf("after heal, still cut: %v", got)
	}
	eventually(t, "a renewal after the heal", 30*time.Second, func() bool { return leaseRenewed(cs, in[0]).After(before) })

	one := startNodes(t, 1, 2)
	if fault(t, "partition-zone").Available(cluster.AsTarget(one)) {
		t.Error("partition-zone is available on a cluster of one zone")
	}
}
