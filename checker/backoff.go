package checker

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/podsafe/podsafe/history"
)

// BackoffChecker names the restart back-off checker in results.
const BackoffChecker = "restart-backoff"

// backoffGuarantees are the guarantees the back-off checker judges.
var backoffGuarantees = []string{"LC-6"}

// The restart back-off of LC-6, as the kubelet applies it: the first
// restart of a container waits BackoffInitial, each further one twice the
// one before, at most BackoffMax; a container that ran BackoffReset or more
// before it exited starts over at BackoffInitial.
const (
	BackoffInitial = 10 * time.Second
	BackoffMax     = 5 * time.Minute
	BackoffReset   = 10 * time.Minute
)

// BackoffTolerance is the slack of the back-off bound, in scaled time. The
// kubelet arms the delay when it has seen the exit, on its own reading of
// the cluster clock, and starts the container when its clock has passed
// the delay; the runtime records exit and start on the cluster clock. With
// the kubelet's clock untouched by faults the gap in the ledger is never
// shorter than the delay, so the slack absorbs rounding only; restarts in
// a window where the kubelet's clock was skewed, jumped or paused, or the
// kubelet restarted (its back-off lives in memory), are not judged.
const BackoffTolerance = 500 * time.Millisecond

// backoffResetSlack is how much shorter than BackoffReset a run in the
// ledger may be and still count as resetting the back-off: the ledger's
// start and exit are recorded a moment after the runtime read the times
// the kubelet measures the run by. Counting a reset too readily only
// lowers the delay the checker asks for.
const backoffResetSlack = 5 * time.Second

// backoffFaultMargin widens fault intervals (recorder time) on both sides:
// a fault takes effect a little before its start is recorded and ends a
// little after its end is.
const backoffFaultMargin = 500 * time.Millisecond

// CheckBackoff judges every restart in the ledger, that is every start of
// a container after an exit of the same container of the same UID, against
// LC-6:
//
//   - the restart happens on the node the container ran on;
//   - it is allowed by the pod's restartPolicy (from the store's record of
//     the pod): never under Never, not after exit 0 under OnFailure, and
//     never for a regular init container that exited 0;
//   - it comes no earlier than the back-off delay after the exit: 10 s,
//     20 s, 40 s … capped at 300 s, counted per container of a UID, back to
//     10 s when the run before the exit lasted 10 min (scaled time, within
//     BackoffTolerance);
//   - and it does come: a container whose last exit the policy restarts,
//     of a pod never deleted nor finished, starts again within the
//     longest back-off (owedRestarts).
//
// The kubelet keeps the back-off in memory and reads its own clock view, so
// a restart is not judged (and the count starts over after it) when, between
// the exit and the start, the node's kubelet was crashed, paused or had its
// clock moved by the nemesis, the node lost power or was fenced; a kubelet
// restart during a run also starts the count over. The node is judged on
// every restart, the policy on every one but those whose gap such a fault
// touched (after a power loss a new machine of the same name runs the pod
// afresh). The figures give the observed restart delays; with no restart
// at all the answer is Unknown (see boHasRestart). It is pure, O(n log n) in the ledger, the store
// events and the faults, and answers Unknown when ctx ends or opts.Timeout
// passes first.
func CheckBackoff(ctx context.Context, h *history.History, opts Options) Result {
	return checkOne(ctx, h, opts, BackoffChecker)
}

