package checker

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The node choice of a preemption (PR-7, PR-11), as kube-scheduler's
// DefaultPreemption makes it: on every node where removing all pods of
// lower priority than the preemptor lets it fit, the victims are those
// pods less the ones it can keep, tried from the highest priority down,
// first those whose eviction would violate a PodDisruptionBudget, then the
// others; a victim that violates a budget counts as a violation. Among
// these candidates the node with the fewest violations wins (PR-7), then
// the one whose highest-priority victim is lowest (PR-11); further ties
// (sum of priorities, number of victims, start times) are not judged.
//
// The checker replays this only where the state the scheduler decided on
// is certain: one preemptor, one victims' node, a window with no change to
// any pod (but the preemptor), node or budget the choice reads, no other
// pending nomination, no terminating pod, no inter-pod terms or hard
// spread constraints, at most 100 nodes (kube-scheduler then tries them
// all), and its victims on the chosen node being the ones the rules give
// there. Anything else is left unjudged and counted.

// maxChoiceNodes: with this many nodes or fewer kube-scheduler's dry run
// considers every node (minCandidateNodesAbsolute).
const maxChoiceNodes = 100

// choiceNode is the outcome of the rules on one node.
type choiceNode struct {
	node       string
	victims    []*schedPod // highest priority first
	violations int
}

// highest is the priority of the node's highest-priority victim.
func (c *choiceNode) highest() int32 { return c.victims[0].priority }

func (c *choiceNode) describe() string {
	var vs []string
	for _, p := range c.victims {
		vs = append(vs, fmt.Sprintf("%s (priority %d)", p.key, p.priority))
	}
	return fmt.Sprintf("node %s with %s (%s), %s", c.node, count(len(c.victims), "victim"), strings.Join(vs, ", "),
		count(c.violations, "PodDisruptionBudget violation"))
}

// samePreemptionInput reports whether two versions of a pod look alike to
// preemption: same incarnation, node, nomination, deletion state,
// priority, requests and labels.
func samePreemptionInput(a, b *schedPod) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.uid == b.uid && a.node == b.node && a.nominated == b.nominated && a.deleting == b.deleting &&
		a.terminal() == b.terminal() && a.priority == b.priority && a.preemptNever == b.preemptNever &&
		a.requests.equal(b.requests) && maps.Equal(a.labels, b.labels)
}

// choicePreemptor returns the one pod that can have made the preemption of
// victims on node, or why there is not exactly one.
func (pc *preemptCheck) choicePreemptor(v *preemptWindowView, node string, victims []preemptVictim) (*schedPod, string) {
	var found []*schedPod
	for _, pp := range v.pods {
		if pp.anyNode {
			return nil, "a status patch of the scheduler has no known outcome"
		}
		if !pp.nominated[node] || !pp.pending || pp.pod.preemptNever {
			continue
		}
		higher := true
		for _, vic := range victims {
			if vic.pod.priority >= pp.pod.priority {
				higher = false
			}
		}
		if ok, _ := pc.fitsAfterRemoval(v, node, pp.pod); higher && ok {
			found = append(found, pp.pod)
		}
	}
	if len(found) != 1 {
		return nil, fmt.Sprintf("%s could have made it", count(len(found), "pending pod"))
	}
	return found[0], ""
}

// quiet reports why the window does not pin the state the scheduler
// decided on ("" when it does).
func (v *preemptWindowView) quiet(preemptor *schedPod) string {
	if v.pdbChanged {
		return "a PodDisruptionBudget changed in the window"
	}
	for key := range v.podChanged {
		if key != preemptor.key {
			return "pod " + key + " changed in the window"
		}
	}
	if len(v.nodeVersions) > maxChoiceNodes {
		return fmt.Sprintf("%d nodes: kube-scheduler tries only some", len(v.nodeVersions))
	}
	for name, vs := range v.nodeVersions {
		if len(vs) != 1 || v.nodeGone[name] {
			return "node " + name + " changed in the window"
		}
	}
	if v.podTerms || preemptor.hasPodAffinityTerms {
		return "inter-pod affinity terms"
	}
	for _, c := range preemptor.spread {
		if c.WhenUnsatisfiable == "" || c.WhenUnsatisfiable == corev1.DoNotSchedule {
			return "the preemptor has a hard topology spread constraint"
		}
	}
	for _, p := range v.stateAtTd {
		if p.uid != preemptor.uid && p.pending() && p.nominated != "" {
			return "pod " + p.key + " was nominated too"
		}
		if p.deleting && p.occupies() {
			return "pod " + p.key + " was terminating"
		}
		if p.filtered && (p.occupies() || p.uid == preemptor.uid) {
			return "pod " + p.key + " uses host ports or claims, which the replay does not model"
		}
	}
	for key := range v.lateBound {
		if key != preemptor.key {
			return "pod " + key + " was bound or nominated right after the decision (the scheduler may have held it already)"
		}
	}
	return ""
}

