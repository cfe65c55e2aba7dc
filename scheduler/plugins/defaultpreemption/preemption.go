// Package defaultpreemption is the PostFilter that makes room for a pod that
// fits nowhere by choosing lower-priority victims on one node (PR-4..PR-13).
// It only decides; the scheduler marks the victims (TerminatingByPreemption),
// deletes them and nominates the node.
package defaultpreemption

import (
	"cmp"
	"context"
	"slices"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
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

// PostFilter implements framework.PostFilterPlugin.
func (pl *DefaultPreemption) PostFilter(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, statuses framework.NodeToStatus) (*framework.PostFilterResult, *framework.Status) {
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == corev1.PreemptNever {
		return nil, framework.NewStatus(framework.Unschedulable, ReasonNeverPolicy)
	}
	snap := pl.h.Snapshot()
	prio := corev1helpers.PodPriority(pod)
	// A pod that already preempted waits for its victims rather than choosing
	// more, unless the filters ruled its nominated node out for good (as
	// kube-scheduler's PodEligibleToPreemptOthers). Only pods the scheduler
	// itself is terminating are waited for: a lower-priority pod deleted
	// for another reason may be taken as a victim again.
	nn := pod.Status.NominatedNodeName
	if nominated := snap.Get(nn); nominated != nil && statuses[nn].Code() != framework.UnschedulableAndUnresolvable {
		for _, pi := range nominated.Pods {
			if pi.Priority < prio && TerminatingByPreemption(pi.Pod) {
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

// TerminatingByPreemption reports whether pod is being deleted because the
// scheduler preempted it: it is being deleted and carries the condition
// the scheduler writes on a victim before deleting it, DisruptionTarget
// True with reason PreemptionByScheduler (kube-scheduler's
// PodTerminatingByPreemption). Only the first DisruptionTarget condition
// is read, as there.
func TerminatingByPreemption(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp == nil {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.DisruptionTarget {
			return c.Status == corev1.ConditionTrue && c.Reason == corev1.PodReasonPreemptionByScheduler
		}
	}
	return false
}

// FindCandidate dry-runs preemption on the nodes where it might help and
// returns the best candidate, or nil. It never changes the snapshot.
//
// Preemption might help only on a node the filters rejected as
// Unschedulable: one rejected as UnschedulableAndUnresolvable stays out
// whatever is removed, and one with no status was not rejected at all (as
// kube-scheduler's nodesWherePreemptionMightHelp).
//
// Nodes are tried lowest-priority victims first: grouped by the lowest
// priority among their lower-priority pods, and within a group in the
// rotating order that spreads preemption over the cluster. Up to the
// wanted number of candidates are collected; the search stops sooner once
// no node left can beat the best candidate (PR-11, see unbeatableAbove):
// the nodes left all have lowest priorities above the best candidate's
// highest victim, or equal to it when that candidate violates no budget
// and takes one victim that started no earlier than any pod of that
// priority on the nodes left in its group.
//
// The dry-runs are spread over Parallelism goroutines, each on its own copy
// of the state and the node, but their results are taken in order as if
// one by one, so the result does not depend on the parallelism.
func (pl *DefaultPreemption) FindCandidate(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, statuses framework.NodeToStatus) *Candidate {
	nodes := pl.h.Snapshot().List()
	potential := make([]*framework.NodeInfo, 0, len(nodes))
	for _, ni := range nodes {
		if statuses[ni.Node().Name].Code() == framework.Unschedulable {
			potential = append(potential, ni)
		}
	}
	if len(potential) == 0 {
		return nil
	}
	// One reading of the clock for the whole search: a pod not started
	// yet counts as starting now, the same now in every comparison.
	now := pl.h.Now()
	want := max(int(pl.args.MinCandidateNodesAbsolute), len(potential)*int(pl.args.MinCandidateNodesPercentage)/100)
	budgets := newBudgets(pl.h.PodDisruptionBudgets())
	var affinity []framework.AffinityTerm
	if terms, err := framework.ParseAffinityTerms(pod); err == nil && terms != nil {
		// An invalid term made PreFilter fail already; none is left here.
		affinity = terms.RequiredAffinity
	}
	order := lowestFirst(potential, int(pl.offset.Load()%int64(len(potential))), framework.PreemptableBelow(corev1helpers.PodPriority(pod)), now)
	workers := framework.Parallelism()
	var cands []*Candidate
	var best *Candidate
	var bestKey candidateKey
	beaten := func(i int) bool {
		return best != nil && bestKey.unbeatableAbove(order[i].lowest, order[i].latestRest)
	}
	results := make([]*Candidate, min(len(order), want))
	// Batches start small and double, so a search that ends early has not
	// dry-run hundreds of nodes first.
	grow := 8 * workers
	for done := 0; done < len(order) && len(cands) < want && !beaten(done); grow *= 2 {
		if ctx.Err() != nil {
			return nil
		}
		// Dry-run as many nodes as candidates are still missing, but enough
		// to keep every worker busy, and none the best so far beats.
		batch := min(len(order)-done, max(min(want-len(cands), grow), 8*workers))
		for n := 1; n < batch; n++ {
			if beaten(done + n) {
				batch = n
				break
			}
		}
		if batch > len(results) {
			results = make([]*Candidate, batch)
		}
		framework.Parallelize(ctx, workers, batch, func(i int) {
			results[i] = pl.selectVictims(ctx, state.Clone(), pod, order[done+i].ni.Clone(), budgets, affinity, now)
		})
		taken := 0
		for ; taken < batch && len(cands) < want && !beaten(done+taken); taken++ {
			if c := results[taken]; c != nil {
				cands = append(cands, c)
				if k := keyOf(c, now); best == nil || k.less(bestKey) {
					best, bestKey = c, k
				}
			}
		}
		done += taken
	}
	if ctx.Err() != nil {
		return nil
	}
	pl.offset.Add(int64(len(cands)))
	return best
}

// searchEntry is one node in the order nodes are dry-run in. lowest is
// the lowest priority among the node's pods that preemption may remove;
// latestRest is the latest start of such pods of exactly that priority on
// this node and the nodes after it with the same lowest priority: a bound
// that only shrinks along a group, so whether the rest of the order is
// beaten only ever turns from false to true.
type searchEntry struct {
	ni         *framework.NodeInfo
	lowest     int32
	latestRest time.Time
}

// lowestFirst orders nodes, taken round from start, by the lowest priority
// among their pods of priority below below, lowest first, keeping the
// round order within a priority; nodes without such pods are left out, as
// no removal can make room on them.
func lowestFirst(nodes []*framework.NodeInfo, start int, below int32, now time.Time) []searchEntry {
	order := make([]searchEntry, 0, len(nodes))
	for i := range nodes {
		ni := nodes[(start+i)%len(nodes)]
		e, found := searchEntry{ni: ni}, false
		for _, pi := range ni.Pods {
			if pi.Priority >= below || (found && pi.Priority > e.lowest) {
				continue
			}
			switch st := startTime(pi, now); {
			case !found || pi.Priority < e.lowest:
				e.lowest, e.latestRest, found = pi.Priority, st, true
			case st.After(e.latestRest):
				e.latestRest = st
			}
		}
		if found {
			order = append(order, e)
		}
	}
	byLowest := func(a, b searchEntry) int { return cmp.Compare(a.lowest, b.lowest) }
	if !slices.IsSortedFunc(order, byLowest) {
		slices.SortStableFunc(order, byLowest)
	}
	for i := len(order) - 2; i >= 0; i-- {
		if order[i+1].lowest == order[i].lowest && order[i+1].latestRest.After(order[i].latestRest) {
			order[i].latestRest = order[i+1].latestRest
		}
	}
	return order
}

// selectVictims removes every lower-priority pod from ni; if the pod then
// fits, it reprieves as many as it can, the most important first (higher
// priority, then earlier start) and PDB-protected ones before the rest, so
// only the pods that must go are victims. A node where a required affinity
// term of the pod selects a lower-priority pod is no candidate (PR-8): the
// pod is attracted by the very pods preemption would remove.
func (pl *DefaultPreemption) selectVictims(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo, budgets []budget, affinity []framework.AffinityTerm, now time.Time) *Candidate {
	below := framework.PreemptableBelow(corev1helpers.PodPriority(pod))
	lower := make([]*framework.PodInfo, 0, len(ni.Pods))
	for _, pi := range ni.Pods {
		if pi.Priority < below {
			lower = append(lower, pi)
		}
	}
	if len(lower) == 0 || attractedBy(affinity, lower, pl.h.NamespaceLabels) {
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
		case moreImportant(a, b, now):
			return -1
		case moreImportant(b, a, now):
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

// attractedBy reports whether any of the required affinity terms selects
// one of pods.
func attractedBy(affinity []framework.AffinityTerm, pods []*framework.PodInfo, ns framework.NamespaceLabels) bool {
	for i := range affinity {
		for _, pi := range pods {
			if affinity[i].Matches(pi.Pod, ns) {
				return true
			}
		}
	}
	return false
}