func checkBackoff(ctx context.Context, v *view, opts Options) Result {
	res, ctx, cancel := startCheck(ctx, opts, BackoffChecker, backoffGuarantees)
	defer cancel()
	st := &stopper{ctx: ctx}
	h := v.h
	ledger := h.Ledger
	runs, ok := v.runs(ctx)
	if !ok {
		return res.cancelled("the restarts")
	}
	byCtr, order := boGroup(runs)
	pods, ok := v.pods(ctx)
	if !ok || ctx.Err() != nil {
		return res.cancelled("the restarts")
	}
	nodes, ok := v.nodes(ctx)
	if !ok {
		return res.cancelled("the restarts")
	}
	dist := newBoDisturbances(h, ledger, nodes.fences)

	var illegal []boViolation
	judged, skipped, restarts := 0, 0, 0
	var maxDelay, minSlack time.Duration
	hasSlack := false
	keys := map[string]bool{}
	levels := map[boCtrKey]int{} // each container's level after its last restart
	for _, k := range order {
		idx := byCtr[k]
		level := -1 // the back-off exponent of the previous restart; -1: none yet or reset
		// sure: the kubelet's own count is known to be level (no fault
		// touched it, no run ended near the reset): the restarts owed
		// after the last exit are then held to it, else to BackoffMax.
		sure := true
		for n := 1; n < len(idx); n++ {
			if st.stopped() {
				return res.cancelled("the restarts")
			}
			prev, cur := runs[idx[n-1]], runs[idx[n]]
			if prev.end == endless {
				level, sure = -1, false
				continue // started again while running: not a restart
			}
			restarts++
			keys[k.uid] = true
			exitE, startE := ledger[prev.end], ledger[cur.start]
			spec := pods.spec(ledger[cur.start].UID)
			poweredOff := exitE.Action == history.LedgerPowerOff
			gapDisturbed := poweredOff || dist.touches(cur.node, exitE.T, startE.T) || dist.touches(prev.node, exitE.T, startE.T)
			runDisturbed := dist.touches(prev.node, ledger[prev.start].T, exitE.T)

			if cur.node != prev.node {
				illegal = append(illegal, boViolation{key: cur.pod, t: startE.T, idx: []int{prev.start, prev.end, cur.start},
					desc: fmt.Sprintf("container %q of pod %s (UID %s) ran on %s until %s and restarted on %s at %s: restarts happen only on the same node",
						k.container, cur.pod, exitE.UID, prev.node, at(ledger, prev.end), cur.node, at(ledger, cur.start))})
			}
			if why := boPolicyForbids(spec, k.container, exitE); why != "" && !gapDisturbed {
				illegal = append(illegal, boViolation{key: cur.pod, t: startE.T, idx: []int{prev.start, prev.end, cur.start},
					desc: fmt.Sprintf("container %q of pod %s (UID %s) exited at %s and restarted at %s, but %s",
						k.container, cur.pod, exitE.UID, at(ledger, prev.end), at(ledger, cur.start), why)})
			}
			gap := startE.Scaled.Sub(exitE.Scaled)
			maxDelay = max(maxDelay, gap)
			ran := exitE.Scaled.Sub(ledger[prev.start].Scaled)
			if gapDisturbed || runDisturbed || boResetUnclear(ran) {
				sure = false
			}
			switch {
			case level < 0 || runDisturbed || ran >= BackoffReset-backoffResetSlack:
				level = 0
			default:
				level++
			}
			if gapDisturbed {
				skipped++
				level = -1 // a new kubelet starts the count over
				continue
			}
			judged++
			want := boDelay(level)
			if slack := gap - want; !hasSlack || slack < minSlack {
				minSlack, hasSlack = slack, true
			}
			if gap < want-BackoffTolerance {
				illegal = append(illegal, boViolation{key: cur.pod, t: startE.T, idx: []int{prev.start, prev.end, cur.start},
					desc: fmt.Sprintf("container %q of pod %s (UID %s) on %s restarted %s after its exit at %s (start at %s), before the back-off of %s due to restart %d in a row (the run before lasted %s; tolerance %s)",
						k.container, cur.pod, exitE.UID, cur.node, seconds(gap), at(ledger, prev.end), at(ledger, cur.start), seconds(want), level+1, seconds(ran), BackoffTolerance)})
			}
		}
		if !sure {
			level = levelUnknown
		}
		levels[k] = level
	}
	owed, restarted := owedRestarts(h, ledger, runs, byCtr, order, levels, pods, dist)
	illegal = append(illegal, owed...)
	res.Stats.Ops, res.Stats.Checked, res.Stats.Keys = restarts, judged, len(keys)
	if restarts > 0 {
		res.Figures = append(res.Figures,
			Figure{Name: "restarts", Value: float64(restarts), Unit: "count"},
			Figure{Name: "restart delay max", Value: maxDelay.Seconds(), Unit: "s"})
		if skipped > 0 {
			res.Figures = append(res.Figures, Figure{Name: "restarts not judged (faults)", Value: float64(skipped), Unit: "count"})
		}
		if hasSlack {
			res.Figures = append(res.Figures, Figure{Name: "restart delay min slack over back-off", Value: minSlack.Seconds(), Unit: "s"})
		}
	}
	note := ""
	if skipped > 0 {
		note = fmt.Sprintf("; %s not judged on back-off: the kubelet restarted, was paused, its clock moved, or the node lost power or was fenced in between", count(skipped, "restart"))
	}
	if restarted > 0 {
		note += fmt.Sprintf("; %s of pods alive at the end ran again after each exit their policy restarts", count(restarted, "container"))
	}
	switch {
	case len(illegal) > 0:
		sort.SliceStable(illegal, func(a, b int) bool { return illegal[a].t < illegal[b].t })
		for _, v := range illegal {
			if len(res.Evidence) >= opts.maxEvidence() {
				break
			}
			res.Evidence = append(res.Evidence, Evidence{Key: v.key, Description: "LC-6: " + v.desc, Ledger: ledgerEntries(ledger, v.idx...)})
		}
		return res.finish(Illegal, fmt.Sprintf("%s broke LC-6 (%s made, %d owed and not made); first: %s%s",
			count(len(illegal), "violation"), count(restarts, "restart"), len(owed), illegal[0].desc, note))
	case restarts == 0:
		return res.finish(Unknown, "not checked: no container restarted")
	case judged == 0:
		return res.finish(Unknown, fmt.Sprintf("no restart could be judged on back-off (%s)%s; node and policy held", count(restarts, "restart"), note))
	}
	return res.finish(Ok, fmt.Sprintf("%s (%s judged on back-off) stayed on their node, obeyed the restart policy and waited at least the back-off of 10 s doubling to 300 s (longest wait %s, tolerance %s)%s",
		count(restarts, "restart"), fmt.Sprint(judged), seconds(maxDelay), BackoffTolerance, note))
}

