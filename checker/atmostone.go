package checker

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/podsafe/podsafe/history"
)

// AtMostOneChecker names the at-most-one checker in results.
const AtMostOneChecker = "at-most-one"

// atMostOneGuarantees are the guarantees the at-most-one checker judges:
// PS-11 (at most one process per pet identity), PS-1 and LC-3 (a pod runs on
// exactly one node), PS-12 (no new instance of a pet while the old may
// still run, partitioned), and PS-7 (a ReplicaSet's overlap is expected, reported,
// and never taken for a pet's).
var atMostOneGuarantees = []string{"PS-1", "PS-11", "PS-12", "LC-3", "PS-7"}

// CheckAtMostOne judges, from the ledger alone, what really ran:
//
//   - PS-11: the container runs of different UIDs of one pet identity
//     (namespace/name) never overlap. A run lasts from its start entry to the
//     container's exit or power-off, in ledger order; one with neither runs to
//     the end of the history (a truncated history keeps what it shows). A pet
//     is a pod named <set>-<ordinal> that the API history shows the pet
//     controller created: by the UID its create returned, or by the name the
//     create asked for; when the history holds no create of the pod, the
//     store's record of it owned by a StatefulSet (an existing cluster,
//     whose controllers' calls are not recorded).
//   - PS-1, LC-3: every UID runs on one node.
//
// A ReplicaSet's replacement that starts while its predecessor is being
// deleted is reported as expected (PS-7), never as a violation; so are pods
// of other creators that reuse a force-deleted pod's name (LC-13). When the
// history records no pet-controller creates at all, same-name overlaps of
// pods named like pets cannot be judged and the verdict is Unknown.
//
// It is pure, O(n log n) in the ledger and API history, and answers Unknown
// when ctx ends or opts.Timeout passes first.
func CheckAtMostOne(ctx context.Context, h *history.History, opts Options) Result {
	return checkOne(ctx, h, opts, AtMostOneChecker)
}

