package checker

// Judging one preemption batch: the cluster as it stood in the batch's
// window (preemptWindowView), rebuilt from the store lines, and whether each
// victim had to go (PR-4, PR-7..PR-12).

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsafe/podsafe/history"
)

// preemptJudgment is the outcome of one batch.
type preemptJudgment struct {
	victims   []preemptVictim
	protected int
	unjudged  bool
	evidence  *Evidence
}

// preemptWindowView is what the window shows: the states from the window's
// start to the decision, and the later changes up to the batch's end.
type preemptWindowView struct {
	jmin, idxTd int
	pods        map[string]*preemptPod // by UID
	// nodeVersions lists each node's versions in the window; nodeGone
	// marks nodes absent from some state of it.
	nodeVersions map[string][]*schedNode
	nodeGone     map[string]bool
	// occupied[node][uid] and nominatedTo[node][uid]: the pods bound to,
	// or pending and nominated to, the node in some state of the window.
	occupied    map[string]map[string]*schedPod
	nominatedTo map[string]map[string]*schedPod
	podTerms    bool
	stateAtTd   map[string]*schedPod
	// pdbsAtTd are the PodDisruptionBudgets at the decision; pdbChanged:
	// one changed in the window. podChanged names the pods that changed in
	// the window in a way preemption reads (see samePreemptionInput).
	pdbsAtTd   map[string]*schedPDB
	pdbChanged bool
	podChanged map[string]bool
	// lateBound names the pods bound or nominated between the decision
	// and the batch's end: the scheduler may have counted them already.
	lateBound map[string]bool
}

// view walks back from the replay's state (the batch's end) over the
// window, collecting what preemptWindowView holds.
func (pc *preemptCheck) view(b *preemptBatch) *preemptWindowView {
	r := pc.r
	wstart := schedWindowStart(pc.h, b.td)
	v := &preemptWindowView{pods: map[string]*preemptPod{}, nodeVersions: map[string][]*schedNode{}, nodeGone: map[string]bool{},
		occupied: map[string]map[string]*schedPod{}, nominatedTo: map[string]map[string]*schedPod{}}
	// The decision's state: everything committed before the batch's first
	// call (a victim's mark or deletion), by its resourceVersion when the
	// answer gave one, else by time with the recording slack.
	first := b.first
	if rv, err := strconv.ParseUint(first.ResourceVersion, 10, 64); err == nil && first.Outcome == history.StatusOK {
		v.idxTd = r.firstFromRV(rv) - 1
	} else {
		v.idxTd = r.firstAtOrAfter(b.td+int64(schedRecordSlack)+1) - 1
	}
	v.idxTd = min(v.idxTd, r.next-1)
	v.jmin = min(r.firstAtOrAfter(wstart), v.idxTd+1)
	pods := make(map[string]*schedPod, len(r.state.pods))
	for k, p := range r.state.pods {
		pods[k] = p
	}
	nodes := make(map[string]*schedNode, len(r.state.nodes))
	for k, n := range r.state.nodes {
		nodes[k] = n
	}
	pdbs := make(map[string]*schedPDB, len(r.state.pdbs))
	for k, p := range r.state.pdbs {
		pdbs[k] = p
	}
	v.podChanged = map[string]bool{}
	info := func(p *schedPod) *preemptPod {
		pp := v.pods[p.uid]
		if pp == nil {
			pp = &preemptPod{pod: p, nominated: map[string]bool{}}
			v.pods[p.uid] = pp
		}
		return pp
	}
	late := func(p *schedPod) {
		if p != nil && p.nominated != "" {
			info(p).nominated[p.nominated] = true
		}
	}
	inWindow := func(p *schedPod) {
		if p == nil {
			return
		}
		pp := info(p)
		pp.pod = p
		if p.pending() {
			pp.pending = true
			if p.nominated != "" {
				pp.nominated[p.nominated] = true
				preemptAdd(v.nominatedTo, p.nominated, p)
			}
		}
		if p.occupies() {
			preemptAdd(v.occupied, p.node, p)
			if p.hasPodAffinityTerms {
				v.podTerms = true
			}
		}
	}
	for k := r.next - 1; k > v.idxTd; k-- {
		c := &r.changes[k]
		switch c.kind {
		case schedPods:
			// A nomination after the decision is this batch's only when
			// its calls' answers reach that far.
			if b.upperRV == 0 || r.rvs[k] <= b.upperRV {
				late(c.podAfter)
			}
			if a, bf := c.podAfter, c.podBefore; a != nil && (bf == nil || a.node != bf.node || a.nominated != bf.nominated) && (a.node != "" || a.nominated != "") {
				if v.lateBound == nil {
					v.lateBound = map[string]bool{}
				}
				v.lateBound[c.key] = true
			}
			schedSetOrDelete(pods, c.key, c.podBefore)
		case schedNodes:
			schedSetOrDelete(nodes, c.key, c.nodeBefore)
		case schedPDBs:
			schedSetOrDelete(pdbs, c.key, c.pdbBefore)
		}
	}
	v.pdbsAtTd = pdbs
	v.stateAtTd = make(map[string]*schedPod, len(pods))
	for k, p := range pods {
		v.stateAtTd[k] = p
		inWindow(p)
	}
	for name, n := range nodes {
		v.nodeVersions[name] = []*schedNode{n}
	}
	for k := v.idxTd; k >= v.jmin; k-- {
		c := &r.changes[k]
		switch c.kind {
		case schedPods:
			inWindow(c.podBefore)
			if !samePreemptionInput(c.podBefore, c.podAfter) {
				v.podChanged[c.key] = true
			}
		case schedPDBs:
			v.pdbChanged = true
		case schedNodes:
			if c.nodeBefore == nil {
				v.nodeGone[c.key] = true
				continue
			}
			vs := v.nodeVersions[c.key]
			if len(vs) == 0 {
				v.nodeGone[c.key] = true
			}
			if len(vs) == 0 || !vs[len(vs)-1].sameForScheduling(c.nodeBefore) {
				v.nodeVersions[c.key] = append(vs, c.nodeBefore)
			}
		}
	}
	for key, calls := range pc.failedPatches {
		for _, c := range calls {
			if c.Invoke > b.upper {
				break
			}
			for _, pp := range v.pods {
				if pp.pod.key == key {
					pp.anyNode = true
				}
			}
		}
	}
	return v
}