// Restart liveness: a restart the pod's policy asks for must come within
// twice its back-off (at most BackoffMax) and this slack: the kubelet
// wakes its worker when the back-off ends; the slack covers its
// scheduling, in scaled time, and a starved machine, in wall time.
const (
	owedRestartSlack     = 10 * time.Second // scaled
	owedRestartWallSlack = 2 * time.Second  // wall
)

// levelUnknown is a back-off level past the cap: a container whose count
// the checker cannot follow is owed its restart within BackoffMax.
const levelUnknown = 64

// boResetUnclear reports a run whose length is too near BackoffReset to
// tell whether the kubelet started its count over.
func boResetUnclear(ran time.Duration) bool {
	return ran >= BackoffReset-backoffResetSlack && ran < BackoffReset+backoffResetSlack
}

// livenessWaits says which waits a liveness rule (something owed by a
// time: a restart, a terminal phase) may judge. Any fault may delay what
// is owed (a kubelet cut off, or an API slowed by a raft partition, may
// wait on a call), and so may a kubelet crashed, paused, with its clock
// moved, or a node powered off or fenced (dist); and a kubelet starved of
// CPU: so only a wait no fault overlaps, after which the node's runtime
// recorded something, is judged.
type livenessWaits struct {
	faults     [][2]int64
	lastOnNode map[string]int64
	dist       *boDisturbances
}

