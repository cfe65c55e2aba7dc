package framework

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/utils/clock"
)

// PluginFactory builds a plugin; h lets it reach the framework.
type PluginFactory func(h Handle) (Plugin, error)

// PluginSpec is one enabled plugin and, for scorers, its weight (0 means 1).
type PluginSpec struct {
	Factory PluginFactory
	Weight  int64
}

// Options are the framework's outside connections; zero values are inert.
type Options struct {
	// PodDisruptionBudgets lists the known budgets (nil: none).
	PodDisruptionBudgets func() []*policyv1.PodDisruptionBudget
	// NominatedPods lists the pods nominated to a node (nil: none). Filters
	// count those of at least the incoming pod's priority as if they were
	// already there, so a preemptor's reservation holds (PR-4).
	NominatedPods func(node string) []*PodInfo
	// NamespaceLabels returns a namespace's labels (nil: every namespace
	// is unlabelled).
	NamespaceLabels NamespaceLabels
	// Clock tells plugins the time, e.g. the "now" that stands in for a
	// pod's unset start time (nil: the real clock).
	Clock clock.PassiveClock
}

type weightedScorer struct {
	ScorePlugin
	weight int64
}

// Framework runs a profile of plugins. It is not safe for concurrent
// scheduling cycles: SetSnapshot belongs to one cycle at a time.
type Framework struct {
	opts       Options
	snapshot   *Snapshot
	preFilter  []PreFilterPlugin
	filter     []FilterPlugin
	postFilter []PostFilterPlugin
	preScore   []PreScorePlugin
	score      []weightedScorer
}

var _ Handle = &Framework{}

// NewFramework builds every plugin of specs and sorts it into the extension
// points it implements.
func NewFramework(specs []PluginSpec, opts Options) (*Framework, error) {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	f := &Framework{opts: opts, snapshot: NewEmptySnapshot()}
	for _, spec := range specs {
		p, err := spec.Factory(f)
		if err != nil {
			return nil, fmt.Errorf("building plugin: %w", err)
		}
		if pl, ok := p.(PreFilterPlugin); ok {
			f.preFilter = append(f.preFilter, pl)
		}
		if pl, ok := p.(FilterPlugin); ok {
			f.filter = append(f.filter, pl)
		}
		if pl, ok := p.(PostFilterPlugin); ok {
			f.postFilter = append(f.postFilter, pl)
		}
		if pl, ok := p.(PreScorePlugin); ok {
			f.preScore = append(f.preScore, pl)
		}
		if pl, ok := p.(ScorePlugin); ok {
			w := spec.Weight
			if w == 0 {
				w = 1
			}
			f.score = append(f.score, weightedScorer{pl, w})
		}
	}
	return f, nil
}

// SetSnapshot makes s the view of the next cycle.
func (f *Framework) SetSnapshot(s *Snapshot) { f.snapshot = s }

// Snapshot implements Handle.
func (f *Framework) Snapshot() *Snapshot { return f.snapshot }

// PodDisruptionBudgets implements Handle.
func (f *Framework) PodDisruptionBudgets() []*policyv1.PodDisruptionBudget {
	if f.opts.PodDisruptionBudgets == nil {
		return nil
	}
	return f.opts.PodDisruptionBudgets()
}

// Now implements Handle.
func (f *Framework) Now() time.Time { return f.opts.Clock.Now() }

// NamespaceLabels implements Handle.
func (f *Framework) NamespaceLabels(ns string) labels.Set {
	if f.opts.NamespaceLabels == nil {
		return nil
	}
	return f.opts.NamespaceLabels(ns)
}

// HasPostFilterPlugins reports whether any PostFilter (preemption) is enabled.
func (f *Framework) HasPostFilterPlugins() bool { return len(f.postFilter) > 0 }

// RunPreFilterPlugins runs every PreFilter; plugins that return Skip are
// recorded in state and their filters skipped.
func (f *Framework) RunPreFilterPlugins(ctx context.Context, state *CycleState, pod *corev1.Pod) *Status {
	nodes := f.snapshot.List()
	defer func() { state.filterMask, state.maskSet = f.skipMask(state), true }()
	for _, pl := range f.preFilter {
		st := pl.PreFilter(ctx, state, pod, nodes)
		switch {
		case st.IsSkip():
			state.SetSkipFilter(pl.Name())
		case !st.IsSuccess():
			return st.WithPlugin(pl.Name())
		}
	}
	return nil
}

// RunFilterPlugins implements Handle: the first rejection wins.
func (f *Framework) RunFilterPlugins(ctx context.Context, state *CycleState, pod *corev1.Pod, nodeInfo *NodeInfo) *Status {
	mask := state.filterMask
	if !state.maskSet {
		mask = f.skipMask(state)
	}
	for i, pl := range f.filter {
		if mask&(1<<i) != 0 {
			continue
		}
		if st := pl.Filter(ctx, state, pod, nodeInfo); !st.IsSuccess() {
			return st.WithPlugin(pl.Name())
		}
	}
	return nil
}