// choiceOn applies the rules to node n for preemptor p; nil when the node
// is no candidate; ambiguous when pods of equal priority that differ would
// be tried in an order the history does not show (their start times).
func choiceOn(v *preemptWindowView, n *schedNode, p *schedPod) (c *choiceNode, ambiguous bool) {
	if !p.passesNodeFilters(n) {
		return nil, false
	}
	var used schedRes
	var potential []*schedPod
	for _, q := range v.stateAtTd {
		if q.node != n.name || !q.occupies() || q.uid == p.uid {
			continue
		}
		if q.priority < p.priority {
			potential = append(potential, q)
		} else {
			used.add(q.requests)
		}
	}
	if !p.requests.fits(used, n.alloc) {
		return nil, false
	}
	all := used
	for _, q := range potential {
		all = addRes(all, q.requests)
	}
	if p.requests.fits(all, n.alloc) {
		// It fits without preemption: the scheduler, which preempted,
		// saw something the replay does not.
		return nil, true
	}
	slices.SortFunc(potential, func(a, b *schedPod) int {
		return cmp.Or(cmp.Compare(b.priority, a.priority), strings.Compare(a.key, b.key))
	})
	for i := 1; i < len(potential); i++ {
		a, b := potential[i-1], potential[i]
		if a.priority == b.priority && (!a.requests.equal(b.requests) || !maps.Equal(a.labels, b.labels)) {
			return nil, true
		}
	}
	// Budgets in a fixed order, as the scheduler's lister returns them
	// (the order only matters for a pod that two budgets select).
	keys := slices.Sorted(maps.Keys(v.pdbsAtTd))
	allowed := make(map[string]int32, len(keys))
	for _, k := range keys {
		allowed[k] = v.pdbsAtTd[k].allowed
	}
	for _, q := range potential {
		matched := 0
		for _, k := range keys {
			b := v.pdbsAtTd[k]
			if b.namespace == q.namespace && !b.selector.Empty() && b.selector.Matches(q.labels) && !b.disrupted[q.name] {
				matched++
			}
		}
		if matched > 1 {
			// The scheduler's lister returns the budgets in no fixed
			// order, and the order decides which one a pod uses up.
			return nil, true
		}
	}
	violating := func(q *schedPod) bool {
		if len(q.labels) == 0 {
			return false
		}
		for _, k := range keys {
			b := v.pdbsAtTd[k]
			if b.namespace != q.namespace || b.selector.Empty() || !b.selector.Matches(q.labels) || b.disrupted[q.name] {
				continue
			}
			allowed[k]--
			if allowed[k] < 0 {
				return true
			}
		}
		return false
	}
	var viol, rest []*schedPod
	for _, q := range potential {
		if violating(q) {
			viol = append(viol, q)
		} else {
			rest = append(rest, q)
		}
	}
	c = &choiceNode{node: n.name}
	reprieve := func(q *schedPod) bool {
		if p.requests.fits(addRes(used, q.requests), n.alloc) {
			used.add(q.requests)
			return true
		}
		c.victims = append(c.victims, q)
		return false
	}
	for _, q := range viol {
		if !reprieve(q) {
			c.violations++
		}
	}
	for _, q := range rest {
		reprieve(q)
	}
	slices.SortStableFunc(c.victims, func(a, b *schedPod) int { return cmp.Compare(b.priority, a.priority) })
	return c, false
}

