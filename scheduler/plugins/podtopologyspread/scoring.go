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
	// requireAll is set when only nodes carrying every topology key are
	// scored (the others get 0): always, except for the built-in system
	// defaults, so that nodes without a zone label still get hostname
	// spreading.
	requireAll bool
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
		perNode: make([]bool, len(cs)), requireAll: len(pod.Spec.TopologySpreadConstraints) > 0 || !pl.systemDefaulted}
	// group is what a node must carry to take part: every key, or nothing.
	var group []constraint
	if s.requireAll {
		group = cs
	}
	// Domains are those of the scored nodes; a hostname domain is its node.
	// Without requireAll a node lacking a key makes the domain "" for it,
	// as kube-scheduler has it: it weighs and counts, but is not scored.
	var scored []*framework.NodeInfo
	for _, ni := range feasible {
		if hasAllKeys(ni.Node(), group) {
			scored = append(scored, ni)
		}
	}
	filter := newNodeFilter(pod)
	all := pl.nodesForScoring(feasible)
	for i, c := range cs {
		s.perNode[i] = c.topologyKey == LabelHostname
		domains := len(scored)
		if !s.perNode[i] {
			domains = countDomains(scored, c.topologyKey)
			// Count over every node of the cluster in those domains, not only
			// the feasible ones: a full node still holds its pods.
			s.tables[i] = pl.counters.table(all, c, group, pod, filter)
		}
		s.weights[i] = math.Log(float64(domains + 2))
	}
	state.Write(preScoreStateKey, s)
	return nil
}

// countDomains counts the distinct values of key over nodes, a missing key
// counting as "".
func countDomains(nodes []*framework.NodeInfo, key string) int {
	seen := map[string]struct{}{}
	for _, ni := range nodes {
		seen[ni.Node().Labels[key]] = struct{}{}
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
// and NormalizeScore inverts it. Each constraint adds count × weight plus
// maxSkew−1, which softens the preference for constraints that tolerate
// skew; a constraint whose key the node lacks adds nothing. Nodes missing a
// key when every key is required get the worst score.
func (pl *PodTopologySpread) Score(_ context.Context, state *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	d, ok := state.Read(preScoreStateKey)
	if !ok {
		return 0, framework.AsStatus(fmt.Errorf("reading %s: %w", preScoreStateKey, ErrNoState))
	}
	s := d.(*preScoreState)
	node := ni.Node()
	if s.requireAll && !hasAllKeys(node, s.constraints) {
		return math.MaxInt64, nil
	}
	var score float64
	for i, c := range s.constraints {
		domain, ok := node.Labels[c.topologyKey]
		if !ok {
			continue
		}
		var n int
		if s.perNode[i] {
			n = countMatching(ni.Pods, pod.Namespace, c.selector)
		} else {
			n = s.tables[i].countOf(domain)
		}
		score += float64(n)*s.weights[i] + float64(c.maxSkew-1)
	}
	return int64(math.Round(score)), nil
}

// NormalizeScore maps the raw counts onto 0..MaxNodeScore, fewest matching
// pods best; nodes missing a required key get 0.
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
