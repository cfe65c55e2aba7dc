package checker

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/podsafe/podsafe/history"
)

// GraceChecker names the grace-period checker in results.
const GraceChecker = "grace-period"

// graceGuarantees are the guarantees the grace-period checker judges.
var graceGuarantees = []string{"PS-3", "PS-4", "PS-5", "GP-1", "GP-2", "GP-3", "GP-4", "GP-5", "GP-R", "LC-11", "LC-12"}

// GraceTolerance is the slack of every grace-period bound, in scaled time.
// The kubelet reads its clock after the runtime recorded TERM and never acts
// before a deadline by that clock, so on the ledger's scaled times the bounds
// hold exactly; the slack absorbs rounding only.
const GraceTolerance = 100 * time.Millisecond

// PreStopRecordingSlack is how much wall time the ledger entry of a preStop
// hook's end may trail the TERM that followed the hook: the hook's end is
// recorded by the hook's own goroutine, which may run after the kubelet's,
// one scheduling delay late. A hook whose end is recorded later than this
// after TERM was still running when TERM came.
const PreStopRecordingSlack = 50 * time.Millisecond

// minShutdown is GP-3's window: KILL never comes less than 2 s after TERM.
const minShutdown = 2 * time.Second

// GraceReactionSlack is how long, in wall time, a kubelet may take to act
// on a deletion's grace period, from the store's commit of it or from the
// kill's start, whichever is later: the change reaches the kubelet by its
// pod watch only (the API server's watch cache, then the informer; the
// kubelet has no periodic resync), which takes milliseconds and a few
// hundred on a loaded machine, and a timer of the scaled clock fires a
// scheduling delay late. A full second is generous; faults that could
// delay the kubelet longer are not judged at all.
const GraceReactionSlack = time.Second

// CheckGrace judges every container kill in the ledger against GP-R's
// safety bound. A kill begins at its preStop hook's start, or at TERM when
// there is no hook; a second TERM or preStop of one container run begins a
// new kill, as a restarted kubelet starts over with the full grace (PS-5,
// LC-12). With G the effective grace of the kill and the scaled times of one
// node's clock:
//
//   - TERM comes no earlier than the hook's end or start + G, whichever is
//     first (GP-2, LC-11);
//   - KILL comes no earlier than max(start + G, TERM + 2 s) (PS-4, GP-3,
//     GP-R), each within GraceTolerance;
//   - KILL never comes without TERM, unless G is 0.
//
// G is the smallest grace any deletion of the pod asked for before the
// signal (GP-6; a longer one never lengthens it, PS-3), or 0 once the
// history shows the pod force deleted or its object gone (LC-13 bounds
// nothing then). When no deletion of the pod's UID came before the kill
// began (a probe or eviction kill, GP-1, GP-4), or a deletion gave no grace
// (the pod's own applies, unknown to the history), the grace the kubelet
// stated in the ledger counts too. When the kubelet stated a shorter grace
// than the deletions asked for and the kill honours only that one, the
// history cannot tell a wrongly computed grace (GP-1) from a probe or
// eviction kill that began before the kubelet saw the deletion (GP-5), or
// from a terminal pod the API deleted at once (GP-6): that kill is Unknown,
// unless the store rules all of those out (no container of the pod has a
// probe that kills, no pod's script uses memory and no node reported
// MemoryPressure, the pod was never marked Evicted, and its object still
// existed at the kill): then the kubelet computed the grace wrongly (GP-1)
// and the kill is Illegal. A kill that honours a grace of 1 s which the store
// shows the API server set by shortening the pod's grace (a second deletion
// whose deadline, counted from the first, had passed) is Ok: the kubelet
// must honour the API's grace (GP-5).
//
// The upper bound (LC-11, PS-4, and PS-3, GP-5 for a shortened grace):
// once the store shows the pod terminating with deletionGracePeriodSeconds
// g > 0, committed at t (its first graceful deletion, or a later one that
// shortened the grace), a kill under way then or begun after must send TERM
// by D = max(the kill's start + g, t) + GraceReactionSlack of wall time, and
// end (KILL, or the container's exit) by D + 2 s. The kubelet learns of the
// grace by t + the slack at the latest, abandons a preStop hook still
// running at the deadline start + g (at once if that is already past),
// sends TERM, and KILLs at max(deadline, TERM + 2 s): GP-3's 2 s window
// after TERM is LC-11's one extension of a hanging hook, as upstream
// killContainer has it, never more time for the hook. The slack covers
// every delay of one kill together (watch, scheduling, timers). A kill that
// ended before t (or sent TERM before t, for the TERM bound) had nothing to
// learn and is not judged; nor is one while a fault (a paused, killed or
// cut-off component, a skewed clock, a failpoint) overlaps the window from
// t to its end, since any fault may delay the kubelet, nor an orphan's kill
// begun after the object was gone (LC-13: its grace is the kubelet's own).
//
// It is pure, O(n log n) in the ledger and API history plus two passes over
// the store, and answers Unknown when ctx ends or opts.Timeout passes
// first.
func CheckGrace(ctx context.Context, h *history.History, opts Options) Result {
	return checkOne(ctx, h, opts, GraceChecker)
}

