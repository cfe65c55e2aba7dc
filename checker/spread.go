package checker

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/podsafe/podsafe/history"
)

// SpreadChecker names the topology-spread checker in results.
const SpreadChecker = "topology-spread"

// spreadGuarantees are the guarantees the topology-spread checker judges.
var spreadGuarantees = []string{"TS-2", "TS-4", "TS-5", "TS-6", "TS-7", "TS-8", "TS-10", "TS-11", "TS-12"}

// spreadMaxNodeVersions bounds the distinct versions of the node set a
// window may hold before a binding is left unjudged: each version is
// combined with every pod state of the window.
const spreadMaxNodeVersions = 64

// CheckSpread judges every binding of a pod with DoNotSchedule topology
// spread constraints against the cluster state rebuilt from the store
// events (TS-10: at the moment of binding, not later). A binding is a store
// change that sets a pending pod's spec.nodeName, made by the scheduler (a
// pods/binding call of its identity precedes it). For the target node N
// and every DoNotSchedule constraint of the pod, ANDed (TS-4):
//
//   - N exists (TS-12: domains come from existing nodes only) and carries
//     every constraint's topologyKey (TS-5);
//   - (matching pods in N's domain + 1 if the pod matches its own
//     selector) − global minimum ≤ maxSkew (TS-2), where pods count when
//     they are bound, not finished, not being deleted (the scheduler's own
//     rule), in the pod's namespace (TS-6), matched by the labelSelector
//     plus the pod's values of matchLabelKeys, on nodes that carry every
//     topology key and pass the node inclusion policies (nodeAffinityPolicy
//     Honor by default, TS-7; nodeTaintsPolicy Ignore by default, TS-8;
//     pods on tainted nodes count, TS-11), and the global minimum is the
//     smallest count over those nodes' domains, or 0 when there are fewer
//     of them than minDomains.
//
// The scheduler decides on its informer caches, which trail the store, plus
// the pods it has assumed (bound by its own calls whose store events its
// cache may not have shown yet) and the pods nominated by preemption at the
// pod's priority or above, which its filters count as present. So a
// placement is Illegal only when it breaks the rules in every plausible
// view: every store state from schedWindowStart (schedViewLag before the
// binding call, reaching back over faults) to the binding, each with and
// without the assumed pods and the nominated pods, the pods' and the nodes'
// states taken independently (they come from different watches). Cluster
// default constraints (TS-9) are ScheduleAnyway and never make a placement
// illegal, so they are not judged. CheckSpread reads h without changing it;
// it answers Unknown when ctx ends or opts.Timeout passes, and never
// Illegal when the history notes lost store events.
func CheckSpread(ctx context.Context, h *history.History, opts Options) Result {
	return checkOne(ctx, h, opts, SpreadChecker)
}

