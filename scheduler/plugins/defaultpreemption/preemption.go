// Package defaultpreemption is the PostFilter that makes room for a pod that
// fits nowhere by choosing lower-priority victims on one node (PR-4..PR-13).
// It only decides; the scheduler deletes the victims and nominates the node.
package defaultpreemption

import (
	"context"
	"math"
	"slices"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/podsafe/podsafe/scheduler/framework"
)

// Name is the plugin's name.
const Name = "DefaultPreemption"

// Reasons a pod cannot preempt.
const (
	ReasonNeverPolicy  = "not eligible for preemption: preemptionPolicy is Never"
	ReasonNoCandidates = "preemption: no node where removing lower-priority pods makes the pod fit"
	ReasonStillWaiting = "preemption: victims on the nominated node are still terminating"
)

// Args bound how many candidate nodes are dry-run per pod: at least
// MinCandidateNodesAbsolute, or MinCandidateNodesPercentage of the nodes if
// that is more.
type Args struct {
	MinCandidateNodesPercentage int32
	MinCandidateNodesAbsolute   int32

	_ struct{}
}

// DefaultArgs are the defaults: 10 % of the nodes, at least 100.
func DefaultArgs() Args { return Args{MinCandidateNodesPercentage: 10, MinCandidateNodesAbsolute: 100} }

// DefaultPreemption is the plugin.
type DefaultPreemption struct {
	h      framework.Handle
	args   Args
	offset atomic.Int64
}

var _ framework.PostFilterPlugin = &DefaultPreemption{}

// New returns a factory for the plugin with args (zero fields: defaults).
func New(args Args) framework.PluginFactory {
	d := DefaultArgs()
	if args.MinCandidateNodesPercentage == 0 {
		args.MinCandidateNodesPercentage = d.MinCandidateNodesPercentage
	}
	if args.MinCandidateNodesAbsolute == 0 {
		args.MinCandidateNodesAbsolute = d.MinCandidateNodesAbsolute
	}
	return func(h framework.Handle) (framework.Plugin, error) {
		return &DefaultPreemption{h: h, args: args}, nil
	}
}

// Name implements framework.Plugin.
func (*DefaultPreemption) Name() string { return Name }

// Candidate is one node where preemption would work and the victims it takes.
type Candidate struct {
	Node          string
	Victims       []*framework.PodInfo
	PDBViolations int
}

// PostFilter implements framework.PostFilterPlugin.
func (pl *DefaultPreemption) PostFilter(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, statuses framework.NodeToStatus) (*framework.PostFilterResult, *framework.Status) {
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == corev1.PreemptNever {
		return nil, framework.NewStatus(framework.Unschedulable, ReasonNeverPolicy)
	}
	snap := pl.h.Snapshot()
	prio := corev1helpers.PodPriority(pod)
	// A pod that already preempted waits for its victims rather than choosing
	// more.
	if nominated := snap.Get(pod.Status.NominatedNodeName); nominated != nil {
		for _, pi := range nominated.Pods {
			if pi.Pod.DeletionTimestamp != nil && pi.Priority < prio {
				return nil, framework.NewStatus(framework.Unschedulable, ReasonStillWaiting)
			}
		}
	}
	c := pl.FindCandidate(ctx, state, pod, statuses)
	if c == nil {
		return nil, framework.NewStatus(framework.Unschedulable, ReasonNoCandidates)
	}
	res := &framework.PostFilterResult{NominatedNodeName: c.Node}
	for _, v := range c.Victims {
		res.Victims = append(res.Victims, v.Pod)
	}
	return res, nil
}

// FindCandidate dry-runs preemption on the nodes where it might help and
// returns the best candidate, or nil. It never changes the snapshot. The
// dry-runs are spread over Parallelism goroutines, each on its own copy of
// the state and the node; the candidates are taken in node order, so the
// result does not depend on the parallelism.
func (pl *DefaultPreemption) FindCandidate(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, statuses framework.NodeToStatus) *Candidate {
	nodes := pl.h.Snapshot().List()
	potential := make([]*framework.NodeInfo, 0, len(nodes))
	for _, ni := range nodes {
		// Nodes that reject the pod for reasons no removal can fix are out.
		if st, ok := statuses[ni.Node().Name]; ok && st.Code() == framework.UnschedulableAndUnresolvable {
			continue
		}
		potential = append(potential, ni)
	}
	if len(potential) == 0 {
		return nil
	}
	want := max(int(pl.args.MinCandidateNodesAbsolute), len(potential)*int(pl.args.MinCandidateNodesPercentage)/100)
	budgets := newBudgets(pl.h.PodDisruptionBudgets())
	start := int(pl.offset.Load() % int64(len(potential)))
	workers := framework.Parallelism()
	var cands []*Candidate
	results := make([]*Candidate, min(len(potential), want))
	for done := 0; done < len(potential) && len(cands) < want; {
		if ctx.Err() != nil {
			return nil
		}
		// Dry-run as many nodes as candidates are still missing, but enough
		// to keep every worker busy.
		batch := min(len(potential)-done, max(want-len(cands), 8*workers))
		if batch > len(results) {
			results = make([]*Candidate, batch)
		}
		framework.Parallelize(ctx, workers, batch, func(i int) {
			ni := potential[(start+done+i)%len(potential)]
			results[i] = pl.selectVictims(ctx, state.Clone(), pod, ni.Clone(), budgets)
		})
		for i := 0; i < batch && len(cands) < want; i++ {
			if results[i] != nil {
				cands = append(cands, results[i])
			}
		}
		done += batch
	}
	if ctx.Err() != nil {
		return nil
	}
	pl.offset.Add(int64(len(cands)))
	return pickBest(cands)
}