func checkGrace(ctx context.Context, v *view, opts Options) Result {
	res, ctx, cancel := startCheck(ctx, opts, GraceChecker, graceGuarantees)
	defer cancel()
	h := v.h
	ledger := h.Ledger
	attempts, firstSeen := killAttempts(ledger)
	if len(attempts) == 0 {
		return res.finish(Unknown, "not checked: the ledger records no TERM or KILL")
	}
	res.Stats.Ops = len(attempts)
	pods, ok := v.pods(ctx)
	if !ok {
		return res.cancelled(count(len(attempts), "kill"))
	}
	nodes, ok := v.nodes(ctx)
	if !ok {
		return res.cancelled(count(len(attempts), "kill"))
	}
	idx := newDeletionIndex(h.API)
	facts := newGraceFacts(pods, nodes)
	facts.invokedAt = map[string]int64{}
	for i := range h.API {
		c := &h.API[i]
		if c.Resource == "pods" && c.ResourceVersion != "" {
			if t, ok := facts.invokedAt[c.ResourceVersion]; !ok || c.Invoke < t {
				facts.invokedAt[c.ResourceVersion] = c.Invoke
			}
		}
	}
	first := firstGraces(pods)
	st := &stopper{ctx: ctx}

	var illegal, undecided []Evidence
	nIllegal, nUndecided, unjudged, unbounded, retries, expired := 0, 0, 0, 0, 0, 0
	var upper upperCounts
	uids := map[string]bool{}
	for _, a := range attempts {
		if st.stopped() {
			return res.cancelled(count(len(attempts), "kill"))
		}
		uids[a.key] = true
		if a.retry {
			retries++
		}
		j := judgeKill(ledger, idx, facts, a, firstSeen[a.key])
		if j.verdict != Illegal {
			if late, ok := lateKill(h, a, facts, first, &upper); ok {
				res.Stats.Checked++
				nIllegal++
				if len(illegal) < opts.maxEvidence() {
					illegal = append(illegal, late)
				}
				continue
			}
		}
		switch {
		case j.unjudged:
			unjudged++
			continue
		case j.unbounded:
			unbounded++
		case j.expiredShortening:
			expired++
		}
		res.Stats.Checked++
		switch j.verdict {
		case Illegal:
			nIllegal++
			if len(illegal) < opts.maxEvidence() {
				illegal = append(illegal, j.evidence(h))
			}
		case Unknown:
			nUndecided++
			if len(undecided) < opts.maxEvidence() {
				undecided = append(undecided, j.evidence(h))
			}
		}
	}
	res.Stats.Keys = len(uids)

	var notes []string
	if retries > 0 {
		notes = append(notes, fmt.Sprintf("%s began again after a kubelet restart and got the full grace (PS-5)", count(retries, "kill")))
	}
	if unbounded > 0 {
		notes = append(notes, fmt.Sprintf("%s of force-deleted pods (grace 0) bounded nothing", count(unbounded, "kill")))
	}
	if unjudged > 0 {
		notes = append(notes, fmt.Sprintf("%s not judged: neither a deletion nor the ledger gives the grace", count(unjudged, "kill")))
	}
	if expired > 0 {
		notes = append(notes, fmt.Sprintf("%s honoured the 1 s the API server set when a shorter grace asked of a terminating pod had already run out (GP-5, GP-6)", count(expired, "kill")))
	}
	if upper.judged > 0 {
		notes = append(notes, fmt.Sprintf("%s held to TERM by the deletion's deadline and KILL 2 s after it (LC-11; PS-3, GP-5 when shortened)", count(upper.judged, "kill")))
	}
	if upper.faulted > 0 {
		notes = append(notes, fmt.Sprintf("%s not held to some deletion's deadline: a fault overlapped", count(upper.faulted, "kill")))
	}
	suffix := ""
	if len(notes) > 0 {
		suffix = "; " + strings.Join(notes, "; ")
	}
	switch {
	case res.Stats.Checked == 0:
		return res.finish(Unknown, fmt.Sprintf("no kill could be judged: neither a deletion nor the ledger gives the grace of any of the %s",
			count(len(attempts), "kill")))
	case nIllegal > 0:
		res.Evidence = illegal
		return res.finish(Illegal, fmt.Sprintf("%s of %s broke a grace-period bound (GP-R, PS-3), first pod %s: %s%s",
			count(nIllegal, "kill"), count(res.Stats.Checked, "judged kill"), illegal[0].Key, illegal[0].Description, suffix))
	case nUndecided > 0:
		res.Evidence = undecided
		return res.finish(Unknown, fmt.Sprintf("%s honoured only the shorter grace the kubelet stated, not the one the deletions asked for; the history cannot tell a probe or eviction kill racing the deletion (GP-5), or a terminal pod deleted at once (GP-6), from a wrongly computed grace (GP-1); first pod %s%s",
			count(nUndecided, "kill"), undecided[0].Key, suffix))
	}
	return res.finish(Ok, fmt.Sprintf("every kill honoured its grace period (%s judged): no TERM during preStop before the deadline, no KILL before max(deadline, TERM + 2 s) nor without TERM (tolerance %s scaled)%s",
		count(res.Stats.Checked, "kill"), GraceTolerance, suffix))
}