func checkSpreadView(ctx context.Context, v *view, opts Options) Result {
	res, ctx, cancel := startCheck(ctx, opts, SpreadChecker, spreadGuarantees)
	defer cancel()
	h := v.h
	r, ok := v.schedReplay(ctx)
	if !ok {
		return res.finish(Unknown, fmt.Sprintf("check cancelled before the bindings: %v", context.Cause(ctx)))
	}
	sc := &spreadCheck{h: h, r: r, binds: schedBindCalls(h)}
	stop := stopper{ctx: ctx}
	var illegal []Evidence
	nIllegal, unjudged, decodeErrs, stale := 0, 0, 0, 0
	keys := map[string]bool{}
	for {
		if stop.stopped() {
			return res.finish(Unknown, fmt.Sprintf("check cancelled after %s of %s: %v", count(res.Stats.Checked, "binding"), count(len(sc.r.events), "store event"), context.Cause(ctx)))
		}
		ch, ok, err := sc.r.step()
		if !ok {
			break
		}
		if err != nil {
			decodeErrs++
			continue
		}
		if !ch.binding() {
			continue
		}
		p := ch.podBefore
		cs, err := spreadConstraintsOf(p)
		if err != nil || len(cs) == 0 {
			continue
		}
		call, ok := sc.bindCall(p.key, ch.t)
		if !ok {
			continue
		}
		res.Stats.Ops++
		v := sc.judge(ch, cs, call)
		if v.unjudged {
			unjudged++
			continue
		}
		res.Stats.Checked++
		keys[p.key] = true
		if v.legal {
			if v.stale {
				stale++
			}
			continue
		}
		nIllegal++
		if len(illegal) < opts.maxEvidence() {
			illegal = append(illegal, v.evidence)
		}
	}
	res.Stats.Keys = len(keys)
	res.Figures = []Figure{
		{Name: "judged bindings", Value: float64(res.Stats.Checked), Unit: "count"},
		{Name: "bindings admissible only in an earlier state or with assumed or nominated pods", Value: float64(stale), Unit: "count"},
	}
	var notes []string
	if unjudged > 0 {
		notes = append(notes, fmt.Sprintf("%s left unjudged: the nodes changed more than %d times in the window", count(unjudged, "binding"), spreadMaxNodeVersions))
	}
	if decodeErrs > 0 {
		notes = append(notes, fmt.Sprintf("%s did not decode", count(decodeErrs, "store event")))
	}
	note := ""
	if len(notes) > 0 {
		note = "; " + strings.Join(notes, "; ")
	}
	if nIllegal > 0 {
		if schedLostEvents(h) || decodeErrs > 0 {
			return res.finish(Unknown, fmt.Sprintf("%s of %s look illegal, but store events were lost, so the rebuilt state may be wrong%s", count(nIllegal, "placement"), count(res.Stats.Checked, "judged binding"), note))
		}
		res.Evidence = illegal
		return res.finish(Illegal, fmt.Sprintf("%s of %s break a DoNotSchedule topology spread constraint in every state the scheduler could have seen; first: %s%s",
			count(nIllegal, "placement"), count(res.Stats.Checked, "judged binding"), illegal[0].Key, note))
	}
	if res.Stats.Checked == 0 {
		return res.finish(Ok, "no binding of a pod with DoNotSchedule topology spread constraints to judge"+note)
	}
	return res.finish(Ok, fmt.Sprintf("all %s of pods with DoNotSchedule topology spread constraints keep their skew (TS-2, TS-4..TS-8, TS-11, TS-12)%s", count(res.Stats.Checked, "binding"), note))
}

// schedBindCalls indexes the scheduler's pods/binding calls by pod key,
// in invoke order.
func schedBindCalls(h *history.History) map[string][]history.APICall {
	out := map[string][]history.APICall{}
	for _, c := range h.API {
		if c.Identity == identityScheduler && c.Verb == "create" && c.Group == "" && c.Resource == "pods" && c.Subresource == "binding" {
			k := c.Namespace + "/" + c.Name
			out[k] = append(out[k], c)
		}
	}
	return out
}

// spreadCheck is one run of CheckSpread.
type spreadCheck struct {
	h     *history.History
	r     *schedReplay
	binds map[string][]history.APICall
	// nodes caches the current node set's spreadNodes by what they depend
	// on besides it (spreadNodesKey); nodesGen is the node generation they
	// were built for.
	nodes    map[string]*spreadNodes
	nodesGen uint64
}

// currentNodes returns the spreadNodes of the replay's current node set
// for the pod's constraints, cached while the nodes do not change.
func (sc *spreadCheck) currentNodes(p *schedPod, cs []spreadCons) *spreadNodes {
	if sc.nodes == nil || sc.nodesGen != sc.r.state.nodeGen {
		sc.nodes, sc.nodesGen = map[string]*spreadNodes{}, sc.r.state.nodeGen
	}
	key, ok := spreadNodesKey(p, cs)
	if !ok {
		return newSpreadNodes(sc.r.state.nodes, p, cs)
	}
	sn := sc.nodes[key]
	if sn == nil {
		sn = newSpreadNodes(sc.r.state.nodes, p, cs)
		sc.nodes[key] = sn
	}
	return sn
}

// spreadNodesKey names what newSpreadNodes reads of the pod: the topology
// keys, the inclusion policies, and, where honoured, the pod's node
// requirements and tolerations.
func spreadNodesKey(p *schedPod, cs []spreadCons) (string, bool) {
	var b strings.Builder
	affinity, taints := false, false
	for _, c := range cs {
		fmt.Fprintf(&b, "%s|%t|%t\x00", c.key, c.honorAffinity, c.honorTaints)
		affinity = affinity || c.honorAffinity
		taints = taints || c.honorTaints
	}
	if affinity && (len(p.nodeSelector) > 0 || p.affinity != nil) {
		raw, err := json.Marshal([]any{p.nodeSelector, p.affinity})
		if err != nil {
			return "", false
		}
		b.Write(raw)
	}
	b.WriteByte(0)
	if taints {
		raw, err := json.Marshal(p.tolerations)
		if err != nil {
			return "", false
		}
		b.Write(raw)
	}
	return b.String(), true
}

