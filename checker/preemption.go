package checker

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

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
