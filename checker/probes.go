package checker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/podsafe/podsafe/history"
)

// ProbeChecker names the probe checker in results.
const ProbeChecker = "probes"

// probeGuarantees are the guarantees the probe checker judges.
var probeGuarantees = []string{"LC-9"}

// Probe defaults of the Kubernetes API, as the kubelet applies them (LC-9).
const (
	probeDefaultFailures  = 3
	probeDefaultSuccesses = 1
)

// ProbeDelayTolerance is the slack of the initial-delay bound, in scaled
// time: the kubelet counts a probe's initial delay from its own reading of
// the clock once the runtime has started the container, and the runtime
// records the start and each probe on the same clock, so outside the
// faults that move a kubelet's clock (not judged) the slack absorbs
// rounding only.
const ProbeDelayTolerance = 100 * time.Millisecond

// ProbeKillTolerance is how long, in recorder time, a container may go on
// without a kill after the probe answer that made its startup or liveness
// probe fail failureThreshold times in a row: the kubelet begins the kill
// (preStop, else TERM) as it takes that answer, so the slack covers only
// scheduling on a loaded machine. Answers in the last ProbeKillTolerance
// of the history are not judged on it.
const ProbeKillTolerance = 5 * time.Second

// CheckProbes judges every probe answer in the ledger and what the kubelet
// did with it, against LC-9 and the probes of the pod's spec (from the
// store's record of the pod):
//
//   - a container is probed only by probes its spec has;
//   - no probe runs before its initialDelaySeconds from the container's
//     start (within ProbeDelayTolerance);
//   - while a container has a startup probe that has not succeeded, its
//     liveness and readiness probes do not run, and once it has, the
//     startup probe runs no more;
//   - when a startup or liveness probe has failed failureThreshold times in
//     a row, the container is killed (preStop, TERM, KILL or its end follows
//     within ProbeKillTolerance) and that probe runs no more;
//   - a kill the kubelet says is for a failed probe comes only after that
//     probe failed failureThreshold times in a row;
//   - the store never shows a container with a readiness probe ready before
//     that probe has once succeeded (readiness is Failure before its first
//     success and its initial delay).
//
// A new kubelet starts its probes over, so what spans a kubelet crash,
// pause, clock fault, power loss or fence on the container's node is not
// judged on the rules that count (initial delay, startup stopping, probing
// after the threshold, kill due); the rest hold across them. With no probe
// answer in the ledger the answer is Unknown. It is pure, O(n log n) in the
// ledger and the store events, and answers Unknown when ctx ends or
// opts.Timeout passes first.
func CheckProbes(ctx context.Context, h *history.History, opts Options) Result {
	return checkOne(ctx, h, opts, ProbeChecker)
}

// prProbe is the part of a container probe the checker reads.
type prProbe struct {
	InitialDelaySeconds int32 `json:"initialDelaySeconds"`
	PeriodSeconds       int32 `json:"periodSeconds"`
	FailureThreshold    int32 `json:"failureThreshold"`
	SuccessThreshold    int32 `json:"successThreshold"`
}

func (p *prProbe) failures() int {
	if p.FailureThreshold > 0 {
		return int(p.FailureThreshold)
	}
	return probeDefaultFailures
}

func (p *prProbe) delay() time.Duration { return time.Duration(p.InitialDelaySeconds) * time.Second }

// prContainer is a container's probes by kind (history.ProbeStartup ...).
type prContainer map[string]*prProbe

// prPodSpec decodes the probes of a pod object's containers.
type prPodSpec struct {
	Spec struct {
		InitContainers []prSpecContainer `json:"initContainers"`
		Containers     []prSpecContainer `json:"containers"`
	} `json:"spec"`
}

type prSpecContainer struct {
	Name           string   `json:"name"`
	StartupProbe   *prProbe `json:"startupProbe"`
	LivenessProbe  *prProbe `json:"livenessProbe"`
	ReadinessProbe *prProbe `json:"readinessProbe"`
}