// selectVictims removes every lower-priority pod from ni; if the pod then
// fits, it reprieves as many as it can, the most important first and PDB-
// protected ones before the rest, so only the pods that must go are victims.
func (pl *DefaultPreemption) selectVictims(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo, budgets []budget) *Candidate {
	prio := corev1helpers.PodPriority(pod)
	lower := make([]*framework.PodInfo, 0, len(ni.Pods))
	for _, pi := range ni.Pods {
		if pi.Priority < prio {
			lower = append(lower, pi)
		}
	}
	if len(lower) == 0 {
		return nil
	}
	for _, pi := range lower {
		ni.RemovePod(pi.Pod.UID)
		if st := pl.h.RunPreFilterExtensionRemovePod(ctx, state, pod, pi, ni); !st.IsSuccess() {
			return nil
		}
	}
	if !pl.h.RunFilterPluginsWithNominatedPods(ctx, state, pod, ni).IsSuccess() {
		return nil
	}
	slices.SortStableFunc(lower, func(a, b *framework.PodInfo) int {
		switch {
		case moreImportant(a, b):
			return -1
		case moreImportant(b, a):
			return 1
		}
		return 0
	})
	violating, safe := splitByPDB(lower, budgets)
	c := &Candidate{Node: ni.Node().Name}
	reprieve := func(pi *framework.PodInfo) bool {
		ni.AddPod(pi)
		if st := pl.h.RunPreFilterExtensionAddPod(ctx, state, pod, pi, ni); !st.IsSuccess() {
			return false
		}
		if pl.h.RunFilterPluginsWithNominatedPods(ctx, state, pod, ni).IsSuccess() {
			return true
		}
		ni.RemovePod(pi.Pod.UID)
		pl.h.RunPreFilterExtensionRemovePod(ctx, state, pod, pi, ni)
		c.Victims = append(c.Victims, pi)
		return false
	}
	for _, pi := range violating {
		if !reprieve(pi) {
			c.PDBViolations++
		}
	}
	for _, pi := range safe {
		reprieve(pi)
	}
	if len(c.Victims) == 0 {
		return nil
	}
	return c
}

// moreImportant orders pods by priority, then the older first.
func moreImportant(a, b *framework.PodInfo) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	return a.Pod.CreationTimestamp.Before(&b.Pod.CreationTimestamp)
}

// budget is a PodDisruptionBudget with its selector parsed once per
// preemption; sel is nil for a budget that selects nothing.
type budget struct {
	pdb *policyv1.PodDisruptionBudget
	sel labels.Selector
}

func newBudgets(pdbs []*policyv1.PodDisruptionBudget) []budget {
	out := make([]budget, len(pdbs))
	for i, pdb := range pdbs {
		out[i].pdb = pdb
		if pdb.Spec.Selector == nil {
			continue
		}
		if sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err == nil && !sel.Empty() {
			out[i].sel = sel
		}
	}
	return out
}

// splitByPDB separates the pods whose removal would exceed a budget's
// allowed disruptions from the others, spending the budget pod by pod.
func splitByPDB(pods []*framework.PodInfo, budgets []budget) (violating, safe []*framework.PodInfo) {
	if len(budgets) == 0 {
		return nil, pods
	}
	allowed := make([]int32, len(budgets))
	for i, b := range budgets {
		allowed[i] = b.pdb.Status.DisruptionsAllowed
	}
	for _, pi := range pods {
		violates := false
		for i, b := range budgets {
			if b.sel == nil || b.pdb.Namespace != pi.Pod.Namespace || !b.sel.Matches(labels.Set(pi.Pod.Labels)) {
				continue
			}
			if _, counted := b.pdb.Status.DisruptedPods[pi.Pod.Name]; counted {
				continue
			}
			allowed[i]--
			if allowed[i] < 0 {
				violates = true
			}
		}
		if violates {
			violating = append(violating, pi)
		} else {
			safe = append(safe, pi)
		}
	}
	return violating, safe
}

// pickBest chooses among candidates (PR-7, PR-11): fewest PDB violations,
// then the lowest highest-priority victim, then the lowest sum of victim
// priorities, then the fewest victims, then the first found.
func pickBest(cands []*Candidate) *Candidate {
	if len(cands) == 0 {
		return nil
	}
	type key struct {
		violations, victims int
		highest             int32
		sum                 int64
	}
	keyOf := func(c *Candidate) key {
		k := key{violations: c.PDBViolations, victims: len(c.Victims), highest: math.MinInt32}
		for _, v := range c.Victims {
			k.highest = max(k.highest, v.Priority)
			// Shift so negative priorities still add up in order.
			k.sum += int64(v.Priority) + math.MaxInt32 + 1
		}
		return k
	}
	best, bk := cands[0], keyOf(cands[0])
	for _, c := range cands[1:] {
		k := keyOf(c)
		better := false
		switch {
		case k.violations != bk.violations:
			better = k.violations < bk.violations
		case k.highest != bk.highest:
			better = k.highest < bk.highest
		case k.sum != bk.sum:
			better = k.sum < bk.sum
		case k.victims != bk.victims:
			better = k.victims < bk.victims
		}
		if better {
			best, bk = c, k
		}
	}
	return best
}
