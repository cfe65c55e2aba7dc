package interpodaffinity

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsafe/podsafe/scheduler/framework"
)

const preScoreStateKey framework.StateKey = "PreScore" + Name

// preScoreState holds the summed term weights of every topology domain:
// scores[key][value].
type preScoreState struct {
	scores map[string]map[string]int64
}

// Clone implements framework.StateData; scoring state is read-only.
func (s *preScoreState) Clone() framework.StateData { return s }

func (s *preScoreState) add(key string, node *corev1.Node, w int64) {
	v, ok := node.Labels[key]
	if !ok || w == 0 {
		return
	}
	m := s.scores[key]
	if m == nil {
		m = map[string]int64{}
		s.scores[key] = m
	}
	m[v] += w
}

// PreScore sums, per topology domain, the weights of the preferred terms
// that hold there: the incoming pod's preferred affinity (+) and
// anti-affinity (-) towards existing pods, and the existing pods' preferred
// affinity (+), preferred anti-affinity (-) and required affinity
// (+hardPodAffinityWeight) towards the incoming pod. It counts every node
// of the cluster, not only the feasible ones: a full node's pods still
// define their domain. It skips when no term is involved.
func (pl *InterPodAffinity) PreScore(_ context.Context, state *framework.CycleState, pod *corev1.Pod, feasible []*framework.NodeInfo) *framework.Status {
	terms, err := framework.ParseAffinityTerms(pod)
	if err != nil {
		return framework.AsStatus(fmt.Errorf("resolving inter-pod affinity of pod %s/%s: %w", pod.Namespace, pod.Name, err))
	}
	preferred := terms != nil && len(terms.PreferredAffinity)+len(terms.PreferredAntiAffinity) > 0
	all := feasible
	if pl.h != nil && pl.h.Snapshot() != nil && pl.h.Snapshot().NumNodes() > 0 {
		all = pl.h.Snapshot().List()
	}
	if snap := pl.snapshotOf(all); !preferred && snap != nil && !snap.HasPodsWithAffinity() {
		return framework.NewStatus(framework.Skip)
	}
	ns := pl.nsLabels()
	s := &preScoreState{scores: map[string]map[string]int64{}}
	for _, ni := range all {
		node := ni.Node()
		if node == nil {
			continue
		}
		list := ni.PodsWithAffinity
		if preferred {
			list = ni.Pods
		}
		for _, e := range list {
			if e.Pod.UID == pod.UID {
				continue
			}
			if preferred {
				for _, t := range terms.PreferredAffinity {
					if t.Matches(e.Pod, ns) {
						s.add(t.TopologyKey, node, int64(t.Weight))
					}
				}
				for _, t := range terms.PreferredAntiAffinity {
					if t.Matches(e.Pod, ns) {
						s.add(t.TopologyKey, node, -int64(t.Weight))
					}
				}
			}
			if a := e.Affinity; a != nil {
				for _, t := range a.PreferredAffinity {
					if t.Matches(pod, ns) {
						s.add(t.TopologyKey, node, int64(t.Weight))
					}
				}
				for _, t := range a.PreferredAntiAffinity {
					if t.Matches(pod, ns) {
						s.add(t.TopologyKey, node, -int64(t.Weight))
					}
				}
				for _, t := range a.RequiredAffinity {
					if t.Matches(pod, ns) {
						s.add(t.TopologyKey, node, hardPodAffinityWeight)
					}
				}
			}
		}
	}
	if len(s.scores) == 0 {
		return framework.NewStatus(framework.Skip)
	}
	state.Write(preScoreStateKey, s)
	return nil
}

// Score sums the weights of the node's domains; NormalizeScore rescales.
func (pl *InterPodAffinity) Score(_ context.Context, state *framework.CycleState, _ *corev1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	d, ok := state.Read(preScoreStateKey)
	if !ok {
		return 0, framework.AsStatus(fmt.Errorf("reading %s: %w", preScoreStateKey, ErrNoState))
	}
	s := d.(*preScoreState)
	node := ni.Node()
	var score int64
	for key, values := range s.scores {
		if v, ok := node.Labels[key]; ok {
			score += values[v]
		}
	}
	return score, nil
}

// NormalizeScore maps the sums linearly onto 0..MaxNodeScore, the lowest
// to 0; equal sums all get 0.
func (pl *InterPodAffinity) NormalizeScore(_ context.Context, _ *framework.CycleState, _ *corev1.Pod, scores []framework.NodeScore) *framework.Status {
	if len(scores) == 0 {
		return nil
	}
	lo, hi := scores[0].Score, scores[0].Score
	for _, s := range scores[1:] {
		lo, hi = min(lo, s.Score), max(hi, s.Score)
	}
	for i := range scores {
		if hi == lo {
			scores[i].Score = 0
			continue
		}
		scores[i].Score = framework.MaxNodeScore * (scores[i].Score - lo) / (hi - lo)
	}
	return nil
}
