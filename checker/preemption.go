package checker

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsafe/podsafe/history"
)

// PreemptionChecker names the preemption checker in results.
const PreemptionChecker = "preemption"

// preemptionGuarantees are the guarantees the preemption checker judges.
var preemptionGuarantees = []string{"PR-4", "PR-7", "PR-8", "PR-9", "PR-10", "PR-11", "PR-12"}

// preemptBatch is one preemption as the API history shows it: for each
// victim not already being deleted the scheduler patches its status with
// the condition DisruptionTarget (the mark), deletes it and records an
// Event on it; it then clears lower-priority nominations to the node
// (status patches), and records the preemptor's failed cycle: a Warning
// Event FailedScheduling, then PodScheduled=False and the nomination in
// one status patch (left out when the pod already shows both, sent again
// after a refusal).
type preemptBatch struct {
	deletes []history.APICall
	// marks are the status patches that marked a victim right before its
	// deletion.
	marks   []history.APICall
	patches []history.APICall
	// failureSeen: the batch holds an Event that is not on one of its
	// victims, the preemptor's FailedScheduling; the next such Event
	// belongs to a later cycle.
	failureSeen bool
	// td is when the scheduler had decided: the invoke of the batch's
	// first call, a mark or a deletion; first is that call.
	td    int64
	first history.APICall
	// upper bounds when the store changes the batch made are recorded: its
	// last return plus recording slack.
	upper int64
	// upperRV is the largest resourceVersion a call of the batch answered
	// with; 0 if none did.
	upperRV uint64
}

// schedWrite reports a call of the scheduler that changes something.
func schedWrite(c history.APICall) bool {
	return c.Identity == identityScheduler && c.Verb != "get" && c.Verb != "list" && c.Verb != "watch"
}

// podDelete and podStatusPatch classify a scheduler call.
func podDelete(c history.APICall) bool {
	return c.Group == "" && c.Resource == "pods" && c.Subresource == "" && c.Verb == "delete"
}

func podStatusPatch(c history.APICall) bool {
	return c.Group == "" && c.Resource == "pods" && c.Subresource == "status" && c.Verb == "patch"
}

// schedEvent reports an Event the scheduler records: a core one (podsafe's
// scheduler) or an events.k8s.io one (kube-scheduler: its options build the
// recorder with client-go's events.NewEventBroadcasterAdapterWithContext,
// which writes events.k8s.io/v1 Events when the API serves them). Both name
// an Event after its pod, a dot and a time in hex (see eventPod). Treating
// the latter as any other write would end a batch at each victim's Event
// and so split one preemption, leaving its victims without the nomination
// kube-scheduler's asynchronous preemption may write after them.
func schedEvent(c history.APICall) bool {
	return c.Resource == "events" && (c.Group == "" || c.Group == "events.k8s.io")
}

// eventPod names the pod an Event of the scheduler is on: the scheduler
// names its Events after the pod, a dot and a time in hex.
func eventPod(c history.APICall) string {
	name := c.Name
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		name = name[:i]
	}
	return c.Namespace + "/" + name
}

