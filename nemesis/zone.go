package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/podsafe/podsafe/target"
)

func init() {
	register("partition-zone", partitionZone{})
}

// partitionZone cuts every node of one topology zone from every
// control-plane member, both ways, at once: a zone's network fails as a
// whole, as in Kubernetes' own zone-outage tests. The node lifecycle
// controller sees a whole zone's leases expire together (its zone-disruption
// rate limiting applies) while the zone's containers keep running and keep
// reaching the storage; pods the controllers replace land in the other zones.
type partitionZone struct{}

func (partitionZone) Name() string { return "partition-zone" }
func (partitionZone) Describe() string {
	return "cut every node of a random topology zone from every control-plane member; their containers keep running and reach the storage"
}
func (partitionZone) Needs() []target.Capability { return needsNetwork }

// Available needs nodes in at least two zones, so that a zone can fail while
// another carries on.
func (partitionZone) Available(t target.Target) bool {
	if _, ok := t.(target.Networker); !ok || len(controlPlaneHosts(t)) == 0 {
		return false
	}
	return len(zones(t)) >= 2
}

func (partitionZone) Inject(ctx context.Context, t target.Target, rng *rand.Rand) (Injection, error) {
	byZone := zones(t)
	names := make([]string, 0, len(byZone))
	for z := range byZone {
		names = append(names, z)
	}
	slices.Sort(names)
	if len(names) == 0 {
		return Injection{}, fmt.Errorf("partition-zone: no node has a topology zone")
	}
	zone := names[rng.IntN(len(names))]
	nodes := byZone[zone]
	hosts := make([]string, len(nodes))
	for i, n := range nodes {
		hosts[i] = n.Host
	}
	desc := fmt.Sprintf("cut zone %s (%d nodes) from the control plane", zone, len(nodes))
	return with(map[string]string{"zone": zone, "nodes": strconv.Itoa(len(nodes))})(
		partitionHosts(ctx, t, desc, hosts, controlPlaneHosts(t)))
}

// zones groups the kubelets whose network can be cut by their node's zone
// (nodes without one are left out).
func zones(t target.Target) map[string][]target.Component {
	out := map[string][]target.Component{}
	for _, c := range able(t, target.Network, target.RoleKubelet) {
		if c.Zone != "" {
			out[c.Zone] = append(out[c.Zone], c)
		}
	}
	return out
}
