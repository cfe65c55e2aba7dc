// Package interpodaffinity places pods relative to the pods already running:
// required podAffinity terms admit only nodes whose topology domain holds a
// matching pod, required podAntiAffinity terms (the incoming pod's, and those
// of existing pods that match the incoming pod) exclude domains holding one,
// and preferred terms of both sides score.
package interpodaffinity

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/podsafe/podsafe/scheduler/framework"
)

// Name is the plugin's name.
const Name = "InterPodAffinity"

// hardPodAffinityWeight is the score an existing pod's required affinity
// term gives the domains it could live with the incoming pod in, so pods
// that must be together tend to be placed together from either side.
const hardPodAffinityWeight = 1

// InterPodAffinity is the plugin. It keeps nothing between cycles.
type InterPodAffinity struct {
	h framework.Handle
}

var (
	_ framework.PreFilterPlugin     = &InterPodAffinity{}
	_ framework.FilterPlugin        = &InterPodAffinity{}
	_ framework.PreFilterExtensions = &InterPodAffinity{}
	_ framework.PreScorePlugin      = &InterPodAffinity{}
	_ framework.ScorePlugin         = &InterPodAffinity{}
	_ framework.ScoreNormalizer     = &InterPodAffinity{}
)

// New builds the plugin.
func New(h framework.Handle) (framework.Plugin, error) { return &InterPodAffinity{h: h}, nil }

// Name implements framework.Plugin.
func (*InterPodAffinity) Name() string { return Name }

// nsLabels is how namespaceSelectors see namespaces.
func (pl *InterPodAffinity) nsLabels() framework.NamespaceLabels {
	if pl.h == nil {
		return nil
	}
	return pl.h.NamespaceLabels
}

// snapshotOf returns the cycle's snapshot if nodes are its nodes, so its
// counts of pods with affinity terms describe them; nil otherwise.
func (pl *InterPodAffinity) snapshotOf(nodes []*framework.NodeInfo) *framework.Snapshot {
	if pl.h == nil {
		return nil
	}
	snap := pl.h.Snapshot()
	if snap == nil || snap.NumNodes() != len(nodes) {
		return nil
	}
	return snap
}

// topologyPair is one topology domain: a node label key and its value.
type topologyPair struct {
	key, value string
}

// pairCounts counts pods per topology domain; domains at zero are absent.
type pairCounts map[topologyPair]int64

// add adds n to the domain of node for key; nodes without key have none.
func (m pairCounts) add(key string, node *corev1.Node, n int64) {
	v, ok := node.Labels[key]
	if !ok {
		return
	}
	p := topologyPair{key: key, value: v}
	if m[p] += n; m[p] == 0 {
		delete(m, p)
	}
}

func (m pairCounts) clone() pairCounts {
	if m == nil {
		return nil
	}
	out := make(pairCounts, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