// killAttempt is one kill of one container run: the kubelet's preStop,
// TERM and KILL, as ledger indices (-1 when absent).
type killAttempt struct {
	key, uid, namespace, pod, node, container string

	preStopStart, preStopEnd, term, kill int
	// end is the exit (or power-off) that ended the container run after
	// the kill began, or -1.
	end int
	// prevTerm is a TERM of an earlier kill of the same run, or -1.
	prevTerm int
	// retry marks a kill after an earlier one of the same run: a kubelet
	// restarted and began again.
	retry bool
}

// start is the ledger index where the kill began.
func (a *killAttempt) start() int {
	switch {
	case a.preStopStart >= 0:
		return a.preStopStart
	case a.term >= 0:
		return a.term
	}
	return a.kill
}

// killAttempts splits the ledger into kills. It also returns, per instance
// (uidKey), the recorder time of its first runtime entry, when its pod
// object surely existed.
func killAttempts(ledger []history.LedgerEntry) ([]killAttempt, map[string]int64) {
	type ctr struct{ key, container string }
	cur := map[ctr]*killAttempt{}
	lastTerm := map[ctr]int{} // the last TERM of the current run
	firstSeen := map[string]int64{}
	var out []killAttempt
	flush := func(k ctr) {
		if a := cur[k]; a != nil && (a.term >= 0 || a.kill >= 0) {
			out = append(out, *a)
		}
		delete(cur, k)
	}
	begin := func(k ctr, e history.LedgerEntry) *killAttempt {
		prev, retry := lastTerm[k]
		if !retry {
			prev = -1
		}
		if a := cur[k]; a != nil {
			retry = true
			flush(k)
		}
		a := &killAttempt{key: k.key, uid: e.UID, namespace: e.Namespace, pod: e.Pod, node: e.Node, container: e.Container,
			preStopStart: -1, preStopEnd: -1, term: -1, kill: -1, end: -1, prevTerm: prev, retry: retry}
		cur[k] = a
		return a
	}
	for i := range ledger {
		e := &ledger[i]
		if !isRuntimeAction(e.Action) {
			continue
		}
		k := ctr{uidKey(e), e.Container}
		if _, ok := firstSeen[k.key]; !ok {
			firstSeen[k.key] = e.T
		}
		a := cur[k]
		switch e.Action {
		case history.LedgerStart, history.LedgerExit, history.LedgerPowerOff:
			if a != nil && e.Action != history.LedgerStart {
				a.end = i
			}
			flush(k)
			delete(lastTerm, k)
		case history.LedgerPreStopStart:
			begin(k, *e).preStopStart = i
		case history.LedgerPreStopEnd:
			if a != nil && a.preStopStart >= 0 && a.preStopEnd < 0 {
				a.preStopEnd = i
			}
		case history.LedgerTerm:
			if a == nil || a.term >= 0 || a.kill >= 0 {
				a = begin(k, *e)
			}
			a.term = i
			lastTerm[k] = i
		case history.LedgerKill:
			if a == nil {
				a = begin(k, *e)
			}
			if a.kill < 0 {
				a.kill = i
			}
		}
	}
	for k := range cur {
		flush(k)
	}
	// Kills come out in the order they began.
	sort.Stable(killsByStart(out))
	return out, firstSeen
}