func checkAtMostOne(ctx context.Context, v *view, opts Options) Result {
	res, ctx, cancel := startCheck(ctx, opts, AtMostOneChecker, atMostOneGuarantees)
	defer cancel()
	h := v.h
	ledger := h.Ledger
	runs, ok := v.runs(ctx)
	if !ok {
		return res.cancelled("the container runs")
	}
	if len(runs) == 0 {
		return res.finish(Unknown, "not checked: the ledger records no container start")
	}
	res.Stats.Ops = len(runs)
	st := &stopper{ctx: ctx}

	nodeEv, nodeBad := oneNodePerUID(ledger, opts.maxEvidence(), st)
	if st.ctx.Err() != nil {
		return res.cancelled(count(len(runs), "container run"))
	}

	creators, ok := v.creators(ctx)
	if !ok {
		return res.cancelled(count(len(runs), "container run"))
	}
	pets := creators.pets
	kinds := map[string]podKind{} // uid -> kind
	byPod := map[string][]run{}
	unknown := map[string]bool{} // UIDs no recorded create explains
	podOf := map[string]string{} // their pod identities
	for _, r := range runs {
		if _, ok := kinds[r.uid]; !ok {
			kinds[r.uid] = creators.classify(h.API, r.uid, r.pod)
			if kinds[r.uid] == kindUnknown {
				unknown[r.uid], podOf[r.uid] = true, r.pod
			}
		}
		byPod[r.pod] = append(byPod[r.pod], r)
	}
	if len(unknown) > 0 {
		// Only then is the store read for the pods' controller owners.
		owners := ownerKinds(h.Store, unknown)
		for uid, k := range owners {
			if k == "StatefulSet" {
				// The store shows pets even where no create call is recorded.
				pets = true
			}
			kinds[uid] = withOwners(kinds[uid], k, podOf[uid])
		}
	}
	pods := make([]string, 0, len(byPod))
	for p := range byPod {
		pods = append(pods, p)
	}
	sort.Strings(pods)

	nodes, ok := v.nodes(ctx)
	if !ok {
		return res.cancelled(count(len(runs), "container run"))
	}
	fences := nodes.fences
	var petEv, fencedEv []Evidence
	var firstPet string
	petBad, petsRun, otherOverlaps, undecided, fencedRuns := 0, 0, 0, 0, 0
	for _, pod := range pods {
		if st.stopped() {
			return res.cancelled(count(len(runs), "container run"))
		}
		all := byPod[pod]
		var petRuns []run
		for _, r := range all {
			if kinds[r.uid] == kindPet {
				if cut, ok := fenceCut(ledger, fences, r); ok {
					// What the run did after its node's fence cannot reach
					// anyone (PS-14): for at-most-one it ended there.
					fencedRuns++
					if len(fencedEv) < opts.maxEvidence() {
						fencedEv = append(fencedEv, Evidence{Key: pod, Expected: true,
							Description: fmt.Sprintf("pet %s UID %s on node %s was still running when the store recorded node %s fenced (%s); it counts as ended there",
								pod, r.uid, r.node, r.node, at(ledger, cut)),
							Ledger: ledgerEntries(ledger, r.start, cut, r.end)})
					}
					r.end = cut
				}
				petRuns = append(petRuns, r)
			}
		}
		if len(petRuns) > 0 {
			petsRun++
			res.Stats.Checked += len(petRuns)
			if a, b, ok := firstOverlap(petRuns); ok {
				petBad++
				if firstPet == "" {
					firstPet = fmt.Sprintf("%s (UID %s on node %s still ran when UID %s started on node %s)", pod, a.uid, a.node, b.uid, b.node)
				}
				if len(petEv) < opts.maxEvidence() {
					petEv = append(petEv, petOverlapEvidence(h, pod, a, b))
				}
			}
		}
		// Same-name overlaps of pods that are not both pets: allowed after a
		// force deletion (LC-13), unless the history cannot say what they
		// are.
		if a, b, ok := firstOverlap(all); ok && !(kinds[a.uid] == kindPet && kinds[b.uid] == kindPet) {
			name := pod[strings.IndexByte(pod, '/')+1:]
			if kinds[a.uid] == kindUnknown && kinds[b.uid] == kindUnknown && isPetName(name) && !pets {
				undecided++
			} else {
				otherOverlaps++
			}
		}
	}
	res.Stats.Keys = petsRun

	expected, expectedEv := replicaOverlaps(h, runs, kinds, opts.maxEvidence())

	var notes []string
	if expected > 0 {
		notes = append(notes, fmt.Sprintf("%s started while a predecessor of the same ReplicaSet was being deleted, as PS-7 allows",
			count(expected, "ReplicaSet replacement")))
	}
	if fencedRuns > 0 {
		notes = append(notes, fmt.Sprintf("%s kept running on a node after its fence was recorded and count as ended at the fence (PS-14)",
			count(fencedRuns, "pet container run")))
	}
	if otherOverlaps > 0 {
		notes = append(notes, fmt.Sprintf("%s ran two UIDs at once, allowed for pods that are not pets (a force-deleted pod's name may be reused, LC-13)",
			count(otherOverlaps, "non-pet pod name")))
	}
	suffix := ""
	if len(notes) > 0 {
		suffix = "; " + strings.Join(notes, "; ")
	}

	res.Evidence = append(append(append(petEv, nodeEv...), expectedEv...), fencedEv...)
	switch {
	case petBad > 0 || nodeBad > 0:
		var parts []string
		if petBad > 0 {
			parts = append(parts, fmt.Sprintf("%s ran two UIDs at once (PS-11), first %s", count(petBad, "pet"), firstPet))
		}
		if nodeBad > 0 {
			parts = append(parts, fmt.Sprintf("%s ran on two nodes (LC-3, PS-1), first %s", count(nodeBad, "UID"), nodeEv[0].Key))
		}
		return res.finish(Illegal, strings.Join(parts, "; ")+suffix)
	case undecided > 0:
		return res.finish(Unknown, fmt.Sprintf("%s ran two UIDs at once, but the history records no pet-controller create, so whether they are pets is unknown%s",
			count(undecided, "pet-like pod name"), suffix))
	}
	if petsRun == 0 && !pets && otherOverlaps == 0 {
		return res.finish(Ok, fmt.Sprintf("no pod name ran two UIDs at once (%s) and every UID ran on one node; the history records no pet-controller create, so no pod is known to be a pet%s",
			count(len(runs), "container run"), suffix))
	}
	return res.finish(Ok, fmt.Sprintf("no pet ran two UIDs at once (%s, %s of %s) and every UID ran on one node%s",
		count(petsRun, "pet"), count(res.Stats.Checked, "pet container run"), count(len(runs), "container run"), suffix))
}

