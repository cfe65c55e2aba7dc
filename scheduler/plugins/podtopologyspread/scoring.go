package podtopologyspread

import (
	"context"
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsafe/podsafe/scheduler/framework"
)

const preScoreStateKey framework.StateKey = "PreScore" + Name

// preScoreState holds the ScheduleAnyway constraints, their per-domain counts
// over all eligible nodes, and a weight per constraint that grows with its
// number of domains, so a key with many domains is not drowned out.
type preScoreState struct {
	constraints []constraint
	// tables[i] counts constraint i over the whole snapshot; nil when its
	// domains are single nodes (perNode).
	tables  []*domainTable
	weights []float64
	// perNode[i] is true when constraint i's domains are single nodes: its
	// count is taken from the scored node directly.
	perNode []bool
}

// Clone implements framework.StateData; scoring state is read-only.
func (s *preScoreState) Clone() framework.StateData { return s }

// PreScore resolves the ScheduleAnyway constraints (TS-3) and counts
// matching pods per domain; it skips pods without any.
func (pl *PodTopologySpread) PreScore(_ context.Context, state *framework.CycleState, pod *corev1.Pod, feasible []*framework.NodeInfo) *framework.Status {
	cs, err := pl.constraintsOf(pod, corev1.ScheduleAnyway)
	if err != nil {
		return framework.AsStatus(fmt.Errorf("resolving topology spread constraints: %w", err))
	}
	if len(cs) == 0 || len(feasible) == 0 {
		return framework.NewStatus(framework.Skip)
	}
	s := &preScoreState{constraints: cs, tables: make([]*domainTable, len(cs)), weights: make([]float64, len(cs)),
		perNode: make([]bool, len(cs))}
	// Domains are those of feasible nodes that carry every key; a hostname
	// domain is its node, so feasible nodes with every key count them.
	withKeys := 0
	for _, ni := range feasible {
		if hasAllKeys(ni.Node(), cs) {
			withKeys++
		}
	}
	filter := newNodeFilter(pod)
	all := pl.nodesForScoring(feasible)
	for i, c := range cs {
		s.perNode[i] = c.topologyKey == LabelHostname
		domains := withKeys
		if !s.perNode[i] {
			domains = countDomains(feasible, cs, c.topologyKey)
			// Count over every node of the cluster in those domains, not only
			// the feasible ones: a full node still holds its pods.
			s.tables[i] = pl.counters.table(all, c, cs, pod, filter)
		}
		s.weights[i] = math.Log(float64(domains + 2))
	}
	state.Write(preScoreStateKey, s)
	return nil
}

// countDomains counts the distinct values of key over the nodes that carry
// every key of cs.
func countDomains(nodes []*framework.NodeInfo, cs []constraint, key string) int {
	seen := map[string]struct{}{}
	for _, ni := range nodes {
		if hasAllKeys(ni.Node(), cs) {
			seen[ni.Node().Labels[key]] = struct{}{}
		}
	}
	return len(seen)
}

// nodesForScoring is every node of the snapshot the cycle sees; without
// one, the feasible nodes.
func (pl *PodTopologySpread) nodesForScoring(feasible []*framework.NodeInfo) []*framework.NodeInfo {
	if pl.handle != nil && pl.handle.Snapshot() != nil && pl.handle.Snapshot().NumNodes() > 0 {
		return pl.handle.Snapshot().List()
	}
	return feasible
}

// Score returns the node's weighted count of matching pods: lower is better,
// and NormalizeScore inverts it. Nodes missing a key get the worst score.
func (pl *PodTopologySpread) Score(_ context.Context, state *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	d, ok := state.Read(preScoreStateKey)
	if !ok {
		return 0, framework.AsStatus(fmt.Errorf("reading %s: %w", preScoreStateKey, ErrNoState))
	}
	s := d.(*preScoreState)
	node := ni.Node()
	if !hasAllKeys(node, s.constraints) {
		return math.MaxInt64, nil
	}
	var score float64
	for i, c := range s.constraints {
		var n int
		if s.perNode[i] {
			n = countMatching(ni.Pods, pod.Namespace, c.selector)
		} else {
			n = s.tables[i].countOf(node.Labels[c.topologyKey])
		}
		// maxSkew-1 softens the preference for constraints that tolerate skew.
		score += float64(n+int(c.maxSkew)-1) * s.weights[i]
	}
	return int64(math.Round(score)), nil
}

// NormalizeScore maps the raw counts onto 0..MaxNodeScore, fewest matching
// pods best; nodes missing a key get 0.
func (pl *PodTopologySpread) NormalizeScore(_ context.Context, _ *framework.CycleState, _ *corev1.Pod, scores []framework.NodeScore) *framework.Status {
	lo, hi := int64(math.MaxInt64), int64(0)
	for _, s := range scores {
		if s.Score == math.MaxInt64 {
			continue
		}
		lo, hi = min(lo, s.Score), max(hi, s.Score)
	}
	for i := range scores {
		switch {
		case scores[i].Score == math.MaxInt64:
			scores[i].Score = 0
		case hi == 0:
			scores[i].Score = framework.MaxNodeScore
		default:
			scores[i].Score = framework.MaxNodeScore * (hi + lo - scores[i].Score) / hi
		}
	}
	return nil
}