func newLivenessWaits(h *history.History, dist *boDisturbances) *livenessWaits {
	l := &livenessWaits{lastOnNode: map[string]int64{}, dist: dist}
	for i := range h.Nemesis {
		f := &h.Nemesis[i]
		end := f.End
		if !f.Healed {
			end = max(h.End, f.End)
		}
		l.faults = append(l.faults, [2]int64{f.Start - int64(backoffFaultMargin), end + int64(backoffFaultMargin)})
	}
	l.faults = boMerge(l.faults)
	for i := range h.Ledger {
		e := &h.Ledger[i]
		l.lastOnNode[e.Node] = max(l.lastOnNode[e.Node], e.T)
	}
	return l
}

// judgeable reports whether the wait on node from from to to (recorder
// time) may be judged.
func (l *livenessWaits) judgeable(node string, from, to int64) bool {
	return l.lastOnNode[node] >= to && !l.dist.touches(node, from, to) && !boOverlaps(l.faults, from, to)
}

// boCtrKey is one container of one pod instance.
type boCtrKey struct{ uid, container string }

// boGroup groups runs by container: each container's runs as indices into
// runs, in start order, and the containers in the order of their first.
func boGroup(runs []run) (map[boCtrKey][]int, []boCtrKey) {
	byCtr := map[boCtrKey][]int{}
	var order []boCtrKey
	for i, r := range runs {
		k := boCtrKey{r.uid, r.container}
		if byCtr[k] == nil {
			order = append(order, k)
		}
		byCtr[k] = append(byCtr[k], i)
	}
	return byCtr, order
}

// backoffApplies: the ledger records a restart, or an exit that owed one
// and never got it (a history with no restart at all may be one where the
// kubelet restarts nothing).
func backoffApplies(v *view) bool {
	if boHasRestart(v.h.Ledger) {
		return true
	}
	runs, ok := v.runs(v.ctx)
	if !ok {
		return false
	}
	pods, ok := v.pods(v.ctx)
	if !ok {
		return false
	}
	nodes, ok := v.nodes(v.ctx)
	if !ok {
		return false
	}
	byCtr, order := boGroup(runs)
	owed, _ := owedRestarts(v.h, v.h.Ledger, runs, byCtr, order, nil, pods, newBoDisturbances(v.h, v.h.Ledger, nodes.fences))
	return len(owed) > 0
}