// skipMask returns the filters state skips as bits by index; filters past
// the 64th are never skipped.
func (f *Framework) skipMask(state *CycleState) uint64 {
	var mask uint64
	if len(state.skipFilter) == 0 {
		return 0
	}
	for i, pl := range f.filter {
		if i < 64 && state.skipFilter[pl.Name()] {
			mask |= 1 << i
		}
	}
	return mask
}

// RunFilterPluginsWithNominatedPods runs the filters with the pods nominated
// to the node at the incoming pod's priority or above counted as present, so
// a lower-priority pod cannot take room reserved by preemption.
func (f *Framework) RunFilterPluginsWithNominatedPods(ctx context.Context, state *CycleState, pod *corev1.Pod, nodeInfo *NodeInfo) *Status {
	if f.opts.NominatedPods != nil && nodeInfo.Node() != nil {
		prio := corev1helpers.PodPriority(pod)
		var add []*PodInfo
		for _, np := range f.opts.NominatedPods(nodeInfo.Node().Name) {
			if np.Pod.UID != pod.UID && np.Priority >= prio {
				add = append(add, np)
			}
		}
		if len(add) > 0 {
			state = state.Clone()
			nodeInfo = nodeInfo.Clone()
			for _, np := range add {
				nodeInfo.AddPod(np)
				if st := f.RunPreFilterExtensionAddPod(ctx, state, pod, np, nodeInfo); !st.IsSuccess() {
					return st
				}
			}
		}
	}
	return f.RunFilterPlugins(ctx, state, pod, nodeInfo)
}

// RunPreFilterExtensionAddPod implements Handle.
func (f *Framework) RunPreFilterExtensionAddPod(ctx context.Context, state *CycleState, podToSchedule *corev1.Pod, podToAdd *PodInfo, nodeInfo *NodeInfo) *Status {
	skip := state.skipFilterSet()
	for _, pl := range f.preFilter {
		ext := pl.PreFilterExtensions()
		if ext == nil || skip[pl.Name()] {
			continue
		}
		if st := ext.AddPod(ctx, state, podToSchedule, podToAdd, nodeInfo); !st.IsSuccess() {
			return st.WithPlugin(pl.Name())
		}
	}
	return nil
}

// RunPreFilterExtensionRemovePod implements Handle.
func (f *Framework) RunPreFilterExtensionRemovePod(ctx context.Context, state *CycleState, podToSchedule *corev1.Pod, podToRemove *PodInfo, nodeInfo *NodeInfo) *Status {
	skip := state.skipFilterSet()
	for _, pl := range f.preFilter {
		ext := pl.PreFilterExtensions()
		if ext == nil || skip[pl.Name()] {
			continue
		}
		if st := ext.RemovePod(ctx, state, podToSchedule, podToRemove, nodeInfo); !st.IsSuccess() {
			return st.WithPlugin(pl.Name())
		}
	}
	return nil
}

// RunPostFilterPlugins runs the PostFilters until one succeeds.
func (f *Framework) RunPostFilterPlugins(ctx context.Context, state *CycleState, pod *corev1.Pod, statuses NodeToStatus) (*PostFilterResult, *Status) {
	last := NewStatus(Unschedulable, "no PostFilter plugin")
	for _, pl := range f.postFilter {
		res, st := pl.PostFilter(ctx, state, pod, statuses)
		if st.IsSuccess() {
			return res, nil
		}
		if st.Code() == Error {
			return nil, st.WithPlugin(pl.Name())
		}
		last = st.WithPlugin(pl.Name())
	}
	return nil, last
}

// RunScorePlugins runs PreScore and Score over the feasible nodes and
// returns the weighted total per node.
func (f *Framework) RunScorePlugins(ctx context.Context, state *CycleState, pod *corev1.Pod, nodes []*NodeInfo) ([]NodeScore, *Status) {
	for _, pl := range f.preScore {
		st := pl.PreScore(ctx, state, pod, nodes)
		switch {
		case st.IsSkip():
			state.SetSkipScore(pl.Name())
		case !st.IsSuccess():
			return nil, st.WithPlugin(pl.Name())
		}
	}
	total := make([]NodeScore, len(nodes))
	for i, ni := range nodes {
		total[i].Name = ni.Node().Name
	}
	scores := make([]NodeScore, len(nodes))
	for _, pl := range f.score {
		if state.SkipScore(pl.Name()) {
			continue
		}
		for i, ni := range nodes {
			s, st := pl.Score(ctx, state, pod, ni)
			if !st.IsSuccess() {
				return nil, st.WithPlugin(pl.Name())
			}
			scores[i] = NodeScore{Name: total[i].Name, Score: s}
		}
		if n, ok := pl.ScorePlugin.(ScoreNormalizer); ok {
			if st := n.NormalizeScore(ctx, state, pod, scores); !st.IsSuccess() {
				return nil, st.WithPlugin(pl.Name())
			}
		}
		for i := range scores {
			total[i].Score += scores[i].Score * pl.weight
		}
	}
	return total, nil
}