// prSpecs returns, per UID, the probes of each container of the pod (a
// sidecar's too) as first recorded (a pod's probes never change), for the UIDs asked for;
// a UID whose pod the store lines do not hold, or whose object does not
// decode, is missing.
func prSpecs(pi *podIndex, uids map[string]bool) map[string]map[string]prContainer {
	out := map[string]map[string]prContainer{}
	for uid := range uids {
		ph := pi.byUID[uid]
		if ph == nil || len(ph.events) == 0 {
			continue
		}
		var ps prPodSpec
		if err := json.Unmarshal(pi.store[ph.events[0].store].Object, &ps); err != nil {
			continue
		}
		ctrs := map[string]prContainer{}
		for _, c := range append(ps.Spec.InitContainers, ps.Spec.Containers...) {
			pc := prContainer{}
			for kind, p := range map[string]*prProbe{history.ProbeStartup: c.StartupProbe,
				history.ProbeLiveness: c.LivenessProbe, history.ProbeReadiness: c.ReadinessProbe} {
				if p != nil {
					pc[kind] = p
				}
			}
			ctrs[c.Name] = pc
		}
		out[uid] = ctrs
	}
	return out
}

// prWhat names one container run in a violation's description.
type prWhat struct {
	r   run
	uid string
}

func (w prWhat) String() string {
	return fmt.Sprintf("container %q of pod %s (UID %s) on %s", w.r.container, w.r.pod, w.uid, w.r.node)
}

// prKey is one container of one pod instance (uidKey, container name).
type prKey struct{ uid, container string }

// prViolation is one broken rule.
type prViolation struct {
	key  string
	t    int64
	idx  []int // ledger indices
	desc string
}