// oneNodePerUID finds the UIDs whose runtime entries name two nodes (LC-3):
// for each, the first entry on its first node and the first on another.
func oneNodePerUID(ledger []history.LedgerEntry, maxEvidence int, st *stopper) ([]Evidence, int) {
	first := map[string]int{} // uid -> index of its first runtime entry
	flagged := map[string]bool{}
	var ev []Evidence
	bad := 0
	for i := range ledger {
		e := &ledger[i]
		if st.stopped() {
			return ev, bad
		}
		if e.UID == "" || !isRuntimeAction(e.Action) {
			continue
		}
		j, ok := first[e.UID]
		if !ok {
			first[e.UID] = i
			continue
		}
		if ledger[j].Node == e.Node || flagged[e.UID] {
			continue
		}
		flagged[e.UID] = true
		bad++
		if len(ev) < maxEvidence {
			ev = append(ev, Evidence{
				Key: e.UID,
				Description: fmt.Sprintf("UID %s of pod %s ran on node %s (%s %s) and on node %s (%s %s); a pod runs on one node only",
					e.UID, entryPod(e), ledger[j].Node, ledger[j].Action, at(ledger, j), e.Node, e.Action, at(ledger, i)),
				Ledger: ledgerEntries(ledger, j, i),
			})
		}
	}
	return ev, bad
}

// firstOverlap finds, among runs of one pod identity, a run that starts
// while a run of another UID is still going, the earliest such start; a is
// the run still going (the one that ends last), b the one starting. It sorts
// runs by start and sweeps once, keeping the two latest-ending runs of
// different UIDs.
func firstOverlap(runs []run) (a, b run, ok bool) {
	sorted := append([]run(nil), runs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].start < sorted[j].start })
	var best, second *run // best ends last; second ends last among other UIDs than best's
	for i := range sorted {
		x := &sorted[i]
		cand := best
		if best != nil && best.uid == x.uid {
			cand = second
		}
		if cand != nil && cand.end > x.start {
			return *cand, *x, true
		}
		switch {
		case best == nil || x.end > best.end:
			if best != nil && best.uid != x.uid {
				second = best
			}
			best = x
		case x.uid != best.uid && (second == nil || x.end > second.end):
			second = x
		}
	}
	return run{}, run{}, false
}

// petOverlapEvidence shows a pet running twice: the two runs, and the API
// calls that explain how the second came to be (the create of each UID, and
// the deletions of the name between the first's start and the second's).
func petOverlapEvidence(h *history.History, pod string, a, b run) Evidence {
	ledger := h.Ledger
	until := "is still running at the end of the history"
	if a.end != endless {
		until = fmt.Sprintf("ran until its %s at %s", ledger[a.end].Action, at(ledger, a.end))
	}
	ev := Evidence{
		Key: pod,
		Description: fmt.Sprintf("pet %s ran twice at once: UID %s (container %q on node %s) started at %s and %s, but UID %s (container %q on node %s) started at %s",
			pod, a.uid, a.container, a.node, at(ledger, a.start), until, b.uid, b.container, b.node, at(ledger, b.start)),
		Ledger: ledgerEntries(ledger, a.start, b.start, a.end),
	}
	from, to := ledger[a.start].T, ledger[b.start].T
	var calls []int
	for i := range h.API {
		c := &h.API[i]
		switch {
		case isPodCreate(c) && (c.UID == a.uid || c.UID == b.uid):
			calls = append(calls, i)
		case isPodDeletion(c) && podRef(c.Namespace, c.Name) == pod && c.Invoke >= from && c.Invoke <= to && len(calls) < 8:
			calls = append(calls, i)
		}
	}
	ev.API = apiCalls(h.API, calls...)
	return ev
}

