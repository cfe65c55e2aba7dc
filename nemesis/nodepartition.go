package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/podsafe/podsafe/cluster"
)

// Partitions that involve worker nodes. A node's host carries its kubelet's
// API traffic and its containers' writes to the shared storage, so each shape
// says which of the two it cuts.
func init() {
	register("node-partition", partitionNode{}, partitionNodeNode{}, partitionStorage{}, oneWayNode{})
	register("node", partitionNode{}, partitionNodeNode{}, partitionStorage{}, oneWayNode{})
}

// nodeNames lists the topology's nodes.
func nodeNames(c *cluster.Cluster) []string {
	var out []string
	for _, n := range c.Config().Topology.Nodes {
		out = append(out, n.Name)
	}
	return out
}

// hasKubelets: node faults need kubelets; registered-only nodes carry no
// traffic and run nothing.
func hasKubelets(c *cluster.Cluster) bool {
	return c.Config().Kubelets && len(c.Config().Topology.Nodes) > 0
}

// pickNode picks a random node that is powered on (a powered-off node has
// nothing left to fault), or any node if all are off.
func pickNode(c *cluster.Cluster, rng *rand.Rand) string {
	nodes := nodeNames(c)
	var on []string
	for _, n := range nodes {
		if !c.PoweredOff(n) {
			on = append(on, n)
		}
	}
	if len(on) == 0 {
		on = nodes
	}
	return on[rng.IntN(len(on))]
}

// partitionNode cuts a kubelet from every API member, both ways: the node
// controller sees its lease expire while its containers keep running and
// keep reaching the storage (the classic pod-safety partition).
type partitionNode struct{}

func (partitionNode) Name() string { return "partition-node" }
func (partitionNode) Describe() string {
	return "cut a random node (its kubelet) from every control-plane member; its containers keep running and reach the storage"
}
func (partitionNode) Available(c *cluster.Cluster) bool { return hasKubelets(c) }
func (partitionNode) Inject(ctx context.Context, c *cluster.Cluster, rng *rand.Rand) (Injection, error) {
	node := pickNode(c, rng)
	return partitionHosts(c, fmt.Sprintf("cut node %s from the control plane", node), []string{node}, c.MemberHosts()), nil
}

// partitionNodeNode splits the nodes into two random halves cut from each
// other, both ways; each keeps the control plane and the storage. Nodes of
// the in-process cluster exchange no traffic today (containers talk only to
// the storage), so this cuts nothing in use until they do; it is here so
// that a scenario can state the shape, as PS-T asks, and so that
// multi-process mode and future peer traffic get it for free.
type partitionNodeNode struct{}

func (partitionNodeNode) Name() string { return "partition-node-node" }
func (partitionNodeNode) Describe() string {
	return "split the nodes into two halves cut from each other (both keep the control plane and the storage)"
}
func (partitionNodeNode) Available(c *cluster.Cluster) bool {
	return len(c.Config().Topology.Nodes) > 1
}
func (partitionNodeNode) Inject(ctx context.Context, c *cluster.Cluster, rng *rand.Rand) (Injection, error) {
	nodes := shuffled(nodeNames(c), rng)
	a, b := nodes[:len(nodes)/2], nodes[len(nodes)/2:]
	desc := fmt.Sprintf("split nodes %s | %s", strings.Join(a, ","), strings.Join(b, ","))
	return partitionHosts(c, desc, a, b), nil
}

// partitionStorage cuts a node from the shared storage, both ways: its
// containers' writes stall and fail while its kubelet stays healthy.
type partitionStorage struct{}

func (partitionStorage) Name() string { return "partition-storage" }
func (partitionStorage) Describe() string {
	return "cut a random node from the shared storage; its kubelet still reaches the control plane"
}
func (partitionStorage) Available(c *cluster.Cluster) bool { return hasKubelets(c) }
func (partitionStorage) Inject(ctx context.Context, c *cluster.Cluster, rng *rand.Rand) (Injection, error) {
	node := pickNode(c, rng)
	return partitionHosts(c, fmt.Sprintf("cut node %s from the storage", node), []string{node}, []string{cluster.StorageHost}), nil
}

// oneWayNode cuts one direction only between a kubelet and every API member.
// Cut node->API, the kubelet still receives events on its open watches (it
// learns of new pods and deletions) but its status writes and lease renewals
// never arrive; cut API->node, the bytes of its requests in flight land but
// it never hears the answers, so it sees timeouts for writes that took
// effect. simnet fails a connection cut in either direction after its
// detection timeout (keep-alives would) and new dials need both directions,
// so after that the cut acts both ways until it heals.
type oneWayNode struct{}

func (oneWayNode) Name() string { return "one-way-node" }
func (oneWayNode) Describe() string {
	return "cut one direction only between a random node and every control-plane member"
}
func (oneWayNode) Available(c *cluster.Cluster) bool { return hasKubelets(c) }
func (oneWayNode) Inject(ctx context.Context, c *cluster.Cluster, rng *rand.Rand) (Injection, error) {
	node := pickNode(c, rng)
	outbound := rng.IntN(2) == 0
	var links [][2]string
	for _, h := range c.MemberHosts() {
		if outbound {
			links = append(links, [2]string{node, h})
		} else {
			links = append(links, [2]string{h, node})
		}
	}
	desc := fmt.Sprintf("cut node %s -> control plane", node)
	if !outbound {
		desc = fmt.Sprintf("cut control plane -> node %s", node)
	}
	return cutLinks(c, desc, []string{node}, links), nil
}