func checkProbes(ctx context.Context, v *view, opts Options) Result {
	res, ctx, cancel := startCheck(ctx, opts, ProbeChecker, probeGuarantees)
	defer cancel()
	st := &stopper{ctx: ctx}
	h := v.h
	ledger := h.Ledger
	runs, ok := v.runs(ctx)
	if !ok {
		return res.cancelled("the probes")
	}
	pi, ok := v.pods(ctx)
	if !ok {
		return res.cancelled("the probes")
	}
	nodes, ok := v.nodes(ctx)
	if !ok {
		return res.cancelled("the probes")
	}
	dist := newBoDisturbances(h, ledger, nodes.fences)

	// The probe answers and probe kills of each run, in ledger order.
	byCtr := map[prKey][]int{} // indices into runs, in start order
	for i, r := range runs {
		k := prKey{r.uid, r.container}
		byCtr[k] = append(byCtr[k], i)
	}
	acts := make(map[int][]int) // run index → ledger indices of its probes and kills
	uids := map[string]bool{}
	answers := 0
	for i := range ledger {
		if st.stopped() {
			return res.cancelled("the probes")
		}
		e := &ledger[i]
		switch e.Action {
		case history.LedgerProbe:
			answers++
		case history.LedgerPreStopStart, history.LedgerTerm, history.LedgerKill:
		default:
			continue
		}
		idx := byCtr[prKey{uidKey(e), e.Container}]
		// The run going at i: the last one started before it.
		j := sort.Search(len(idx), func(n int) bool { return runs[idx[n]].start > i }) - 1
		if j < 0 || runs[idx[j]].end < i {
			continue // an answer about an exited container, or no start recorded
		}
		acts[idx[j]] = append(acts[idx[j]], i)
		uids[runs[idx[j]].uid] = true
	}
	// Every pod with a readiness probe is judged on its ready containers,
	// probed or not.
	for _, ph := range pi.instances {
		if len(ph.events) > 0 && bytes.Contains(pi.store[ph.events[0].store].Object, []byte(`"readinessProbe"`)) {
			uids[ph.uid] = true
		}
	}
	specs := prSpecs(pi, uids)

	var illegal []prViolation
	bad := func(r run, t int64, desc string, idx ...int) {
		illegal = append(illegal, prViolation{key: r.pod, t: t, idx: append([]int{r.start}, idx...), desc: desc})
	}
	judgedRuns, kills, unknownSpec, skipped := 0, 0, 0, 0
	successes := map[prKey]int64{} // the first readiness Success of each container, recorder time
	ordered := make([]int, 0, len(acts))
	for ri := range acts {
		ordered = append(ordered, ri)
	}
	sort.Ints(ordered)
	for _, ri := range ordered {
		if st.stopped() {
			return res.cancelled("the probes")
		}
		r := runs[ri]
		ctrs, known := specs[r.uid]
		if !known {
			unknownSpec++
			continue
		}
		judgedRuns++
		probes := ctrs[r.container]
		start := ledger[r.start]
		startupOK := -1           // ledger index of the first startup Success
		fails := map[string]int{} // consecutive Failures per kind
		tripped := map[string]int{}
		for _, i := range acts[ri] {
			e := &ledger[i]
			// what names the container in a violation; built only for one.
			what := prWhat{r, e.UID}
			if e.Action != history.LedgerProbe {
				if e.Reason == "" {
					continue
				}
				kills++
				kind := history.ProbeLiveness
				if e.Reason == history.KillStartupProbe {
					kind = history.ProbeStartup
				}
				p := probes[kind]
				switch {
				case p == nil:
					bad(r, e.T, fmt.Sprintf("%s got %s for reason %s at %s, but has no %s probe", what, e.Action, e.Reason, at(ledger, i), kind), i)
				case fails[kind] < p.failures():
					bad(r, e.T, fmt.Sprintf("%s got %s for reason %s at %s after %s of its %s probe in a row, before its failureThreshold of %d",
						what, e.Action, e.Reason, at(ledger, i), count(fails[kind], "failure"), kind, p.failures()), i)
				}
				continue
			}
			p := probes[e.Probe]
			if p == nil {
				bad(r, e.T, fmt.Sprintf("%s was given a %s probe at %s, but its spec has none", what, e.Probe, at(ledger, i)), i)
				continue
			}
			// The initial delay, from the container's start.
			if early := start.Scaled.Add(p.delay()).Sub(e.Scaled); early > ProbeDelayTolerance {
				if dist.touches(r.node, start.T, e.T) {
					skipped++
				} else {
					bad(r, e.T, fmt.Sprintf("%s was given its %s probe at %s, %s after its start at %s, before its initialDelaySeconds of %d (tolerance %s)",
						what, e.Probe, at(ledger, i), seconds(e.Scaled.Sub(start.Scaled)), at(ledger, r.start), p.InitialDelaySeconds, ProbeDelayTolerance), i)
				}
			}
			// The startup probe holds the others off, and stops once it
			// succeeded.
			if probes[history.ProbeStartup] != nil {
				switch {
				case e.Probe != history.ProbeStartup && startupOK < 0:
					bad(r, e.T, fmt.Sprintf("%s was given its %s probe at %s before its startup probe succeeded", what, e.Probe, at(ledger, i)), i)
				case e.Probe == history.ProbeStartup && startupOK >= 0:
					if dist.touches(r.node, ledger[startupOK].T, e.T) {
						skipped++
					} else {
						bad(r, e.T, fmt.Sprintf("%s was given its startup probe again at %s after it succeeded at %s", what, at(ledger, i), at(ledger, startupOK)), startupOK, i)
					}
				}
			}
			// A probe that tripped runs no more: the container is being
			// killed (startup, liveness).
			if t, ok := tripped[e.Probe]; ok {
				if dist.touches(r.node, ledger[t].T, e.T) {
					skipped++
					delete(tripped, e.Probe)
				} else {
					bad(r, e.T, fmt.Sprintf("%s was given its %s probe at %s, after it had failed its failureThreshold of %d times in a row at %s and the container was to be killed",
						what, e.Probe, at(ledger, i), p.failures(), at(ledger, t)), t, i)
					continue
				}
			}
			switch e.Result {
			case history.ProbeSuccess:
				fails[e.Probe] = 0
				if e.Probe == history.ProbeStartup && startupOK < 0 {
					startupOK = i
				}
				if e.Probe == history.ProbeReadiness {
					k := prKey{r.uid, r.container}
					if _, seen := successes[k]; !seen {
						successes[k] = e.T
					}
				}
			case history.ProbeFailure:
				fails[e.Probe]++
				if e.Probe != history.ProbeReadiness && fails[e.Probe] == p.failures() {
					tripped[e.Probe] = i
				}
			}
		}
		// Every tripped probe's container is killed, or ends, in time.
		for kind, t := range tripped {
			due := ledger[t].T + int64(ProbeKillTolerance)
			if due > h.End {
				continue // the history ends first
			}
			killed := false
			for _, i := range acts[ri] {
				if i > t && ledger[i].Action != history.LedgerProbe && ledger[i].T <= due {
					killed = true
					break
				}
			}
			if !killed && r.end != endless && ledger[r.end].T <= due {
				killed = true
			}
			switch {
			case killed:
			case dist.touches(r.node, ledger[t].T, due):
				skipped++
			default:
				bad(r, ledger[t].T, fmt.Sprintf("container %q of pod %s (UID %s) on %s failed its %s probe %d times in a row (its failureThreshold) at %s and was not killed within %s",
					r.container, r.pod, ledger[t].UID, r.node, kind, probes[kind].failures(), at(ledger, t), ProbeKillTolerance), t)
			}
		}
	}
	readyJudged, readyBad := prReadiness(pi, specs, successes, func(uid, ctr string) []int {
		var out []int
		for _, ri := range byCtr[prKey{uid, ctr}] {
			out = append(out, runs[ri].start)
		}
		return out
	})
	illegal = append(illegal, readyBad...)

	res.Stats.Ops, res.Stats.Checked, res.Stats.Keys = answers, judgedRuns, len(uids)
	if answers > 0 {
		res.Figures = append(res.Figures,
			Figure{Name: "probe answers", Value: float64(answers), Unit: "count"},
			Figure{Name: "containers probed", Value: float64(judgedRuns), Unit: "count"},
			Figure{Name: "kills for a failed probe", Value: float64(kills), Unit: "count"},
			Figure{Name: "ready containers judged", Value: float64(readyJudged), Unit: "count"})
	}
	note := ""
	if skipped > 0 {
		note += fmt.Sprintf("; %s not judged: a kubelet crash, pause, clock fault, power loss or fence on the node in between", count(skipped, "answer"))
	}
	if unknownSpec > 0 {
		note += fmt.Sprintf("; %s of pods the store lines do not hold not judged", count(unknownSpec, "container run"))
	}
	switch {
	case len(illegal) > 0:
		sort.SliceStable(illegal, func(a, b int) bool { return illegal[a].t < illegal[b].t })
		for _, v := range illegal {
			if len(res.Evidence) >= opts.maxEvidence() {
				break
			}
			res.Evidence = append(res.Evidence, Evidence{Key: v.key, At: v.t, Description: "LC-9: " + v.desc, Ledger: ledgerEntries(ledger, v.idx...)})
		}
		return res.finish(Illegal, fmt.Sprintf("%s of %s broke LC-9; first: %s%s",
			count(len(illegal), "violation"), count(answers, "probe answer"), illegal[0].desc, note))
	case answers == 0:
		return res.finish(Unknown, "not checked: the ledger records no probe")
	case judgedRuns == 0:
		return res.finish(Unknown, fmt.Sprintf("no probed container could be judged (%s)%s", count(answers, "probe answer"), note))
	}
	return res.finish(Ok, fmt.Sprintf("%s of %s: probes ran only as their spec has them, after their initial delay and the startup probe's success; %s for a failed probe, each after its failureThreshold; %d container statuses ready only after a readiness success%s",
		count(answers, "probe answer"), count(judgedRuns, "container run"), count(kills, "kill action"), readyJudged, note))
}