// replicaOverlaps counts, per ReplicaSet, the replicas that started while
// another replica of the same set was being deleted (from its first
// deletion request or first TERM or preStop, until its last run ended): the
// overlap PS-7 allows. It returns the count and evidence, marked expected,
// for the first few.
func replicaOverlaps(h *history.History, runs []run, kinds map[string]podKind, maxEvidence int) (int, []Evidence) {
	ledger := h.Ledger
	type replica struct {
		uid, pod     string
		firstStart   int   // ledger index
		startT, endT int64 // recorder times; endT is +∞ while it runs
		deleting     int64 // when its deletion began; +∞ when it never did
		why          string
		whyEntry     int // ledger index behind deleting, or -1
		whyCall      int // API call behind deleting, or -1
	}
	reps := map[string]*replica{}
	for _, r := range runs {
		if kinds[r.uid] != kindReplica {
			continue
		}
		rep := reps[r.uid]
		if rep == nil {
			rep = &replica{uid: r.uid, pod: r.pod, firstStart: r.start, startT: ledger[r.start].T,
				deleting: math.MaxInt64, whyEntry: -1, whyCall: -1}
			reps[r.uid] = rep
		}
		rep.endT = max(rep.endT, r.endT(ledger))
	}
	if len(reps) == 0 {
		return 0, nil
	}
	for i := range ledger {
		e := &ledger[i]
		if e.Action != history.LedgerTerm && e.Action != history.LedgerPreStopStart {
			continue
		}
		rep := reps[e.UID]
		if rep == nil || e.T >= rep.deleting {
			continue
		}
		rep.deleting, rep.whyEntry, rep.whyCall = e.T, i, -1
		rep.why = fmt.Sprintf("its %s at %s", e.Action, at(ledger, i))
	}
	for i := range h.API {
		c := &h.API[i]
		rep := reps[c.UID]
		if rep == nil || !isPodDeletion(c) || !mayHaveHappened(c) || c.Invoke >= rep.deleting {
			continue
		}
		rep.deleting, rep.whyEntry, rep.whyCall = c.Invoke, -1, i
		rep.why = "the deletion request " + callRef(c)
	}

	sets := map[string][]*replica{}
	for _, rep := range reps {
		k := replicaSetOf(rep.pod)
		sets[k] = append(sets[k], rep)
	}
	names := make([]string, 0, len(sets))
	for k := range sets {
		names = append(names, k)
	}
	sort.Strings(names)
	total := 0
	var ev []Evidence
	for _, set := range names {
		reps := sets[set]
		// (By UID among equal starts: the replicas come from a map.)
		sort.Slice(reps, func(i, j int) bool {
			if reps[i].startT != reps[j].startT {
				return reps[i].startT < reps[j].startT
			}
			return reps[i].uid < reps[j].uid
		})
		for _, old := range reps {
			if old.deleting == math.MaxInt64 {
				continue
			}
			// Replicas whose first start falls inside (deleting, endT).
			lo := sort.Search(len(reps), func(i int) bool { return reps[i].startT > old.deleting })
			hi := max(lo, sort.Search(len(reps), func(i int) bool { return reps[i].startT >= old.endT }))
			total += hi - lo
			if old.startT > old.deleting && old.startT < old.endT {
				total-- // itself: deleted before it started
			}
			for _, nw := range reps[lo:hi] {
				if len(ev) >= maxEvidence {
					break
				}
				if nw.uid == old.uid {
					continue
				}
				e := Evidence{
					Key:      set,
					Expected: true,
					Description: fmt.Sprintf("expected (PS-7): replica %s (UID %s) of ReplicaSet %s started at %s while replica %s (UID %s) was being deleted since %s",
						nw.pod, nw.uid, set, at(ledger, nw.firstStart), old.pod, old.uid, old.why),
					Ledger: ledgerEntries(ledger, old.whyEntry, nw.firstStart),
				}
				if old.whyCall >= 0 {
					e.API = apiCalls(h.API, old.whyCall)
				}
				ev = append(ev, e)
			}
		}
	}
	return total, ev
}

// nodeConditionTrue decodes a Node object and reports whether its
// condition of type typ has status True; ok is false when the object does
// not decode.
func nodeConditionTrue(object []byte, typ string) (isTrue, ok bool) {
	var n struct {
		Status struct {
			Conditions []poCondition `json:"conditions"`
		} `json:"status"`
	}
	if json.Unmarshal(object, &n) != nil {
		return false, false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == typ && c.Status == "True" {
			isTrue = true
		}
	}
	return isTrue, true
}

// fencedConditionType is the Node condition the fencing controller sets
// (fencing.FencedCondition; the checker does not import the system).
const fencedConditionType = "podsafe.io/Fenced"

// fenceCut returns the ledger index at which r's node was first recorded
// fenced after r started, when that is before r ended.
func fenceCut(ledger []history.LedgerEntry, fences map[string][]int64, r run) (int, bool) {
	started := ledger[r.start].T
	for _, f := range fences[r.node] {
		if f < started {
			continue
		}
		end := len(ledger)
		if r.end != endless {
			end = r.end
		}
		for i := r.start + 1; i < end; i++ {
			if ledger[i].T >= f {
				return i, true
			}
		}
		return 0, false
	}
	return 0, false
}