// owedRestarts judges the other half of LC-6: a container whose last run
// ended in an exit its pod's restartPolicy restarts (Always; OnFailure
// after a non-zero exit; a regular init container's failure unless the
// policy is Never; a sidecar always) must start again within the longest
// back-off (twice it, with slack). It judges only an exit of a pod the
// store lines show neither marked for deletion, removed, Succeeded nor
// Failed by when the restart was due, with no fault anywhere from the exit
// to then, the node fenced or powered off never, and the node's runtime
// recording something after it (its kubelet was not starved); not when
// store events of pods were lost (a deletion may be missing). It returns the violations, and how many containers of such
// pods restarted and were running at the end.
func owedRestarts(h *history.History, ledger []history.LedgerEntry, runs []run, byCtr map[boCtrKey][]int,
	order []boCtrKey, levels map[boCtrKey]int, pods *podIndex, dist *boDisturbances) ([]boViolation, int) {
	if poStoreLost(h.Logs) {
		return nil, 0
	}
	scale := historyScale(h)
	quiet := newLivenessWaits(h, dist)
	var out []boViolation
	restarted := 0
	for _, k := range order {
		idx := byCtr[k]
		last := runs[idx[len(idx)-1]]
		ph := pods.byUID[k.uid]
		if ph == nil {
			continue
		}
		alive := poAliveUntil(ph)
		if last.end == endless {
			if len(idx) > 1 && alive == math.MaxInt64 {
				restarted++
			}
			continue
		}
		exitE := ledger[last.end]
		// The back-off the restart waits: the next level after the last
		// restart, from 10 s again after a long or disturbed run; twice
		// that (within the cap) for slack.
		// The back-off the kubelet waits is at most that of the level
		// after its last restart; a count some fault touched, or a run
		// that ended near the reset, is held to BackoffMax.
		prev, ok := levels[k]
		ran := exitE.Scaled.Sub(ledger[last.start].Scaled)
		var level int
		switch {
		case prev == levelUnknown || boResetUnclear(ran) || dist.touches(last.node, ledger[last.start].T, exitE.T):
			level = levelUnknown
		case !ok || prev < 0 || ran >= BackoffReset+backoffResetSlack:
			level = 0
		default:
			level = prev + 1
		}
		wait := min(2*boDelay(level), BackoffMax) + BackoffTolerance + owedRestartSlack
		dueT := exitE.T + int64(float64(wait)/scale) + int64(owedRestartWallSlack)
		if exitE.Action != history.LedgerExit || dueT > h.End || dueT >= alive || !quiet.judgeable(last.node, exitE.T, dueT) {
			continue
		}
		spec := pods.spec(k.uid)
		if !poHasContainer(spec, k.container) || boPolicyForbids(spec, k.container, exitE) != "" {
			continue
		}
		until := "to the history's end"
		if alive != math.MaxInt64 {
			until = "until it was marked for deletion, removed or finished"
		}
		why := fmt.Sprintf("twice its back-off of %s due to restart %d in a row, at most %s", seconds(boDelay(level)), level+1, BackoffMax)
		if level == levelUnknown {
			why = fmt.Sprintf("the longest back-off, %s: a fault touched its count or a run ended near the reset", BackoffMax)
		}
		out = append(out, boViolation{key: last.pod, t: dueT, idx: []int{last.start, last.end},
			desc: fmt.Sprintf("container %q of pod %s (UID %s) on %s exited at %s (code %d) and was not started again, though its pod's restartPolicy %s restarts it, within %s (%s, with slack %s scaled and %s wall); the pod stayed %s %s past the exit",
				k.container, last.pod, exitE.UID, last.node, at(ledger, last.end), exitE.ExitCode, policyName(spec), seconds(wait), why,
				owedRestartSlack, owedRestartWallSlack, until, seconds(time.Duration(float64(min(alive, h.End)-exitE.T)*scale)))})
	}
	return out, restarted
}

// poAliveUntil is the recorder time of the first store line that marks
// the pod for deletion, removes it or shows it Succeeded or Failed, and
// math.MaxInt64 when none does: until then a container its policy
// restarts is owed its restart.
func poAliveUntil(ph *poPodHistory) int64 {
	for _, e := range ph.events {
		if e.typ == history.StoreDeleted {
			return e.t
		}
		if p := e.pod; p != nil && (p.Metadata.DeletionTimestamp != "" || p.Status.Phase == "Succeeded" || p.Status.Phase == "Failed") {
			return e.t
		}
	}
	return math.MaxInt64
}

// poHasContainer reports whether spec has a container or init container
// of that name.
func poHasContainer(spec *poPod, name string) bool {
	if spec == nil {
		return false
	}
	for _, group := range [][]poContainer{spec.Spec.InitContainers, spec.Spec.Containers} {
		for _, c := range group {
			if c.Name == name {
				return true
			}
		}
	}
	return false
}

// policyName is the pod's restartPolicy as the API defaults it.
func policyName(spec *poPod) string {
	if spec.Spec.RestartPolicy == "" {
		return poAlways
	}
	return spec.Spec.RestartPolicy
}

// boHasRestart reports whether the ledger records a restart: a start of a
// container after an exit or power-off of the same container of the same
// UID, which CheckBackoff judges.
func boHasRestart(ledger []history.LedgerEntry) bool {
	type ctr struct{ uid, container string }
	ended := map[ctr]bool{}
	for i := range ledger {
		e := &ledger[i]
		k := ctr{uidKey(e), e.Container}
		switch e.Action {
		case history.LedgerExit, history.LedgerPowerOff:
			ended[k] = true
		case history.LedgerStart:
			if ended[k] {
				return true
			}
		}
	}
	return false
}

// boViolation is one broken rule about one restart.
type boViolation struct {
	key  string
	t    int64
	idx  []int // ledger indices
	desc string
}