func preemptAdd(m map[string]map[string]*schedPod, node string, p *schedPod) {
	s := m[node]
	if s == nil {
		s = map[string]*schedPod{}
		m[node] = s
	}
	s[p.uid] = p
}

func schedSetOrDelete[T any](m map[string]*T, key string, v *T) {
	if v == nil {
		delete(m, key)
	} else {
		m[key] = v
	}
}

// judge decides one batch; the replay stands at the batch's end.
func (pc *preemptCheck) judge(b *preemptBatch) preemptJudgment {
	v := pc.view(b)
	var j preemptJudgment
	// Victims: the pod of each deletion, by the UID the response named,
	// else every pod of that name the window saw bound.
	byNode := map[string][]preemptVictim{}
	var nodes []string
	for _, c := range b.deletes {
		key := c.Namespace + "/" + c.Name
		var found *schedPod
		for _, pp := range v.pods {
			p := pp.pod
			if p.key != key || (c.UID != "" && p.uid != c.UID) {
				continue
			}
			if occ := v.occupiedVersion(p.uid); occ != nil && (found == nil || occ.priority < found.priority) {
				found = occ
			}
		}
		if found == nil {
			continue
		}
		vic := preemptVictim{call: c, pod: found}
		j.victims = append(j.victims, vic)
		if byNode[found.node] == nil {
			nodes = append(nodes, found.node)
		}
		byNode[found.node] = append(byNode[found.node], vic)
		if pc.protectedByPDB(found) {
			j.protected++
		}
	}
	if len(j.victims) == 0 {
		j.unjudged = true
		return j
	}
	sort.Strings(nodes)
	for _, node := range nodes {
		if ev := pc.judgeNode(b, v, node, byNode[node]); ev != nil {
			j.evidence = ev
			return j
		}
	}
	if len(nodes) != 1 {
		pc.choiceWhy["victims on several nodes"]++
		return j
	}
	ev, why := pc.judgeChoice(b, v, nodes[0], byNode[nodes[0]])
	if why != "" {
		pc.choiceWhy[why]++
	}
	j.evidence = ev
	return j
}

// occupiedVersion returns a version of the pod bound to a node in the
// window.
func (v *preemptWindowView) occupiedVersion(uid string) *schedPod {
	for _, s := range v.occupied {
		if p, ok := s[uid]; ok {
			return p
		}
	}
	return nil
}