// killsByStart orders kills by where they began.
type killsByStart []killAttempt

func (k killsByStart) Len() int           { return len(k) }
func (k killsByStart) Less(i, j int) bool { return k[i].start() < k[j].start() }
func (k killsByStart) Swap(i, j int)      { k[i], k[j] = k[j], k[i] }

// killJudgement is the outcome of judging one kill.
type killJudgement struct {
	verdict   Verdict
	unjudged  bool // no grace known
	unbounded bool // grace 0: nothing to bound
	a         killAttempt
	problem   string
	grace     string // where the grace came from
	sources   []int  // API calls behind the grace
	// expiredShortening: the kill honoured the 1 s the API server set when
	// a shortening's deadline had passed.
	expiredShortening bool
}

func (j killJudgement) evidence(h *history.History) Evidence {
	a := j.a
	return Evidence{
		Key: podRef(a.namespace, a.pod),
		Description: fmt.Sprintf("container %q of pod %s (UID %s) on node %s: %s; %s",
			a.container, podRef(a.namespace, a.pod), a.uid, a.node, j.problem, j.grace),
		Ledger: ledgerEntries(h.Ledger, a.preStopStart, a.preStopEnd, a.prevTerm, a.term, a.kill),
		API:    apiCalls(h.API, j.sources...),
	}
}

// graceUsed is an effective grace period and where it came from.
type graceUsed struct {
	g       int64
	known   bool
	what    string
	sources []int
}