// bindCall returns the scheduler's last binding call for the pod invoked
// by t.
func (sc *spreadCheck) bindCall(key string, t int64) (history.APICall, bool) {
	calls := sc.binds[key]
	for i := len(calls) - 1; i >= 0; i-- {
		if calls[i].Invoke <= t {
			return calls[i], true
		}
	}
	return history.APICall{}, false
}

// assumed reports whether the scheduler held the pod of change ch as
// assumed when it decided at tdec: its binding call for the pod succeeded
// and returned before.
func (sc *spreadCheck) assumed(ch *schedChange, tdec int64) bool {
	for _, c := range sc.binds[ch.key] {
		if c.Invoke <= ch.t && c.Outcome == history.StatusOK && c.Return <= tdec {
			return true
		}
	}
	return false
}

// spreadCons is one DoNotSchedule constraint resolved for an incoming pod.
type spreadCons struct {
	maxSkew, minDomains int32
	key                 string
	sel                 labels.Selector
	honorAffinity       bool
	honorTaints         bool
	// none: the selector is empty (labelSelector {} with no matchLabelKeys
	// value merged in), and the scheduler counts no pod with it, as
	// kube-scheduler does, though it matches every pod.
	none bool
	// self is 1 when the incoming pod matches the selector itself (an
	// empty selector too).
	self int
}

func (c spreadCons) String() string {
	return fmt.Sprintf("{topologyKey %s, maxSkew %d, minDomains %d, selector %q}", c.key, c.maxSkew, c.minDomains, c.sel.String())
}

// spreadConstraintsOf resolves the pod's own DoNotSchedule constraints: the
// labelSelector (nil selects nothing) ANDed with the pod's values of
// matchLabelKeys (keys it lacks are ignored), minDomains 1 by default. A
// selector left empty counts no pod but the incoming one (spreadCons.none).
func spreadConstraintsOf(p *schedPod) ([]spreadCons, error) {
	var out []spreadCons
	for _, c := range p.spread {
		if c.WhenUnsatisfiable != "" && c.WhenUnsatisfiable != corev1.DoNotSchedule {
			continue
		}
		sel := labels.Nothing()
		if c.LabelSelector != nil {
			var err error
			if sel, err = metav1.LabelSelectorAsSelector(c.LabelSelector); err != nil {
				return nil, err
			}
			for _, k := range c.MatchLabelKeys {
				v, ok := p.labels[k]
				if !ok {
					continue
				}
				req, err := labels.NewRequirement(k, selection.Equals, []string{v})
				if err != nil {
					return nil, err
				}
				sel = sel.Add(*req)
			}
		}
		sc := spreadCons{maxSkew: c.MaxSkew, minDomains: 1, key: c.TopologyKey, sel: sel,
			honorAffinity: c.NodeAffinityPolicy == nil || *c.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor,
			honorTaints:   c.NodeTaintsPolicy != nil && *c.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor}
		if c.MinDomains != nil {
			sc.minDomains = *c.MinDomains
		}
		sc.none = sel.Empty()
		if sel.Matches(p.labels) {
			sc.self = 1
		}
		out = append(out, sc)
	}
	return out, nil
}

// spreadNodes is one version of the node set as one incoming pod's
// constraints see it.
type spreadNodes struct {
	nodes map[string]*schedNode
	// domain[c][node] is the node's domain for constraint c when the node
	// takes part in its skew; domains[c] lists those domains.
	domain  []map[string]string
	domains []map[string]bool
}

func newSpreadNodes(nodes map[string]*schedNode, p *schedPod, cs []spreadCons) *spreadNodes {
	sn := &spreadNodes{nodes: nodes, domain: make([]map[string]string, len(cs)), domains: make([]map[string]bool, len(cs))}
	for i := range cs {
		sn.domain[i], sn.domains[i] = map[string]string{}, map[string]bool{}
	}
	for name, n := range nodes {
		if !spreadHasKeys(n, cs) {
			continue
		}
		for i, c := range cs {
			if c.honorAffinity && !p.requiredNodeMatch(n) {
				continue
			}
			if c.honorTaints && !p.toleratesSchedulingTaints(n) {
				continue
			}
			d := n.labels[c.key]
			sn.domain[i][name] = d
			sn.domains[i][d] = true
		}
	}
	return sn
}

