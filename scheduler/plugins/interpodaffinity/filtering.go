package interpodaffinity

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsafe/podsafe/scheduler/framework"
)

// Rejection reasons of Filter.
const (
	// ErrReasonAffinityRulesNotMatch: no pod the incoming pod must be with
	// runs in the node's domain. Removing pods cannot fix that, so the
	// rejection is unresolvable and preemption skips the node.
	ErrReasonAffinityRulesNotMatch = "node(s) didn't match pod affinity rules"
	// ErrReasonAntiAffinityRulesNotMatch: a pod the incoming pod must not be
	// with runs in the node's domain.
	ErrReasonAntiAffinityRulesNotMatch = "node(s) didn't match pod anti-affinity rules"
	// ErrReasonExistingAntiAffinityRulesNotMatch: a pod in the node's domain
	// must not be with the incoming pod.
	ErrReasonExistingAntiAffinityRulesNotMatch = "node(s) didn't satisfy existing pods anti-affinity rules"
)

const preFilterStateKey framework.StateKey = "PreFilter" + Name

// Shared rejections: Filter may run for thousands of nodes per cycle.
var (
	rejectAffinity = framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonAffinityRulesNotMatch).WithPlugin(Name)
	rejectAnti     = framework.NewStatus(framework.Unschedulable, ErrReasonAntiAffinityRulesNotMatch).WithPlugin(Name)
	rejectExisting = framework.NewStatus(framework.Unschedulable, ErrReasonExistingAntiAffinityRulesNotMatch).WithPlugin(Name)
)

// preFilterState counts, per topology domain, the pods that matter to the
// incoming pod's required terms and the existing pods that repel it.
type preFilterState struct {
	// terms are the incoming pod's terms (nil: none).
	terms *framework.AffinityTerms
	// existingAnti counts existing pods with a required anti-affinity term
	// that matches the incoming pod, in the domain of that term.
	existingAnti pairCounts
	// affinity counts existing pods matching every required affinity term
	// of the incoming pod, in each term's domain.
	affinity pairCounts
	// anti counts existing pods matching a required anti-affinity term of
	// the incoming pod, in that term's domain.
	anti pairCounts
}

// Clone implements framework.StateData.
func (s *preFilterState) Clone() framework.StateData {
	out := *s
	out.existingAnti, out.affinity, out.anti = s.existingAnti.clone(), s.affinity.clone(), s.anti.clone()
	return &out
}

// required reports whether the incoming pod has required terms.
func (s *preFilterState) required() bool {
	return s.terms != nil && len(s.terms.RequiredAffinity)+len(s.terms.RequiredAntiAffinity) > 0
}

// update counts (delta 1) or uncounts (-1) existing pod e on node for the
// incoming pod.
func (s *preFilterState) update(pod *corev1.Pod, e *framework.PodInfo, node *corev1.Node, delta int64, ns framework.NamespaceLabels) {
	if e.Pod.UID == pod.UID {
		return
	}
	if e.Affinity != nil {
		for i := range e.Affinity.RequiredAntiAffinity {
			if t := &e.Affinity.RequiredAntiAffinity[i]; t.Matches(pod, ns) {
				s.existingAnti.add(t.TopologyKey, node, delta)
			}
		}
	}
	if s.terms == nil {
		return
	}
	if framework.MatchesAll(s.terms.RequiredAffinity, e.Pod, ns) {
		for _, t := range s.terms.RequiredAffinity {
			s.affinity.add(t.TopologyKey, node, delta)
		}
	}
	for i := range s.terms.RequiredAntiAffinity {
		if t := &s.terms.RequiredAntiAffinity[i]; t.Matches(e.Pod, ns) {
			s.anti.add(t.TopologyKey, node, delta)
		}
	}
}