// judgeKill applies the bound to one kill; existed is when its pod object
// surely existed.
func judgeKill(ledger []history.LedgerEntry, idx *deletionIndex, facts *graceFacts, a killAttempt, existed int64) killJudgement {
	j := killJudgement{a: a}
	startAt := a.start()
	start := ledger[startAt]
	stated, statedKnown := int64(0), false
	for _, i := range []int{a.term, a.kill} {
		if i >= 0 && ledger[i].Grace > 0 && (!statedKnown || ledger[i].Grace < stated) {
			stated, statedKnown = ledger[i].Grace, true
		}
	}
	// strict is the grace as the brief of GP-R reads it: the deletions'
	// when the kill followed a deletion of this UID; weak also lets the
	// kubelet's stated grace lower it.
	graces := func(cutoff int64) (strict, weak graceUsed) {
		rg := idx.requested(podRef(a.namespace, a.pod), a.namespace, a.uid, existed, start.T, cutoff)
		fromAPI := graceUsed{g: rg.grace, known: rg.known, sources: rg.sources}
		switch {
		case rg.known && rg.grace == 0:
			fromAPI.what = "effective grace 0: the pod was force deleted or its object seen gone"
		case rg.known:
			fromAPI.what = fmt.Sprintf("effective grace %d s, the smallest a deletion of the pod asked for", rg.grace)
		}
		fromLedger := graceUsed{g: stated, known: statedKnown,
			what: fmt.Sprintf("effective grace %d s, as the kubelet stated it in the ledger", stated)}
		lower := func(x, y graceUsed) graceUsed {
			switch {
			case !x.known:
				return y
			case !y.known || x.g <= y.g:
				return x
			}
			return y
		}
		switch {
		case rg.known && rg.grace == 0:
			return fromAPI, fromAPI
		case rg.known && rg.triggeredBy >= 0 && !rg.unspecified:
			return fromAPI, lower(fromAPI, fromLedger)
		}
		g := lower(fromAPI, fromLedger)
		return g, g
	}
	var termStrict, termWeak, killStrict, killWeak graceUsed
	if a.term >= 0 {
		termStrict, termWeak = graces(ledger[a.term].T)
	}
	if a.kill >= 0 {
		killStrict, killWeak = graces(ledger[a.kill].T)
	}
	if !termStrict.known && !killStrict.known {
		j.unjudged = true
		return j
	}
	j.unbounded = (!termStrict.known || termStrict.g == 0) && (!killStrict.known || killStrict.g == 0)

	check := func(tg, kg graceUsed) (string, graceUsed) {
		if p := killProblem(ledger, a, start, kg); p != "" {
			return p, kg
		}
		if p := termProblem(ledger, a, start, tg); p != "" {
			return p, tg
		}
		return "", graceUsed{}
	}
	p, used := check(termStrict, killStrict)
	if p == "" {
		j.verdict = Ok
		return j
	}
	j.verdict = Illegal
	if termWeak.g < termStrict.g || killWeak.g < killStrict.g {
		last := a.start()
		for _, i := range []int{a.term, a.kill} {
			last = max(last, i)
		}
		switch p2, used2 := check(termWeak, killWeak); {
		case p2 != "":
			p, used = p2, used2
		case stated == 1 && facts.shortenedToOne(a.uid, ledger[last].T):
			// The API server itself shortened the grace to 1 s (a second
			// deletion whose deadline, counted from the first, had passed:
			// kube-apiserver's rule, GP-6, PS-3), and the kubelet honoured
			// that grace, as it must (GP-5).
			j.verdict, j.expiredShortening = Ok, true
			return j
		case facts.onlyDeletionKills(a.uid, ledger[last].T):
			// No probe, eviction or orphan kill could have set the
			// shorter grace: the kubelet computed it wrongly (GP-1).
			p += fmt.Sprintf(" (it honours only the %d s the kubelet stated in the ledger, and the store rules out a probe, eviction or orphan kill: the kubelet computed the grace wrongly, GP-1)", stated)
		default:
			j.verdict = Unknown
			p += fmt.Sprintf(" (it honours the %d s the kubelet stated in the ledger)", stated)
		}
	}
	j.problem, j.grace, j.sources = p, used.what, used.sources
	return j
}