// preemptBatches groups the scheduler's victim deletions into preemptions.
// The scheduler runs one cycle at a time, so one preemption's calls are
// contiguous, as preemptBatch describes. A status patch of a pod whose
// deletion is the scheduler's next write (Events aside) is that victim's
// mark and goes with its deletion. A batch ends at a binding or any other
// write, or once a second Event not on one of its victims shows that a
// later cycle began: its status patches are those of the preemption's
// cycle (the cleared nominations and the preemptor's), not every later
// cycle's. A batch whose preemptor recorded no failure (it was no longer
// pending) may take in the next cycle's calls, and two preemptions may
// merge into one batch; the checks below take every victim's node on its
// own and only gain candidates from a longer batch, so a merged batch is
// judged as the two would be, never more strictly. A preemption is never
// split: that could leave its victims without the nomination that follows
// them.
func preemptBatches(h *history.History) []preemptBatch {
	var writes []history.APICall
	for _, c := range h.API {
		if schedWrite(c) {
			writes = append(writes, c)
		}
	}
	// marks[i]: writes[i] is the mark of the deletion that follows it.
	marks := make([]bool, len(writes))
	for i, c := range writes {
		if !podStatusPatch(c) {
			continue
		}
		for j := i + 1; j < len(writes); j++ {
			n := writes[j]
			if schedEvent(n) {
				continue
			}
			marks[i] = podDelete(n) && n.Namespace == c.Namespace && n.Name == c.Name
			break
		}
	}
	var out []preemptBatch
	var cur *preemptBatch
	closeAt := func() {
		if cur != nil {
			out = append(out, *cur)
			cur = nil
		}
	}
	victimKeys := map[string]bool{}
	for i, c := range writes {
		switch {
		case marks[i]:
			// Taken with its deletion, the next write but Events.
			continue
		case podDelete(c):
			if cur != nil && cur.failureSeen {
				closeAt()
			}
			if cur == nil {
				cur = &preemptBatch{td: c.Invoke, first: c, upper: math.MinInt64}
				victimKeys = map[string]bool{}
			}
			for k := i - 1; k >= 0; k-- {
				if marks[k] {
					cur.marks = append(cur.marks, writes[k])
					if len(cur.deletes) == 0 {
						cur.td, cur.first = writes[k].Invoke, writes[k]
					}
					cur.note(h, writes[k])
					break
				}
				if !schedEvent(writes[k]) {
					break
				}
			}
			cur.deletes = append(cur.deletes, c)
			victimKeys[c.Namespace+"/"+c.Name] = true
		case schedEvent(c):
			if cur == nil || victimKeys[eventPod(c)] {
				continue
			}
			if cur.failureSeen {
				closeAt()
				continue
			}
			cur.failureSeen = true
		case podStatusPatch(c):
			if cur == nil {
				continue
			}
			cur.patches = append(cur.patches, c)
		default:
			closeAt()
			continue
		}
		cur.note(h, c)
	}
	closeAt()
	return out
}

// note widens the batch's bounds to take in call c.
func (b *preemptBatch) note(h *history.History, c history.APICall) {
	if rv, err := strconv.ParseUint(c.ResourceVersion, 10, 64); err == nil && c.Outcome == history.StatusOK {
		b.upperRV = max(b.upperRV, rv)
	}
	ret := c.Return
	if ret == math.MaxInt64 || c.Outcome == history.StatusUnknown {
		ret = h.End
	}
	b.upper = max(b.upper, ret+int64(schedRecordSlack))
}

// preemptPod gathers what the window shows of one pod UID.
type preemptPod struct {
	pod *schedPod
	// pending: unbound and not being deleted in some state of the window.
	pending bool
	// nominated lists the nodes the store named in its nominatedNodeName
	// from the window's start to the batch's end.
	nominated map[string]bool
	// anyNode: a status patch of the scheduler for the pod failed or has
	// no known outcome, so it may hold a nomination the store never showed.
	anyNode bool
}

// preemptVictim is one deleted pod as the window shows it.
type preemptVictim struct {
	call history.APICall
	pod  *schedPod
}

// preemptCheck is one run of CheckPreemption.
type preemptCheck struct {
	h *history.History
	r *schedReplay
	// failedPatches lists, by pod key, the scheduler's status patches
	// that failed or have no known outcome.
	failedPatches map[string][]history.APICall
	// excused counts victims' nodes left unjudged because a fault or the
	// end of the run may have cut the scheduler off before its patch.
	excused int
	// noFitJudged counts victims' nodes whose preemptor was shown to fit
	// nowhere else (PR-4 decidable and kept).
	noFitJudged int
	// choiceJudged counts preemptions whose node choice was judged and
	// kept (PR-7, PR-11); choiceWhy counts why others were not, by reason.
	choiceJudged int
	choiceWhy    map[string]int
}

// preemptPatchGrace is how long after its first deletion a preemption's
// nomination patch is surely sent by a running scheduler: the deletions
// and Events of one preemption take milliseconds each.
const preemptPatchGrace = 10 * time.Second