func (pc *preemptCheck) protectedByPDB(p *schedPod) bool {
	for _, pdb := range pc.r.state.pdbs {
		if pdb.namespace == p.namespace && pdb.allowed <= 0 && pdb.selector.Matches(p.labels) {
			return true
		}
	}
	return false
}

// judgeNode checks the victims on one node; nil when some candidate
// explains them.
func (pc *preemptCheck) judgeNode(b *preemptBatch, v *preemptWindowView, node string, victims []preemptVictim) *Evidence {
	var cands, elsewhere []*preemptPod
	for _, pp := range v.pods {
		switch {
		case pp.nominated[node] || pp.anyNode:
			cands = append(cands, pp)
		case len(pp.nominated) > 0:
			elsewhere = append(elsewhere, pp)
		}
	}
	sort.Slice(cands, func(a, c int) bool { return cands[a].pod.key < cands[c].pod.key })
	ev := func(rule, why string) *Evidence {
		calls, vs := victimCalls(victims)
		calls = append(calls, b.marks...)
		calls = append(calls, b.patches...)
		return &Evidence{Key: victims[0].pod.key, API: calls,
			Description: fmt.Sprintf("%s: the scheduler deleted %s on node %s at %s; %s", rule, strings.Join(vs, ", "), node, nanos(b.td), why)}
	}
	if len(cands) == 0 && pc.patchMayBeMissing(b) {
		// The scheduler may have died or stopped between the deletions and
		// its nomination patch, which then never reached the API.
		pc.excused++
		return nil
	}
	if len(cands) == 0 {
		if len(elsewhere) > 0 {
			var names []string
			for _, pp := range elsewhere {
				for n := range pp.nominated {
					names = append(names, fmt.Sprintf("%s→%s", pp.pod.key, n))
				}
			}
			sort.Strings(names)
			return ev("PR-9", fmt.Sprintf("no pod was nominated to %s, only to other nodes (%s): the victims are not on the preemptor's node", node, strings.Join(names, ", ")))
		}
		return ev("PR-10", fmt.Sprintf("no pod was nominated to %s in the store from %s to %s and no nomination patch failed: there is no preemptor", node, nanos(max(0, pc.r.times[max(v.jmin-1, 0)])), nanos(b.upper)))
	}
	names := func(ps []*preemptPod) string {
		out := make([]string, len(ps))
		for i, pp := range ps {
			out[i] = pp.pod.ref()
		}
		return strings.Join(out, ", ")
	}
	var pending []*preemptPod
	for _, pp := range cands {
		if pp.pending {
			pending = append(pending, pp)
		}
	}
	if len(pending) == 0 {
		return ev("PR-10", fmt.Sprintf("no candidate preemptor (%s) was pending (unbound, not being deleted) in any state of the window", names(cands)))
	}
	var policy []*preemptPod
	for _, pp := range pending {
		if !pp.pod.preemptNever {
			policy = append(policy, pp)
		}
	}
	if len(policy) == 0 {
		return ev("PR-12", fmt.Sprintf("every pending candidate preemptor (%s) has preemptionPolicy Never", names(pending)))
	}
	var higher []*preemptPod
	for _, pp := range policy {
		ok := true
		for _, vic := range victims {
			if vic.pod.priority >= pp.pod.priority {
				ok = false
			}
		}
		if ok {
			higher = append(higher, pp)
		}
	}
	if len(higher) == 0 {
		return ev("PR-10", fmt.Sprintf("a victim's priority is not strictly lower than that of any pending candidate preemptor (%s)", names(policy)))
	}
	var room []*preemptPod
	var roomWhy []string
	for _, pp := range higher {
		if ok, why := pc.fitsAfterRemoval(v, node, pp.pod); ok {
			room = append(room, pp)
		} else {
			roomWhy = append(roomWhy, why)
		}
	}
	if len(room) == 0 {
		return ev("PR-8", fmt.Sprintf("removing every lower-priority pod from %s makes no candidate fit in any state of the window: %s", node, strings.Join(roomWhy, "; ")))
	}
	var fitWhy []string
	for _, pp := range room {
		m, judged := v.sureFit(pp)
		if !judged {
			return nil
		}
		if m == "" {
			pc.noFitJudged++
			return nil
		}
		fitWhy = append(fitWhy, fmt.Sprintf("%s fit on node %s without preemption", pp.pod.key, m))
	}
	return ev("PR-4", fmt.Sprintf("every candidate preemptor fit elsewhere in every state of the window: %s", strings.Join(fitWhy, "; ")))
}

