package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/podsafe/podsafe/target"
)

// Partitions that involve worker nodes. A node's host carries its kubelet's
// API traffic and its containers' writes to the shared storage, so each shape
// says which of the two it cuts. A node is its kubelet component: its Node
// names it, its Host is the node's host.
func init() {
	register("node-partition", partitionNode{}, partitionNodeNode{}, partitionStorage{}, oneWayNode{})
	register("node", partitionNode{}, partitionNodeNode{}, partitionStorage{}, oneWayNode{})
}

// canCutNodes reports whether t can cut the hosts of at least min nodes.
// Node faults need kubelets: registered-only nodes carry no traffic and run
// nothing.
func canCutNodes(t target.Target, min int) bool {
	if _, ok := t.(target.Networker); !ok {
		return false
	}
	return len(able(t, target.Network, target.RoleKubelet)) >= min
}

// partitionNode cuts a kubelet from every API member, both ways: the node
// controller sees its lease expire while its containers keep running and
// keep reaching the storage (the classic pod-safety partition).
type partitionNode struct{}

func (partitionNode) Name() string { return "partition-node" }
func (partitionNode) Describe() string {
	return "cut a random node (its kubelet) from every control-plane member; its containers keep running and reach the storage"
}
func (partitionNode) Needs() []target.Capability { return needsNetwork }
func (partitionNode) Available(t target.Target) bool {
	return canCutNodes(t, 1) && len(controlPlaneHosts(t)) > 0
}
func (partitionNode) Inject(ctx context.Context, t target.Target, rng *rand.Rand) (Injection, error) {
	node := pickNode(t, target.Network, rng)
	return with(map[string]string{"node": node.Node})(
		partitionHosts(ctx, t, fmt.Sprintf("cut node %s from the control plane", node.Node), []string{node.Host}, controlPlaneHosts(t)))
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
func (partitionNodeNode) Needs() []target.Capability     { return needsNetwork }
func (partitionNodeNode) Available(t target.Target) bool { return canCutNodes(t, 2) }
func (partitionNodeNode) Inject(ctx context.Context, t target.Target, rng *rand.Rand) (Injection, error) {
	var hosts []string
	for _, n := range able(t, target.Network, target.RoleKubelet) {
		hosts = append(hosts, n.Host)
	}
	nodes := shuffled(hosts, rng)
	a, b := nodes[:len(nodes)/2], nodes[len(nodes)/2:]
	desc := fmt.Sprintf("split nodes %s | %s", strings.Join(a, ","), strings.Join(b, ","))
	return with(sides("a", a, "b", b))(partitionHosts(ctx, t, desc, a, b))
}

// partitionStorage cuts a node from the shared storage, both ways: its
// containers' writes stall and fail while its kubelet stays healthy.
type partitionStorage struct{}

func (partitionStorage) Name() string { return "partition-storage" }
func (partitionStorage) Describe() string {
	return "cut a random node from the shared storage; its kubelet still reaches the control plane"
}
func (partitionStorage) Needs() []target.Capability { return needsNetwork }
func (partitionStorage) Available(t target.Target) bool {
	return canCutNodes(t, 1) && len(target.Hosts(t, target.RoleStorage)) > 0
}
func (partitionStorage) Inject(ctx context.Context, t target.Target, rng *rand.Rand) (Injection, error) {
	node := pickNode(t, target.Network, rng)
	return with(map[string]string{"node": node.Node})(
		partitionHosts(ctx, t, fmt.Sprintf("cut node %s from the storage", node.Node), []string{node.Host}, target.Hosts(t, target.RoleStorage)))
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
func (oneWayNode) Needs() []target.Capability { return needsNetwork }
func (oneWayNode) Available(t target.Target) bool {
	return canCutNodes(t, 1) && len(controlPlaneHosts(t)) > 0
}
func (oneWayNode) Inject(ctx context.Context, t target.Target, rng *rand.Rand) (Injection, error) {
	node := pickNode(t, target.Network, rng)
	outbound := rng.IntN(2) == 0
	cp := controlPlaneHosts(t)
	links := between([]string{node.Host}, cp)
	desc := fmt.Sprintf("cut node %s -> control plane", node.Node)
	dir := "outbound"
	if !outbound {
		links = between(cp, []string{node.Host})
		desc = fmt.Sprintf("cut control plane -> node %s", node.Node)
		dir = "inbound"
	}
	return with(map[string]string{"node": node.Node, "direction": dir})(cut(ctx, t, desc, []string{node.Host}, links))
}
