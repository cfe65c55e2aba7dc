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
// returns the best candidate, or nil. It never changes the snapshot.
//
// Nodes are tried lowest-priority victims first: grouped by the lowest
// priority among their lower-priority pods, and within a group in the
// rotating order that spreads preemption over the cluster. Up to the
// wanted number of candidates are collected; the search stops sooner once
// no node left can beat the best candidate (PR-11): a node whose
// lower-priority pods all have at least the best candidate's highest victim
// priority cannot yield a better one when that candidate violates no budget
// and takes one victim, nor when its priority is below theirs.
//
// The dry-runs are spread over Parallelism goroutines, each on its own copy
// of the state and the node, but their results are taken in order as if
// one by one, so the result does not depend on the parallelism.
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
	var affinity []framework.AffinityTerm
	if terms, err := framework.ParseAffinityTerms(pod); err == nil && terms != nil {
		// An invalid term made PreFilter fail already; none is left here.
		affinity = terms.RequiredAffinity
	}
	order, lowest := lowestFirst(potential, int(pl.offset.Load()%int64(len(potential))), framework.PreemptableBelow(corev1helpers.PodPriority(pod)))
	workers := framework.Parallelism()
	var cands []*Candidate
	var best *Candidate
	var bestKey candidateKey
	beaten := func(i int) bool { return best != nil && bestKey.unbeatableAbove(lowest[i]) }
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
			results[i] = pl.selectVictims(ctx, state.Clone(), pod, order[done+i].Clone(), budgets, affinity)
		})
		taken := 0
		for ; taken < batch && len(cands) < want && !beaten(done+taken); taken++ {
			if c := results[taken]; c != nil {
				cands = append(cands, c)
				if k := keyOf(c); best == nil || k.less(bestKey) {
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

// lowestFirst orders nodes, taken round from start, by the lowest priority
// among their pods of priority below below, lowest first; nodes without
// such pods are left out, as no removal can make room on them. lowest[i] is
// that priority for order[i].
func lowestFirst(nodes []*framework.NodeInfo, start int, below int32) (order []*framework.NodeInfo, lowest []int32) {
	groups := map[int32][]*framework.NodeInfo{}
	var keys []int32
	for i := range nodes {
		ni := nodes[(start+i)%len(nodes)]
		low, found := int32(math.MaxInt32), false
		for _, pi := range ni.Pods {
			if pi.Priority < below {
				low, found = min(low, pi.Priority), true
			}
		}
		if !found {
			continue
		}
		if _, ok := groups[low]; !ok {
			keys = append(keys, low)
		}
		groups[low] = append(groups[low], ni)
	}
	slices.Sort(keys)
	order, lowest = make([]*framework.NodeInfo, 0, len(nodes)), make([]int32, 0, len(nodes))
	for _, k := range keys {
		for _, ni := range groups[k] {
			order, lowest = append(order, ni), append(lowest, k)
		}
	}
	return order, lowest
}

// selectVictims removes every lower-priority pod from ni; if the pod then
// fits, it reprieves as many as it can, the most important first and PDB-
// protected ones before the rest, so only the pods that must go are victims.
// A node where a required affinity term of the pod selects a lower-priority
// pod is no candidate (PR-8): the pod is attracted by the very pods
// preemption would remove.
func (pl *DefaultPreemption) selectVictims(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo, budgets []budget, affinity []framework.AffinityTerm) *Candidate {
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

// candidateKey is what candidates are compared by (PR-7, PR-11): fewest
// PDB violations, then the lowest highest-priority victim, then the lowest
// sum of victim priorities, then the fewest victims; a tie goes to the
// candidate found first.
type candidateKey struct {
	violations, victims int
	highest             int32
	sum                 int64
}

func keyOf(c *Candidate) candidateKey {
	k := candidateKey{violations: c.PDBViolations, victims: len(c.Victims), highest: math.MinInt32}
	for _, v := range c.Victims {
		k.highest = max(k.highest, v.Priority)
		// Shift so negative priorities still add up in order.
		k.sum += int64(v.Priority) + math.MaxInt32 + 1
	}
	return k
}

// less reports whether k is strictly better than o.
func (k candidateKey) less(o candidateKey) bool {
	switch {
	case k.violations != o.violations:
		return k.violations < o.violations
	case k.highest != o.highest:
		return k.highest < o.highest
	case k.sum != o.sum:
		return k.sum < o.sum
	}
	return k.victims < o.victims
}

// unbeatableAbove reports whether no candidate on a node whose
// lower-priority pods all have priority low or more can be strictly better
// than k. Such a candidate has at least one victim, of priority low or
// more, so its highest victim is no lower than low and its sum no lower
// than that victim's.
func (k candidateKey) unbeatableAbove(low int32) bool {
	return k.violations == 0 && (low > k.highest || (low == k.highest && k.victims == 1))
}
