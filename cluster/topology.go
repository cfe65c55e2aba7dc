package cluster

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Well-known node labels set on every simulated node.
const (
	LabelHostname = "kubernetes.io/hostname"
	LabelZone     = "topology.kubernetes.io/zone"
)

// Topology describes the cluster to build: how many control-plane members (each
// a raft member with its own API server) and which worker nodes.
type Topology struct {
	// Members is the number of control-plane members: 1, 3 or 5.
	Members int `json:"members"`
	// Nodes are the worker nodes. Until kubelet agents exist they are registered
	// Node objects only.
	Nodes []NodeSpec `json:"nodes"`

	_ struct{}
}

// NodeSpec is one worker node.
type NodeSpec struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
	Taints []corev1.Taint    `json:"taints,omitempty"`
}

// DefaultTopology builds a topology of members control-plane members and nodes
// worker nodes named node-0…node-(nodes-1), spread round-robin over zones zones
// named zone-a, zone-b, ….
func DefaultTopology(members, nodes, zones int) Topology {
	if zones < 1 {
		zones = 1
	}
	t := Topology{Members: members}
	for i := 0; i < nodes; i++ {
		name := fmt.Sprintf("node-%d", i)
		t.Nodes = append(t.Nodes, NodeSpec{
			Name: name,
			Labels: map[string]string{
				LabelHostname: name,
				LabelZone:     fmt.Sprintf("zone-%c", 'a'+rune(i%zones)),
			},
		})
	}
	return t
}

// Validate reports the first problem with the topology, naming the field.
func (t Topology) Validate() error {
	switch t.Members {
	case 1, 3, 5:
	default:
		return fmt.Errorf("%w: members must be 1, 3 or 5, got %d", ErrInvalidTopology, t.Members)
	}
	seen := map[string]bool{}
	for i, n := range t.Nodes {
		if n.Name == "" {
			return fmt.Errorf("%w: nodes[%d].name is empty", ErrInvalidTopology, i)
		}
		if errs := validation.IsDNS1123Subdomain(n.Name); len(errs) > 0 {
			return fmt.Errorf("%w: nodes[%d].name %q is not a valid node name (a DNS-1123 subdomain): %s", ErrInvalidTopology, i, n.Name, strings.Join(errs, "; "))
		}
		if strings.HasPrefix(n.Name, "cp-") || strings.HasPrefix(n.Name, "client-") {
			return fmt.Errorf("%w: nodes[%d].name %q uses a reserved prefix (cp-, client-)", ErrInvalidTopology, i, n.Name)
		}
		if seen[n.Name] {
			return fmt.Errorf("%w: nodes[%d].name %q is used twice", ErrInvalidTopology, i, n.Name)
		}
		seen[n.Name] = true
	}
	return nil
}

// MemberHost is the network host name of control-plane member i.
func MemberHost(i int) string { return fmt.Sprintf("cp-%d", i) }

// ClientHost is the network host name of client i (workload processes).
func ClientHost(i int) string { return fmt.Sprintf("client-%d", i) }

// StartTimeout is a generous bound on starting a cluster of t, growing with
// the nodes that must register (100 ms each, at least 30 s): it turns a
// hang into an error, it does not time a slow machine.
func (t Topology) StartTimeout() time.Duration {
	return max(30*time.Second, time.Duration(len(t.Nodes))*100*time.Millisecond)
}