func spreadHasKeys(n *schedNode, cs []spreadCons) bool {
	for _, c := range cs {
		if _, ok := n.labels[c.key]; !ok {
			return false
		}
	}
	return true
}

// spreadCounts holds matching-pod counts per constraint and domain.
type spreadCounts []map[string]int

func newSpreadCounts(n int) spreadCounts {
	out := make(spreadCounts, n)
	for i := range out {
		out[i] = map[string]int{}
	}
	return out
}

// spreadJudge evaluates one binding in many views.
type spreadJudge struct {
	pod *schedPod
	cs  []spreadCons
	sn  *spreadNodes
	// base counts the bound pods of the state, assumed the pods the
	// scheduler assumed, nominated the nominated pods it counts.
	base, assumed, nominated spreadCounts
}

// counted adds delta for pod q to counts when q counts as a pod on node
// for constraint i: the scheduler's rule (countMatching), so a pod of
// another namespace, one being deleted, or any pod under an empty selector
// does not count.
func (j *spreadJudge) counted(counts spreadCounts, q *schedPod, node string, delta int) {
	if q == nil || q.uid == j.pod.uid || q.namespace != j.pod.namespace || q.deleting || node == "" {
		return
	}
	for i, c := range j.cs {
		d, ok := j.sn.domain[i][node]
		if ok && !c.none && c.sel.Matches(q.labels) {
			counts[i][d] += delta
		}
	}
}

// bound counts q on its node when the scheduler's cache holds it there.
func (j *spreadJudge) bound(counts spreadCounts, q *schedPod, delta int) {
	if q.occupies() {
		j.counted(counts, q, q.node, delta)
	}
}

// nominee counts q on its nominated node when the scheduler's filters
// count it there for the incoming pod.
func (j *spreadJudge) nominee(counts spreadCounts, q *schedPod, delta int) {
	if q.pending() && q.nominated != "" && q.priority >= j.pod.priority {
		j.counted(counts, q, q.nominated, delta)
	}
}

// eval judges the placement in the view base (+ assumed) (+ nominated); it
// returns "" when the placement is admissible, else why not.
func (j *spreadJudge) eval(withAssumed, withNominated bool) string {
	target := j.sn.nodes[j.pod.node]
	if target == nil {
		return fmt.Sprintf("node %s does not exist (TS-12)", j.pod.node)
	}
	for _, c := range j.cs {
		if _, ok := target.labels[c.key]; !ok {
			return fmt.Sprintf("node %s lacks topology key %s (TS-5)", target.name, c.key)
		}
	}
	for i, c := range j.cs {
		at := func(d string) int {
			n := j.base[i][d]
			if withAssumed {
				n += j.assumed[i][d]
			}
			if withNominated {
				n += j.nominated[i][d]
			}
			return n
		}
		dom := target.labels[c.key]
		cnt := 0
		if j.sn.domains[i][dom] {
			cnt = at(dom)
		}
		minimum := 0
		if len(j.sn.domains[i]) >= int(c.minDomains) && len(j.sn.domains[i]) > 0 {
			minimum = -1
			for d := range j.sn.domains[i] {
				if n := at(d); minimum < 0 || n < minimum {
					minimum = n
				}
			}
		}
		if skew := cnt + c.self - minimum; skew > int(c.maxSkew) {
			doms := make([]string, 0, len(j.sn.domains[i]))
			for d := range j.sn.domains[i] {
				doms = append(doms, fmt.Sprintf("%s:%d", d, at(d)))
			}
			sort.Strings(doms)
			return fmt.Sprintf("constraint %s: %d matching pods in %s=%s + %d − global minimum %d = skew %d > maxSkew %d (eligible domains %s)",
				c, cnt, c.key, dom, c.self, minimum, skew, c.maxSkew, strings.Join(doms, " "))
		}
	}
	return ""
}

// evalAny reports whether any of the four views of the current counts
// admits the placement.
func (j *spreadJudge) evalAny() bool {
	return j.eval(false, false) == "" || j.eval(true, false) == "" || j.eval(false, true) == "" || j.eval(true, true) == ""
}

