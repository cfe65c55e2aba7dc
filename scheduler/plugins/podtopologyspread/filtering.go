package podtopologyspread

import (
	"context"
	"fmt"

	"github.com/pingcap/failpoint"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/podsafe/podsafe/scheduler/framework"
)

// Rejection reasons of Filter.
const (
	// ErrReasonConstraintsNotMatch: placing the pod would exceed a maxSkew.
	ErrReasonConstraintsNotMatch = "node(s) didn't match pod topology spread constraints"
	// ErrReasonNodeLabelNotMatch: the node lacks a constraint's topology key
	// (TS-5); no preemption can change that.
	ErrReasonNodeLabelNotMatch = ErrReasonConstraintsNotMatch + " (missing required label)"
)

const preFilterStateKey framework.StateKey = "PreFilter" + Name

// Shared rejections: Filter runs for thousands of nodes per cycle.
var (
	rejectSkew     = framework.NewStatus(framework.Unschedulable, ErrReasonConstraintsNotMatch).WithPlugin(Name)
	rejectNoLabels = framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonNodeLabelNotMatch).WithPlugin(Name)
)

// preFilterState holds the DoNotSchedule constraints of the incoming pod and,
// per constraint, the matching-pod counts of every eligible domain.
type preFilterState struct {
	constraints []constraint
	counts      []domainCounts
	filter      nodeFilter
	// selfMatch[i] is 1 if the incoming pod matches constraint i itself.
	selfMatch []int
	// inline holds counts for pods with few constraints, so a clone is
	// one allocation.
	inline [2]domainCounts
}

// Clone implements framework.StateData. The tables are shared; only the
// changes made since PreFilter are copied, so preemption can dry-run one
// node after another cheaply.
func (s *preFilterState) Clone() framework.StateData {
	out := *s
	if len(s.counts) <= len(out.inline) {
		out.counts = out.inline[:len(s.counts)]
	} else {
		out.counts = make([]domainCounts, len(s.counts))
	}
	for i := range s.counts {
		out.counts[i] = s.counts[i].clone()
	}
	return &out
}

// PreFilter resolves the DoNotSchedule constraints and counts matching pods
// per domain over the nodes that carry every topology key and pass the
// node inclusion policies (TS-5, TS-7, TS-8, TS-12). Counts are kept
// between cycles and only the nodes that changed are recounted.
func (pl *PodTopologySpread) PreFilter(_ context.Context, state *framework.CycleState, pod *corev1.Pod, nodes []*framework.NodeInfo) *framework.Status {
	cs, err := pl.constraintsOf(pod, corev1.DoNotSchedule)
	if err != nil {
		return framework.AsStatus(fmt.Errorf("resolving topology spread constraints: %w", err))
	}
	if len(cs) == 0 {
		return framework.NewStatus(framework.Skip)
	}
	s := &preFilterState{constraints: cs, counts: make([]domainCounts, len(cs)), filter: newNodeFilter(pod),
		selfMatch: make([]int, len(cs))}
	for i, c := range cs {
		if c.selector.Matches(labels.Set(pod.Labels)) {
			s.selfMatch[i] = 1
		}
		s.counts[i] = newDomainCounts(pl.counters.table(nodes, c, cs, pod, s.filter))
	}
	state.Write(preFilterStateKey, s)
	return nil
}

// PreFilterExtensions implements framework.PreFilterPlugin.
func (pl *PodTopologySpread) PreFilterExtensions() framework.PreFilterExtensions { return pl }

// AddPod implements framework.PreFilterExtensions.
func (pl *PodTopologySpread) AddPod(_ context.Context, state *framework.CycleState, pod *corev1.Pod, add *framework.PodInfo, ni *framework.NodeInfo) *framework.Status {
	return updateCounts(state, pod, add, ni, 1)
}

// RemovePod implements framework.PreFilterExtensions.
func (pl *PodTopologySpread) RemovePod(_ context.Context, state *framework.CycleState, pod *corev1.Pod, remove *framework.PodInfo, ni *framework.NodeInfo) *framework.Status {
	return updateCounts(state, pod, remove, ni, -1)
}

func updateCounts(state *framework.CycleState, pod *corev1.Pod, pi *framework.PodInfo, ni *framework.NodeInfo, delta int) *framework.Status {
	d, ok := state.Read(preFilterStateKey)
	if !ok {
		return nil
	}
	s := d.(*preFilterState)
	node := ni.Node()
	if node == nil || !hasAllKeys(node, s.constraints) {
		return nil
	}
	for i, c := range s.constraints {
		if dryRunMatches(pi.Pod, pod.Namespace, c.selector) && s.filter.includes(c, node) {
			s.counts[i].add(node.Labels[c.topologyKey], delta)
		}
	}
	return nil
}

// Filter admits the node if, for every DoNotSchedule constraint, the count
// in the node's domain plus the pod itself minus the global minimum stays
// within maxSkew (TS-2, TS-4). Constraints are judged in order and the
// first that fails decides: a node lacking that constraint's topology key
// is rejected for good (UnschedulableAndUnresolvable, TS-5), one whose
// skew is too high only for now (Unschedulable), as kube-scheduler does.
func (pl *PodTopologySpread) Filter(_ context.Context, state *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo) *framework.Status {
	d, ok := state.Read(preFilterStateKey)
	if !ok {
		return framework.AsStatus(fmt.Errorf("reading %s: %w", preFilterStateKey, ErrNoState))
	}
	s := d.(*preFilterState)
	node := ni.Node()
	for i, c := range s.constraints {
		domain, ok := node.Labels[c.topologyKey]
		if !ok {
			reject := true
			// Planted bug of the bug zoo (scheduler-ignores-missing-topology-key):
			// a node lacking a constraint's topology key is eligible, its
			// missing domain counting as empty (breaks TS-5).
			failpoint.InjectContext(failpoints, "ignoresMissingTopologyKey", func() { reject = false })
			if reject {
				return rejectNoLabels
			}
		}
		skew := s.counts[i].count(domain) + s.selfMatch[i] - s.counts[i].globalMin(c.minDomains)
		if skew > int(c.maxSkew) {
			return rejectSkew
		}
	}
	return nil
}