// patchMayBeMissing reports whether the scheduler may have been stopped
// between batch b's deletions and its nomination patch: a fault was under
// way then, or the run ended soon after.
func (pc *preemptCheck) patchMayBeMissing(b *preemptBatch) bool {
	end := b.td + int64(preemptPatchGrace)
	if end >= pc.h.End {
		return true
	}
	for _, iv := range pc.h.Nemesis {
		if iv.Start <= end && (!iv.Healed || iv.End >= b.td) {
			return true
		}
	}
	return false
}

// CheckPreemption finds every preemption in the API history — the
// scheduler's deletions of pods, grouped as preemptBatches describes — and
// judges it against the cluster state rebuilt from the store events. The
// preemptor candidates of a victim on node N are the pods the store showed
// nominated to N (status.nominatedNodeName) between the window's start and
// the end of the batch, and the pods whose status patch by the scheduler
// failed or has no known outcome (a nomination the store may never have
// shown). It checks that some candidate explains the victims of each node:
//
//   - PR-9: a victim's node is the node some candidate is nominated to;
//   - PR-10: that candidate was pending (unbound, not being deleted) and
//     every victim on the node has a strictly lower priority;
//   - PR-12: its preemptionPolicy is not Never;
//   - PR-8: with every pod of lower priority removed from N, the candidate
//     fits there: its requests on top of the rest within N's allocatable,
//     N not cordoned, its taints tolerated and its node affinity met;
//   - PR-4: it fit on no node without preemption. A node counts as a
//     sure fit only when it passes those node filters and holds the
//     candidate's requests on top of every pod bound to it at any moment of
//     the window plus every pod of at least the candidate's priority
//     nominated to it; this part is not judged for candidates with
//     DoNotSchedule spread constraints or inter-pod (anti-)affinity, nor
//     while any pod of the cluster has inter-pod terms.
//
// The scheduler decides on informer caches that trail the store, so a
// preemption is Illegal only when no candidate satisfies all of these in
// any store state from schedWindowStart before the first deletion to the
// deletion (node versions taken independently of pod states, as they come
// from another watch); where the scheduler's view holds more than the store
// (assumed and nominated pods), the checks use the lighter store state, so
// they can only err towards Ok.
//
// PR-11 (lowest-priority victims and node choice) and PR-7 (PDB
// preference) depend on the scheduler's bounded candidate search and the
// budgets' status in its cache, which the history cannot pin down; they
// are not judged. The result's Figures count preemptions, victims, and
// victims that a PodDisruptionBudget with no disruptions allowed selected
// when they were deleted (information only). CheckPreemption reads h
// without changing it; it answers Unknown when ctx ends or opts.Timeout
// passes, and never Illegal when the history notes lost store events.
func CheckPreemption(ctx context.Context, h *history.History, opts Options) Result {
	return checkOne(ctx, h, opts, PreemptionChecker)
}