// spreadVerdict is the judgment of one binding.
type spreadVerdict struct {
	legal, unjudged bool
	// stale: only an earlier state, or assumed or nominated pods, admit
	// the placement.
	stale    bool
	evidence Evidence
}

// judge decides the binding ch (just applied to sc.r's state) in every
// view of its window; the walk back undoes the window's pod changes one by
// one from the state before the binding, keeping the counts incrementally.
func (sc *spreadCheck) judge(ch *schedChange, cs []spreadCons, call history.APICall) spreadVerdict {
	st := sc.r.state
	pod := ch.podAfter
	// The likeliest view first, and the only one a legal placement
	// usually needs: the store just before the binding.
	primary := &spreadJudge{pod: pod, cs: cs, sn: sc.currentNodes(pod, cs), base: newSpreadCounts(len(cs))}
	for _, q := range st.byNS[pod.namespace] {
		primary.bound(primary.base, q, 1)
	}
	why := primary.eval(false, false)
	if why == "" {
		return spreadVerdict{legal: true}
	}
	tdec := min(call.Invoke, ch.t)
	wstart := schedWindowStart(sc.h, tdec)
	jmin := min(sc.r.firstAtOrAfter(wstart), ch.idx)
	// The node versions of the window, newest first; heart-beats that
	// change nothing the scheduler reads make no new version.
	versions := []map[string]*schedNode{st.nodes}
	cur := st.nodes
	for k := ch.idx - 1; k >= jmin; k-- {
		c := &sc.r.changes[k]
		if c.kind != schedNodes || c.nodeBefore.sameForScheduling(c.nodeAfter) {
			continue
		}
		next := make(map[string]*schedNode, len(cur))
		for name, n := range cur {
			next[name] = n
		}
		if c.nodeBefore == nil {
			delete(next, c.key)
		} else {
			next[c.key] = c.nodeBefore
		}
		cur = next
		versions = append(versions, cur)
		if len(versions) > spreadMaxNodeVersions {
			return spreadVerdict{unjudged: true}
		}
	}
	for _, nodes := range versions {
		j := &spreadJudge{pod: pod, cs: cs, sn: newSpreadNodes(nodes, pod, cs),
			base: newSpreadCounts(len(cs)), assumed: newSpreadCounts(len(cs)), nominated: newSpreadCounts(len(cs))}
		for _, q := range st.byNS[pod.namespace] {
			j.bound(j.base, q, 1)
			j.nominee(j.nominated, q, 1)
		}
		if j.evalAny() {
			return spreadVerdict{legal: true, stale: true}
		}
		for k := ch.idx - 1; k >= jmin; k-- {
			c := &sc.r.changes[k]
			if c.kind != schedPods {
				continue
			}
			if (c.podBefore == nil || c.podBefore.namespace != pod.namespace) && (c.podAfter == nil || c.podAfter.namespace != pod.namespace) {
				continue
			}
			if c.podAfter != nil {
				j.bound(j.base, c.podAfter, -1)
				j.nominee(j.nominated, c.podAfter, -1)
			}
			if c.podBefore != nil {
				j.bound(j.base, c.podBefore, 1)
				j.nominee(j.nominated, c.podBefore, 1)
			}
			if c.binding() && sc.assumed(c, tdec) {
				j.bound(j.assumed, c.podAfter, 1)
			}
			if j.evalAny() {
				return spreadVerdict{legal: true, stale: true}
			}
		}
	}
	states := ch.idx - jmin + 1
	return spreadVerdict{evidence: Evidence{
		Key: pod.key,
		Description: fmt.Sprintf("pod %s bound to node %s at %s (store rv %s): %s in the state before the binding; no store state from %s on (%s, %s of the nodes), with or without the pods the scheduler had assumed or nominated, admits it",
			pod.ref(), pod.node, nanos(ch.t), sc.r.events[ch.idx].RV, why, nanos(max(wstart, 0)), count(states, "state"), count(len(versions), "version")),
		API: []history.APICall{call},
	}}
}

// spreadApplies reports whether h holds anything CheckSpread judges: a pod
// with topology spread constraints in the store events.
func spreadApplies(h *history.History) bool {
	for _, ev := range h.Store {
		if schedKindOf(ev.Resource) == schedPods && containsQuoted(ev.Object, "topologySpreadConstraints") {
			return true
		}
	}
	return false
}
