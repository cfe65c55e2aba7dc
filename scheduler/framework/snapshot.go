package framework

import corev1 "k8s.io/api/core/v1"

// Snapshot is an immutable-per-cycle view of the cluster's nodes and their
// pods. The scheduler refreshes it between cycles; plugins only read it.
type Snapshot struct {
	nodes map[string]int // name -> index in list
	list  []*NodeInfo
	// withAffinity and withRequiredAntiAffinity count the pods of every
	// node with inter-pod affinity terms and with required anti-affinity
	// terms, so a cycle can tell at once that there are none.
	withAffinity, withRequiredAntiAffinity int
	// Generation is the highest NodeInfo generation the snapshot reflects.
	Generation int64
}

// NewSnapshot builds a snapshot from pods and nodes. Pods bound to nodes not
// in nodes are ignored.
func NewSnapshot(pods []*corev1.Pod, nodes []*corev1.Node) *Snapshot {
	s := &Snapshot{nodes: make(map[string]int, len(nodes))}
	for _, node := range nodes {
		ni := &NodeInfo{}
		ni.SetNode(node)
		s.nodes[node.Name] = len(s.list)
		s.list = append(s.list, ni)
	}
	for _, p := range pods {
		if i, ok := s.nodes[p.Spec.NodeName]; ok {
			s.list[i].AddPod(NewPodInfo(p))
		}
	}
	for _, ni := range s.list {
		s.count(ni, 1)
	}
	return s
}

// count adds (sign 1) or subtracts (-1) ni's pods with affinity terms.
func (s *Snapshot) count(ni *NodeInfo, sign int) {
	s.withAffinity += sign * len(ni.PodsWithAffinity)
	s.withRequiredAntiAffinity += sign * len(ni.PodsWithRequiredAntiAffinity)
}

// HasPodsWithAffinity reports whether any pod has inter-pod affinity or
// anti-affinity terms.
func (s *Snapshot) HasPodsWithAffinity() bool { return s.withAffinity > 0 }

// HasPodsWithRequiredAntiAffinity reports whether any pod has a required
// anti-affinity term.
func (s *Snapshot) HasPodsWithRequiredAntiAffinity() bool { return s.withRequiredAntiAffinity > 0 }

// NewEmptySnapshot returns a snapshot with no nodes.
func NewEmptySnapshot() *Snapshot { return &Snapshot{nodes: map[string]int{}} }

// List returns every node, in a stable order.
func (s *Snapshot) List() []*NodeInfo { return s.list }

// Get returns the node named name, or nil.
func (s *Snapshot) Get(name string) *NodeInfo {
	i, ok := s.nodes[name]
	if !ok {
		return nil
	}
	return s.list[i]
}

// NumNodes is the number of nodes.
func (s *Snapshot) NumNodes() int { return len(s.list) }

// Set replaces (or adds) the NodeInfo of a node. It is how the scheduler's
// cache refreshes a snapshot and how benchmarks assume pods. A NodeInfo in a
// snapshot is never changed in place: a change is a new NodeInfo passed to
// Set, which lets plugins keep per-node results between cycles.
func (s *Snapshot) Set(ni *NodeInfo) {
	name := ni.Node().Name
	s.count(ni, 1)
	if i, ok := s.nodes[name]; ok {
		s.count(s.list[i], -1)
		s.list[i] = ni
		return
	}
	s.nodes[name] = len(s.list)
	s.list = append(s.list, ni)
}

// Remove drops a node.
func (s *Snapshot) Remove(name string) {
	i, ok := s.nodes[name]
	if !ok {
		return
	}
	s.count(s.list[i], -1)
	delete(s.nodes, name)
	s.list = append(s.list[:i], s.list[i+1:]...)
	for j := i; j < len(s.list); j++ {
		s.nodes[s.list[j].Node().Name] = j
	}
}