func checkPreemptionView(ctx context.Context, v *view, opts Options) Result {
	res, ctx, cancel := startCheck(ctx, opts, PreemptionChecker, preemptionGuarantees)
	defer cancel()
	h := v.h
	batches := preemptBatches(h)
	r, ok := v.schedReplay(ctx)
	if !ok {
		return res.finish(Unknown, fmt.Sprintf("check cancelled before %s: %v", count(len(batches), "preemption"), context.Cause(ctx)))
	}
	pc := &preemptCheck{h: h, r: r, failedPatches: map[string][]history.APICall{}, choiceWhy: map[string]int{}}
	for _, c := range h.API {
		if schedWrite(c) && c.Resource == "pods" && c.Subresource == "status" && c.Verb == "patch" && c.Outcome != history.StatusOK {
			k := c.Namespace + "/" + c.Name
			pc.failedPatches[k] = append(pc.failedPatches[k], c)
		}
	}
	var illegal []Evidence
	nIllegal, decodeErrs, victims, protected := 0, 0, 0, 0
	keys := map[string]bool{}
	for bi := range batches {
		if ctx.Err() != nil {
			return res.finish(Unknown, fmt.Sprintf("check cancelled after %s of %s: %v", count(bi, "preemption"), count(len(batches), "preemption"), context.Cause(ctx)))
		}
		b := &batches[bi]
		for pc.r.next < len(pc.r.events) && (pc.r.times[pc.r.next] <= b.upper || pc.r.rvs[pc.r.next] <= b.upperRV) {
			if _, _, err := pc.r.step(); err != nil {
				decodeErrs++
			}
		}
		res.Stats.Ops++
		j := pc.judge(b)
		victims += len(j.victims)
		protected += j.protected
		if j.unjudged {
			continue
		}
		res.Stats.Checked++
		for _, v := range j.victims {
			keys[v.pod.key] = true
		}
		if j.evidence != nil {
			nIllegal++
			if len(illegal) < opts.maxEvidence() {
				illegal = append(illegal, *j.evidence)
			}
		}
	}
	res.Stats.Keys = len(keys)
	res.Figures = []Figure{
		{Name: "preemptions", Value: float64(len(batches)), Unit: "count"},
		{Name: "preemption victims", Value: float64(victims), Unit: "count"},
		{Name: "victims selected by a PodDisruptionBudget with no disruptions allowed", Value: float64(protected), Unit: "count"},
		{Name: "preemptions whose preemptor surely fit on no other node (PR-4 judged)", Value: float64(pc.noFitJudged), Unit: "count"},
		{Name: "preemptions whose node choice was judged (PR-7, PR-11)", Value: float64(pc.choiceJudged), Unit: "count"},
	}
	if nIllegal > 0 {
		if schedLostEvents(h) || decodeErrs > 0 {
			return res.finish(Unknown, fmt.Sprintf("%s of %s look illegal, but store events were lost or did not decode, so the rebuilt state may be wrong", count(nIllegal, "preemption"), count(res.Stats.Checked, "judged preemption")))
		}
		res.Evidence = illegal
		return res.finish(Illegal, fmt.Sprintf("%s of %s cannot be explained by any pending preemptor in any state the scheduler could have seen; first: %s",
			count(nIllegal, "preemption"), count(res.Stats.Checked, "judged preemption"), illegal[0].Description))
	}
	if len(batches) == 0 {
		return res.finish(Ok, "the scheduler preempted no pod")
	}
	unjudged := res.Stats.Ops - res.Stats.Checked
	note := ""
	if unjudged > 0 {
		note = fmt.Sprintf("; %s left unjudged: no victim found in the store", count(unjudged, "preemption"))
	}
	if pc.excused > 0 {
		note += fmt.Sprintf("; %s without any nomination excused: a fault or the run's end may have stopped the scheduler before its patch", count(pc.excused, "preemption"))
	}
	note += fmt.Sprintf("; node choice judged for %s (PR-7, PR-11)", count(pc.choiceJudged, "preemption"))
	if len(pc.choiceWhy) > 0 {
		var whys []string
		for _, why := range slices.Sorted(maps.Keys(pc.choiceWhy)) {
			whys = append(whys, fmt.Sprintf("%d: %s", pc.choiceWhy[why], why))
		}
		note += ", not for the others (" + strings.Join(whys, "; ") + ")"
	}
	return res.finish(Ok, fmt.Sprintf("all %s (%s) had a pending preemptor of higher priority, not of policy Never, nominated to the victims' node, that their removal made fit there and that surely fit nowhere else (PR-4 where decidable, PR-8..PR-10, PR-12)%s",
		count(res.Stats.Checked, "judged preemption"), count(victims, "victim"), note))
}

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

// preemptApplies reports whether h holds anything CheckPreemption judges:
// a deletion of a pod by the scheduler.
func preemptApplies(h *history.History) bool {
	for _, c := range h.API {
		if schedWrite(c) && c.Group == "" && c.Resource == "pods" && c.Subresource == "" && c.Verb == "delete" {
			return true
		}
	}
	return false
}