// addRes returns a + b.
func addRes(a, b schedRes) schedRes {
	out := schedRes{milliCPU: a.milliCPU, memory: a.memory, pods: a.pods, ephemeral: a.ephemeral}
	if len(a.scalar) > 0 {
		out.scalar = maps.Clone(a.scalar)
	}
	out.add(b)
	return out
}

// victimSignature names what the choice reads of a victim, so that victims
// the rules cannot tell apart compare equal.
func victimSignature(p *schedPod) string {
	return fmt.Sprintf("%d %+v %v", p.priority, p.requests, labelsString(p.labels))
}

func labelsString(l map[string]string) string {
	keys := slices.Sorted(maps.Keys(l))
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "=" + l[k] + ",")
	}
	return b.String()
}

// judgeChoice judges the node choice of batch b, whose victims are all on
// node and which judgeNode found legal. It returns evidence when another
// node was surely better (PR-7, PR-11), or why it could not judge.
func (pc *preemptCheck) judgeChoice(b *preemptBatch, v *preemptWindowView, node string, victims []preemptVictim) (*Evidence, string) {
	p, why := pc.choicePreemptor(v, node, victims)
	if p == nil {
		return nil, why
	}
	// Replay with the preemptor as it was at the decision; what the
	// choice reads of it (its spec) must not have changed in the window,
	// since the scheduler's view may trail. Its status (a nomination from
	// an earlier cycle) may.
	at := v.stateAtTd[p.key]
	switch {
	case at == nil || at.uid != p.uid || !at.pending():
		return nil, "the preemptor was not pending at the decision"
	case at.priority != p.priority || !at.requests.equal(p.requests) || !slices.EqualFunc(at.tolerations, p.tolerations, sameToleration) || !maps.Equal(at.labels, p.labels):
		return nil, "the preemptor's spec changed in the window"
	}
	p = at
	if why := v.quiet(p); why != "" {
		return nil, why
	}
	var cands []*choiceNode
	var chosen *choiceNode
	for _, name := range slices.Sorted(maps.Keys(v.nodeVersions)) {
		c, ambiguous := choiceOn(v, v.nodeVersions[name][0], p)
		if ambiguous {
			return nil, "node " + name + " is one the replay cannot decide (pods of equal priority in an order the history does not show, a pod two budgets select, or room without preemption)"
		}
		if c == nil {
			continue
		}
		cands = append(cands, c)
		if name == node {
			chosen = c
		}
	}
	if chosen == nil {
		return nil, "the rules make node " + node + " no candidate"
	}
	var got, want []string
	for _, vic := range victims {
		got = append(got, victimSignature(vic.pod))
	}
	for _, q := range chosen.victims {
		want = append(want, victimSignature(q))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		return nil, "the scheduler's victims on node " + node + " are not the ones the rules give there"
	}
	ev := func(rule, why string) *Evidence {
		calls, vs := victimCalls(victims)
		return &Evidence{Key: victims[0].pod.key, At: b.td, API: append(calls, b.patches...),
			Description: fmt.Sprintf("%s: to place %s the scheduler deleted %s on node %s at %s; %s", rule, p.ref(),
				strings.Join(vs, ", "), node, nanos(b.td), why)}
	}
	for _, c := range cands {
		if c.violations < chosen.violations {
			return ev("PR-7", fmt.Sprintf("that violates %s, while %s", count(chosen.violations, "PodDisruptionBudget"), c.describe())), ""
		}
	}
	for _, c := range cands {
		if c.violations == chosen.violations && c.highest() < chosen.highest() {
			return ev("PR-11", fmt.Sprintf("its highest-priority victim has priority %d, while %s, as many violations, has a highest of %d: %s",
				chosen.highest(), c.node, c.highest(), c.describe())), ""
		}
	}
	pc.choiceJudged++
	return nil, ""
}

// sameToleration compares two tolerations by value (TolerationSeconds is
// a pointer).
func sameToleration(a, b corev1.Toleration) bool {
	if a.Key != b.Key || a.Operator != b.Operator || a.Value != b.Value || a.Effect != b.Effect {
		return false
	}
	if a.TolerationSeconds == nil || b.TolerationSeconds == nil {
		return a.TolerationSeconds == b.TolerationSeconds
	}
	return *a.TolerationSeconds == *b.TolerationSeconds
}