// killProblem says how the KILL of a broke the bound with grace g, or "".
func killProblem(ledger []history.LedgerEntry, a killAttempt, start history.LedgerEntry, g graceUsed) string {
	if a.kill < 0 || !g.known || g.g == 0 {
		return ""
	}
	kill := ledger[a.kill]
	term := a.term
	if term < 0 {
		if a.prevTerm < 0 {
			return fmt.Sprintf("KILL at %s came without TERM", at(ledger, a.kill))
		}
		term = a.prevTerm // the restarted kubelet's KILL follows the first TERM
	}
	grace := time.Duration(g.g) * time.Second
	deadline := start.Scaled.Add(grace)
	bound := ledger[term].Scaled.Add(minShutdown)
	if deadline.After(bound) {
		bound = deadline
	}
	if !kill.Scaled.Before(bound.Add(-GraceTolerance)) {
		return ""
	}
	return fmt.Sprintf("KILL at %s came %s after the kill began at %s and %s after TERM at %s, before max(start + %d s, TERM + 2 s) = %s after the start (tolerance %s)",
		at(ledger, a.kill), seconds(kill.Scaled.Sub(start.Scaled)), at(ledger, a.start()), seconds(kill.Scaled.Sub(ledger[term].Scaled)),
		at(ledger, term), g.g, seconds(bound.Sub(start.Scaled)), GraceTolerance)
}

// termProblem says how the TERM of a broke the bound with grace g, or "":
// TERM came before the grace deadline while the preStop hook demonstrably
// still ran (its end recorded well after TERM).
func termProblem(ledger []history.LedgerEntry, a killAttempt, start history.LedgerEntry, g graceUsed) string {
	if a.term < 0 || a.preStopStart < 0 || a.preStopEnd < a.term || !g.known || g.g == 0 {
		return ""
	}
	term, end := ledger[a.term], ledger[a.preStopEnd]
	deadline := start.Scaled.Add(time.Duration(g.g) * time.Second)
	if !term.Scaled.Before(deadline.Add(-GraceTolerance)) {
		return ""
	}
	if end.Scaled.Sub(term.Scaled) <= GraceTolerance || end.Wall.Sub(term.Wall) <= PreStopRecordingSlack {
		return "" // the hook's end may just have been recorded late
	}
	return fmt.Sprintf("TERM at %s came %s after the preStop hook began at %s, while the hook ran until %s, before the grace deadline of %d s",
		at(ledger, a.term), seconds(term.Scaled.Sub(start.Scaled)), at(ledger, a.preStopStart), at(ledger, a.preStopEnd), g.g)
}

// upperCounts counts the kills the upper bound judged, and those it left
// alone for a fault.
type upperCounts struct{ judged, faulted int }

// statedGrace is the grace the kubelet stated last for kill a (0: none).
func statedGrace(ledger []history.LedgerEntry, a killAttempt) int64 {
	g := int64(0)
	for _, i := range []int{a.term, a.kill} {
		if i >= 0 && ledger[i].Grace > 0 {
			g = ledger[i].Grace
		}
	}
	return g
}

// kubeletAlive reports whether node's kubelet made an API call invoked in
// (from, to].
func kubeletAlive(api []history.APICall, node string, from, to int64) bool {
	k := sort.Search(len(api), func(i int) bool { return api[i].Invoke > from })
	for ; k < len(api) && api[k].Invoke <= to; k++ {
		if n, ok := kubeletNode(api[k].Identity); ok && n == node {
			return true
		}
	}
	return false
}

// faultDuring reports whether a fault was active at some time in [from, to].
func faultDuring(faults []history.Interval, from, to int64) bool {
	for _, f := range faults {
		if f.Start <= to && f.End >= from {
			return true
		}
	}
	return false
}

// shorteningCalls returns the deletions of a's pod that may have caused
// ch: invoked before it was committed, asking for its grace.
func shorteningCalls(api []history.APICall, a killAttempt, ch graceChange) []int {
	var out []int
	for i, c := range api {
		if c.Invoke > ch.t {
			break
		}
		if isPodDeletion(&c) && mayHaveHappened(&c) && c.Namespace == a.namespace && c.Name == a.pod &&
			c.GracePeriodSeconds != nil && *c.GracePeriodSeconds == ch.to && (c.UID == "" || c.UID == a.uid) {
			out = append(out, i)
		}
	}
	return out
}