// victimCalls returns the victims' deletions and their descriptions.
func victimCalls(victims []preemptVictim) ([]history.APICall, []string) {
	calls := make([]history.APICall, 0, len(victims))
	refs := make([]string, 0, len(victims))
	for _, vic := range victims {
		calls = append(calls, vic.call)
		refs = append(refs, vic.pod.ref())
	}
	return calls, refs
}

// fitsAfterRemoval reports whether some state of the window and some
// version of node has room for p once every pod of lower priority is gone.
func (pc *preemptCheck) fitsAfterRemoval(v *preemptWindowView, node string, p *schedPod) (bool, string) {
	versions := v.nodeVersions[node]
	var usable []*schedNode
	for _, n := range versions {
		if p.passesNodeFilters(n) {
			usable = append(usable, n)
		}
	}
	if len(usable) == 0 {
		return false, fmt.Sprintf("%s does not pass node %s's cordon, taints or affinity (or the node is gone)", p.key, node)
	}
	// Walk the window's states: only pods on node matter.
	r := pc.r
	on := map[string]*schedPod{}
	for _, q := range v.stateAtTd {
		if q.node == node {
			on[q.key] = q
		}
	}
	// least is the smallest use of each resource over the states.
	least := schedRes{milliCPU: math.MaxInt64, memory: math.MaxInt64, pods: math.MaxInt64, ephemeral: math.MaxInt64}
	check := func() bool {
		var used schedRes
		for _, q := range on {
			if q.occupies() && q.priority >= p.priority && q.uid != p.uid {
				used.add(q.requests)
			}
		}
		least = schedRes{milliCPU: min(least.milliCPU, used.milliCPU), memory: min(least.memory, used.memory), pods: min(least.pods, used.pods),
			ephemeral: min(least.ephemeral, used.ephemeral)}
		for _, n := range usable {
			if p.requests.fits(used, n.alloc) {
				return true
			}
		}
		return false
	}
	if check() {
		return true, ""
	}
	for k := v.idxTd; k >= v.jmin; k-- {
		c := &r.changes[k]
		if c.kind != schedPods {
			continue
		}
		touched := false
		if c.podAfter != nil && c.podAfter.node == node {
			delete(on, c.key)
			touched = true
		}
		if c.podBefore != nil && c.podBefore.node == node {
			on[c.key] = c.podBefore
			touched = true
		}
		if touched && check() {
			return true, ""
		}
	}
	return false, fmt.Sprintf("%s requests %s, pods of at least its priority on %s use at least %s of allocatable %s", p.ref(), p.requests, node, least, usable[0].alloc)
}

// sureFit returns a node where p surely fit without preemption throughout
// the window, "" if none; judged is false when the history cannot tell
// (inter-pod terms, hard spread constraints).
func (v *preemptWindowView) sureFit(pp *preemptPod) (node string, judged bool) {
	p := pp.pod
	if v.podTerms || p.hasPodAffinityTerms {
		return "", false
	}
	for _, c := range p.spread {
		if c.WhenUnsatisfiable == "" || c.WhenUnsatisfiable == corev1.DoNotSchedule {
			return "", false
		}
	}
	var anyNode []*schedPod
	for _, q := range v.pods {
		if q.anyNode && q.pending && q.pod.uid != p.uid && q.pod.priority >= p.priority {
			anyNode = append(anyNode, q.pod)
		}
	}
	names := make([]string, 0, len(v.nodeVersions))
	for name := range v.nodeVersions {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if v.nodeGone[name] {
			continue
		}
		ok := true
		for _, n := range v.nodeVersions[name] {
			if !p.passesNodeFilters(n) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		var load schedRes
		for uid, q := range v.occupied[name] {
			if uid != p.uid {
				load.add(q.requests)
			}
		}
		for uid, q := range v.nominatedTo[name] {
			if uid != p.uid && q.priority >= p.priority {
				load.add(q.requests)
			}
		}
		for _, q := range anyNode {
			load.add(q.requests)
		}
		fits := true
		for _, n := range v.nodeVersions[name] {
			if !p.requests.fits(load, n.alloc) {
				fits = false
			}
		}
		if fits {
			return name, true
		}
	}
	return "", true
}