// prReadiness judges the store's record of pods against the readiness
// answers: a container with a readiness probe is never shown ready before
// its readiness probe first succeeded (firstOK, recorder time). It returns
// how many ready container statuses it judged and the violations.
func prReadiness(pi *podIndex, specs map[string]map[string]prContainer, firstOK map[prKey]int64, starts func(uid, ctr string) []int) (int, []prViolation) {
	judged := 0
	var out []prViolation
	uids := make([]string, 0, len(specs))
	for uid := range specs {
		uids = append(uids, uid)
	}
	sort.Strings(uids)
	for _, uid := range uids {
		ph := pi.byUID[uid]
		if ph == nil {
			continue
		}
		flagged := map[string]bool{}
		for _, ev := range ph.events {
			if ev.pod == nil {
				continue
			}
			for _, cs := range ev.pod.Status.ContainerStatuses {
				if !cs.Ready || specs[uid][cs.Name][history.ProbeReadiness] == nil {
					continue
				}
				judged++
				ok, seen := firstOK[prKey{uid, cs.Name}]
				if (seen && ok <= ev.t) || flagged[cs.Name] {
					continue
				}
				flagged[cs.Name] = true
				when := "had never succeeded"
				if seen {
					when = fmt.Sprintf("first succeeded only at t=%s", nanos(ok))
				}
				out = append(out, prViolation{key: ph.events[0].pod.ref(), t: ev.t, idx: starts(uid, cs.Name),
					desc: fmt.Sprintf("the store shows container %q of pod %s (UID %s) ready at resourceVersion %d (t=%s), but its readiness probe %s",
						cs.Name, ph.events[0].pod.ref(), uid, ev.rv, nanos(ev.t), when)})
			}
		}
	}
	return judged, out
}