// PreFilter counts, over every node, the existing pods the incoming pod's
// required terms select and the existing pods whose required anti-affinity
// selects the incoming pod. It skips when neither can reject a node. A pod
// whose terms do not parse fits no node, and no removal changes that:
// UnschedulableAndUnresolvable, as kube-scheduler answers, not an internal
// error.
func (pl *InterPodAffinity) PreFilter(_ context.Context, state *framework.CycleState, pod *corev1.Pod, nodes []*framework.NodeInfo) *framework.Status {
	terms, err := framework.ParseAffinityTerms(pod)
	if err != nil {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, fmt.Sprintf("parsing pod: %v", err))
	}
	s := &preFilterState{terms: terms, existingAnti: pairCounts{}, affinity: pairCounts{}, anti: pairCounts{}}
	ns := pl.nsLabels()
	required := s.required()
	if snap := pl.snapshotOf(nodes); !required && snap != nil && !snap.HasPodsWithRequiredAntiAffinity() {
		return framework.NewStatus(framework.Skip)
	}
	for _, ni := range nodes {
		node := ni.Node()
		if node == nil {
			continue
		}
		list := ni.PodsWithRequiredAntiAffinity
		if required {
			list = ni.Pods
		}
		for _, e := range list {
			s.update(pod, e, node, 1, ns)
		}
	}
	if !required && len(s.existingAnti) == 0 {
		return framework.NewStatus(framework.Skip)
	}
	state.Write(preFilterStateKey, s)
	return nil
}

// PreFilterExtensions implements framework.PreFilterPlugin.
func (pl *InterPodAffinity) PreFilterExtensions() framework.PreFilterExtensions { return pl }

// AddPod implements framework.PreFilterExtensions.
func (pl *InterPodAffinity) AddPod(_ context.Context, state *framework.CycleState, pod *corev1.Pod, add *framework.PodInfo, ni *framework.NodeInfo) *framework.Status {
	return pl.updateState(state, pod, add, ni, 1)
}

// RemovePod implements framework.PreFilterExtensions.
func (pl *InterPodAffinity) RemovePod(_ context.Context, state *framework.CycleState, pod *corev1.Pod, remove *framework.PodInfo, ni *framework.NodeInfo) *framework.Status {
	return pl.updateState(state, pod, remove, ni, -1)
}

func (pl *InterPodAffinity) updateState(state *framework.CycleState, pod *corev1.Pod, pi *framework.PodInfo, ni *framework.NodeInfo, delta int64) *framework.Status {
	d, ok := state.Read(preFilterStateKey)
	if !ok || ni.Node() == nil {
		return nil
	}
	d.(*preFilterState).update(pod, pi, ni.Node(), delta, pl.nsLabels())
	return nil
}

// Filter rejects the node if a required affinity term finds no pod in the
// node's domain (unless the pod is the first of a group that attracts
// itself), if a required anti-affinity term of the pod finds one, or if an
// existing pod in the node's domain repels the pod.
func (pl *InterPodAffinity) Filter(_ context.Context, state *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo) *framework.Status {
	d, ok := state.Read(preFilterStateKey)
	if !ok {
		return framework.AsStatus(fmt.Errorf("reading %s: %w", preFilterStateKey, ErrNoState))
	}
	s := d.(*preFilterState)
	node := ni.Node()
	if s.terms != nil {
		if !s.affinityHolds(pod, node, pl.nsLabels()) {
			return rejectAffinity
		}
		for _, t := range s.terms.RequiredAntiAffinity {
			if v, ok := node.Labels[t.TopologyKey]; ok && s.anti[topologyPair{t.TopologyKey, v}] > 0 {
				return rejectAnti
			}
		}
	}
	if len(s.existingAnti) > 0 {
		for k, v := range node.Labels {
			if s.existingAnti[topologyPair{k, v}] > 0 {
				return rejectExisting
			}
		}
	}
	return nil
}

// affinityHolds reports whether every required affinity term finds a
// matching pod in node's domain. A node lacking a term's topology key never
// qualifies. When no pod anywhere matches the terms and the pod matches them
// itself, it is the first of its group and may go to any node with the keys,
// or the group could never start.
func (s *preFilterState) affinityHolds(pod *corev1.Pod, node *corev1.Node, ns framework.NamespaceLabels) bool {
	terms := s.terms.RequiredAffinity
	if len(terms) == 0 {
		return true
	}
	found := true
	for _, t := range terms {
		v, ok := node.Labels[t.TopologyKey]
		if !ok {
			return false
		}
		if s.affinity[topologyPair{t.TopologyKey, v}] <= 0 {
			found = false
		}
	}
	return found || (len(s.affinity) == 0 && framework.MatchesAll(terms, pod, ns))
}