// boDelay is the back-off before the restart with exponent level.
func boDelay(level int) time.Duration {
	d := BackoffInitial
	for range level {
		d *= 2
		if d >= BackoffMax {
			return BackoffMax
		}
	}
	return d
}

// boPolicyForbids says why the pod's restart policy forbids restarting a
// container that exited as exit records, or "" (also when the spec is
// unknown).
func boPolicyForbids(spec *poPod, container string, exit history.LedgerEntry) string {
	if spec == nil || exit.Action != history.LedgerExit {
		return ""
	}
	for _, c := range spec.Spec.InitContainers {
		if c.Name != container {
			continue
		}
		switch {
		case c.RestartPolicy == poAlways:
			return "" // a sidecar restarts whatever the pod's policy
		case spec.Spec.RestartPolicy == poNever:
			return "the pod's restartPolicy is Never"
		case exit.ExitCode == 0:
			return "an init container that exited 0 is done"
		}
		return ""
	}
	switch spec.Spec.RestartPolicy {
	case poNever:
		return "the pod's restartPolicy is Never"
	case poOnFailure:
		if exit.ExitCode == 0 {
			return "the pod's restartPolicy is OnFailure and the container exited 0"
		}
	}
	return ""
}

// boDisturbances are, per node, the recorder-time intervals in which its
// kubelet may have lost its back-off or misread the clock.
type boDisturbances struct {
	byNode map[string][][2]int64
	all    [][2]int64 // faults on every node's clock
}

func newBoDisturbances(h *history.History, ledger []history.LedgerEntry, fences map[string][]int64) *boDisturbances {
	d := &boDisturbances{byNode: map[string][][2]int64{}}
	margin := int64(backoffFaultMargin)
	end := h.End
	for i := range h.Nemesis {
		f := &h.Nemesis[i]
		iv := [2]int64{f.Start - margin, f.End + margin}
		if !f.Healed {
			iv[1] = max(end, f.End) + margin
		}
		// A kubelet crashed, paused, powered off or with its clock moved
		// may lose its back-off or misread it; a cut only delays it.
		switch e := f.FaultEffect(); {
		case e == history.EffectClock && f.Everywhere():
			d.all = append(d.all, iv)
			continue
		case e != history.EffectClock && e != history.EffectPause && e != history.EffectKill && e != history.EffectPowerOff:
			continue
		}
		for _, node := range f.FaultNodes() {
			d.byNode[node] = append(d.byNode[node], iv)
		}
	}
	for i := range ledger {
		e := &ledger[i]
		if e.Action == history.LedgerPowerOff {
			d.byNode[e.Node] = append(d.byNode[e.Node], [2]int64{e.T - margin, e.T + margin})
		}
	}
	for node, ts := range fences {
		for _, t := range ts {
			// Fenced until an admin unfences it: to the end of the history.
			d.byNode[node] = append(d.byNode[node], [2]int64{t - margin, max(end, t) + margin})
		}
	}
	for node, ivs := range d.byNode {
		d.byNode[node] = boMerge(ivs)
	}
	d.all = boMerge(d.all)
	return d
}

// boMerge sorts intervals and merges the overlapping ones, so that each
// list can be searched.
func boMerge(ivs [][2]int64) [][2]int64 {
	sort.Slice(ivs, func(a, b int) bool { return ivs[a][0] < ivs[b][0] })
	var out [][2]int64
	for _, iv := range ivs {
		if n := len(out); n > 0 && iv[0] <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], iv[1])
			continue
		}
		out = append(out, iv)
	}
	return out
}

// touches reports whether a disturbance of node overlaps [from, to].
func (d *boDisturbances) touches(node string, from, to int64) bool {
	return boOverlaps(d.byNode[node], from, to) || boOverlaps(d.all, from, to)
}

func boOverlaps(ivs [][2]int64, from, to int64) bool {
	// The first interval ending at or after from; it overlaps if it starts
	// by to.
	i := sort.Search(len(ivs), func(i int) bool { return ivs[i][1] >= from })
	return i < len(ivs) && ivs[i][0] <= to
}
