package checker

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/podsafe/podsafe/history"
)

// PhasesChecker names the pod phase and condition checker in results.
const PhasesChecker = "phases"

// phasesGuarantees are the guarantees the phase checker judges.
var phasesGuarantees = []string{"LC-1", "LC-2", "LC-3", "LC-7", "LC-8", "LC-10", "PS-1", "PS-2", "PS-3"}

// CheckPhases judges every recorded change of every pod object (the store
// events of pods, per UID in commit order) and the ledger's container
// starts against the pod lifecycle:
//
//   - LC-1: the phase is "", Pending, Running, Succeeded, Failed or Unknown.
//   - LC-2, PS-2: the phase never goes back (Pending, Running, then
//     Succeeded or Failed; Unknown stands outside the order) and a terminal
//     phase never changes; Running only once the pod is bound; Succeeded
//     only when every app container's last termination exited 0 and none
//     runs, and, under restartPolicy Always, only for a pod being deleted
//     (otherwise it would restart); Failed only when no container runs and
//     one of them failed, or the pod was being deleted or evicted, or the
//     node controller failed it for a lost node (LC-4, reason NodeLost); no
//     container of the pod starts after the store recorded it Succeeded or
//     Failed (by its kubelet: a pod failed for a lost node may still run).
//   - LC-3, PS-1: spec.nodeName, once set, never changes.
//   - PS-2: deletionTimestamp, once set, stays, and a deleted UID never
//     comes back.
//   - PS-3: deletionGracePeriodSeconds never grows and deletionTimestamp
//     never moves later: a second deletion may only shorten the grace. The
//     one exception is kube-apiserver's: a shorter grace whose deadline
//     (the first deletion's start plus the new grace) is already past sets
//     the deadline to the moment of the second deletion with a grace of 1 s
//     (0 removes the pod), which is later than a first deadline that has
//     passed too; nobody gets more time, so a move to a grace of at most 1 s,
//     shorter than before, is not judged.
//   - LC-7: conditions are of a known type or a readiness gate's, with
//     status True, False or Unknown; PodScheduled is True only on a bound
//     pod, and binding sets it True; Initialized is not False while an app
//     container runs.
//   - LC-8: Ready True needs ContainersReady True, every app container
//     ready, phase Running (but for LC-4's failed pods, whose status the
//     node controller wrote from a stale copy), and every readiness gate
//     True. The kubelet reads gates from its informer, so a gate that was
//     True in an earlier change may lag; only a gate never True before
//     counts against it.
//   - LC-10: from the ledger, an init container starts only after every
//     earlier one has exited 0 (a sidecar, an init container with
//     restartPolicy Always, only after it started) and while no other
//     regular init container or app container runs; an app container starts
//     only after every regular init container's last run exited 0 and every
//     sidecar started.
//
// A pod whose changes were lost (the history notes store events lost) is
// not judged on binding, which needs consecutive changes. It is pure,
// O(n log n) in the store events and the ledger, and answers Unknown when
// ctx ends or opts.Timeout passes first.
func CheckPhases(ctx context.Context, h *history.History, opts Options) Result {
	return checkOne(ctx, h, opts, PhasesChecker)
}

func checkPhases(ctx context.Context, v *view, opts Options) Result {
	res, ctx, cancel := startCheck(ctx, opts, PhasesChecker, phasesGuarantees)
	defer cancel()
	h := v.h
	st := &stopper{ctx: ctx}
	pi, ok := v.pods(ctx)
	if !ok || ctx.Err() != nil {
		return res.cancelled("the pod phases")
	}
	pods, undecoded := pi.instances, pi.undecoded
	if len(pods) == 0 {
		return res.finish(Unknown, "not checked: the history records no change of any pod object")
	}
	lost := poStoreLost(h.Logs)
	var vs []poViolation
	for _, ph := range pods {
		res.Stats.Ops += len(ph.events)
		if st.stopped() {
			return res.cancelled("the pod phases")
		}
		vs = append(vs, poCheckPod(ph, lost)...)
	}
	res.Stats.Checked, res.Stats.Keys = res.Stats.Ops, len(pods)
	ledgerVs, starts, stopped := poCheckLedger(h.Ledger, pods, st)
	if stopped {
		return res.cancelled("the pod phases")
	}
	vs = append(vs, ledgerVs...)
	runs, ok := v.runs(ctx)
	if !ok {
		return res.cancelled("the pod phases")
	}
	nodes, ok := v.nodes(ctx)
	if !ok {
		return res.cancelled("the pod phases")
	}
	doneVs, finished := poUnfinished(h, pi, runs, newBoDisturbances(h, h.Ledger, nodes.fences))
	vs = append(vs, doneVs...)

	notes := ""
	if undecoded > 0 {
		notes = fmt.Sprintf("; %s not decoded", count(undecoded, "pod store event"))
	}
	if finished > 0 && len(doneVs) == 0 {
		notes += fmt.Sprintf("; each of %s whose containers all exited for good was recorded Succeeded or Failed in time", count(finished, "pod"))
	}
	if len(vs) == 0 {
		return res.finish(Ok, fmt.Sprintf("%s of %s followed the lifecycle: no phase went back, no terminal phase changed, no pod was rebound, no deletion was undone or lengthened, conditions agreed with phase and containers, and %s kept the init order%s",
			count(res.Stats.Ops, "recorded change"), count(len(pods), "pod"), count(starts, "container start"), notes))
	}
	sort.SliceStable(vs, func(a, b int) bool { return vs[a].t < vs[b].t })
	ids := map[string]bool{}
	uids := map[string]bool{}
	for _, v := range vs {
		ids[v.guarantee] = true
		uids[v.uid] = true
	}
	var broken []string
	for id := range ids {
		broken = append(broken, id)
	}
	sort.Strings(broken)
	// One item per pod, its first violation, earliest first.
	seen := map[string]bool{}
	for _, v := range vs {
		if seen[v.uid] || len(res.Evidence) >= opts.maxEvidence() {
			continue
		}
		seen[v.uid] = true
		ev := Evidence{
			Key:         v.key,
			Description: fmt.Sprintf("%s: pod %s (UID %s): %s", v.guarantee, v.key, v.uid, v.desc),
			Ledger:      v.ledger,
		}
		if v.deletions {
			ev.API = poDeletionCalls(h.API, v)
		}
		res.Evidence = append(res.Evidence, ev)
	}
	return res.finish(Illegal, fmt.Sprintf("%s in %s broke %s; first: %s%s",
		count(len(vs), "violation"), count(len(uids), "pod"), strings.Join(broken, ", "), res.Evidence[0].Description, notes))
}

// poViolation is one broken rule about one pod.
type poViolation struct {
	uid, key  string
	guarantee string
	t         int64 // recorder time, for ordering
	since     int64 // recorder time of the pod's first recorded change
	desc      string
	ledger    []history.LedgerEntry
	// deletions marks a violation about the pod's deletion, which the
	// deletion requests that may have caused it document.
	deletions bool
}

// poMaxCalls bounds the API calls an evidence item lists.
const poMaxCalls = 4

// poDeletionCalls returns the recorded deletion requests of v's pod (by
// name, and by UID when the answer named one) invoked between its first
// recorded change and the violation, at most the last poMaxCalls.
func poDeletionCalls(api []history.APICall, v poViolation) []history.APICall {
	var out []history.APICall
	for _, c := range api {
		if c.Invoke > v.t {
			break // in invoke order
		}
		if c.Invoke < v.since-int64(time.Second) || !isPodDeletion(&c) || podRef(c.Namespace, c.Name) != v.key || (c.UID != "" && c.UID != v.uid) {
			continue
		}
		out = append(out, c)
	}
	if len(out) > poMaxCalls {
		out = out[len(out)-poMaxCalls:]
	}
	return out
}

// poRank orders the phases of LC-2; Unknown is outside the order (-1).
func poRank(phase string) int {
	switch phase {
	case "", poPending:
		return 0
	case poRunning:
		return 1
	case poSucceeded, poFailed:
		return 2
	}
	return -1
}

func poValidPhase(phase string) bool {
	switch phase {
	case "", poPending, poRunning, poSucceeded, poFailed, poUnknown:
		return true
	}
	return false
}

func poTerminal(phase string) bool { return phase == poSucceeded || phase == poFailed }

// poCheckPod judges the recorded changes of one pod. It reports each kind
// of violation once, at its first occurrence.
func poCheckPod(ph *poPodHistory, lost bool) []poViolation {
	var out []poViolation
	reported := map[string]bool{}
	report := func(kind, guarantee string, e poEvent, format string, args ...any) {
		if reported[kind] {
			return
		}
		reported[kind] = true
		out = append(out, poViolation{uid: ph.uid, key: e.pod.ref(), guarantee: guarantee, t: e.t, since: ph.events[0].t,
			desc: fmt.Sprintf(format, args...), deletions: guarantee == "PS-3" || kind == "undeleted"})
	}
	var (
		maxRank              = -1
		rankEv, terminalEv   poEvent
		terminal             string
		node                 string
		nodeEv               poEvent
		delTS                string
		delGrace             *int64
		delEv                poEvent
		deleted              bool
		deletedEv            poEvent
		gatesTrue            = map[string]bool{}
		prevNode, prevExists = "", false
	)
	for _, e := range ph.events {
		p := e.pod
		if deleted {
			report("reappeared", "PS-2", e, "the object came back at %s after it was deleted at %s", poEventRef(e), poEventRef(deletedEv))
			break
		}
		phase := p.Status.Phase

		// LC-1, LC-2, PS-2: the phase.
		switch {
		case !poValidPhase(phase):
			report("phase-invalid", "LC-1", e, "phase %q at %s is none of Pending, Running, Succeeded, Failed, Unknown", phase, poEventRef(e))
		case terminal != "" && phase != terminal:
			report("terminal-changed", "LC-2", e, "phase %s at %s after the terminal phase %s at %s (a terminal phase never changes, PS-2)",
				poPhaseName(phase), poEventRef(e), terminal, poEventRef(terminalEv))
		case poRank(phase) >= 0 && poRank(phase) < maxRank:
			report("phase-back", "LC-2", e, "phase went back to %s at %s after %s at %s (PS-2)",
				poPhaseName(phase), poEventRef(e), rankEv.pod.Status.Phase, poEventRef(rankEv))
		}
		if r := poRank(phase); r > maxRank {
			maxRank, rankEv = r, e
		}
		if terminal == "" && poTerminal(phase) {
			terminal, terminalEv = phase, e
		}
		if phase == poRunning && p.Spec.NodeName == "" {
			report("running-unbound", "LC-2", e, "phase Running at %s while spec.nodeName is empty", poEventRef(e))
		}
		if phase == poSucceeded {
			if why := poSucceededWrong(p); why != "" {
				report("succeeded", "LC-2", e, "phase Succeeded at %s while %s", poEventRef(e), why)
			}
		}
		if phase == poFailed {
			if why := poFailedWrong(p); why != "" {
				report("failed", "LC-2", e, "phase Failed at %s while %s", poEventRef(e), why)
			}
		}

		// LC-3, PS-1: bound once.
		if node != "" && p.Spec.NodeName != node {
			report("rebound", "LC-3", e, "spec.nodeName %q at %s after %q at %s: a pod is bound once and never moves (PS-1)",
				p.Spec.NodeName, poEventRef(e), node, poEventRef(nodeEv))
		}
		if node == "" && p.Spec.NodeName != "" {
			node, nodeEv = p.Spec.NodeName, e
			if prevExists && prevNode == "" && !lost && e.typ == history.StoreModified && p.condition(poCondScheduled) != "True" {
				report("bound-unscheduled", "LC-7", e, "bound to %s at %s with condition PodScheduled %s: binding sets it True",
					node, poEventRef(e), poCondName(p.condition(poCondScheduled)))
			}
		}
		prevNode, prevExists = p.Spec.NodeName, true

		// PS-2, PS-3: a deletion is never undone nor lengthened.
		ts, g := p.Metadata.DeletionTimestamp, p.Metadata.DeletionGracePeriodSeconds
		if delTS != "" {
			switch {
			case ts == "":
				report("undeleted", "PS-2", e, "deletionTimestamp %s, set at %s, is gone at %s", delTS, poEventRef(delEv), poEventRef(e))
			case ts != delTS && poLater(ts, delTS) && !poExpiredShortening(delGrace, g):
				report("deadline-later", "PS-3", e, "deletionTimestamp moved later, from %s at %s to %s at %s: a second deletion may only shorten the grace",
					delTS, poEventRef(delEv), ts, poEventRef(e))
			}
			switch {
			case delGrace != nil && g == nil && ts != "":
				report("grace-gone", "PS-3", e, "deletionGracePeriodSeconds %d, set at %s, is gone at %s", *delGrace, poEventRef(delEv), poEventRef(e))
			case delGrace != nil && g != nil && *g > *delGrace:
				report("grace-longer", "PS-3", e, "deletionGracePeriodSeconds grew from %d s at %s to %d s at %s: a second deletion may only shorten the grace",
					*delGrace, poEventRef(delEv), *g, poEventRef(e))
			}
		}
		if ts != "" {
			delTS, delEv = ts, e
			if g != nil {
				delGrace = g
			}
		}
		if e.typ == history.StoreDeleted {
			deleted, deletedEv = true, e
		}

		// LC-7, LC-8: conditions.
		poCheckConditions(p, e, gatesTrue, report)
		for _, c := range p.Status.Conditions {
			if c.Status == "True" {
				gatesTrue[c.Type] = true
			}
		}
	}
	return out
}

// poCheckConditions applies LC-7 and LC-8 to one recorded pod; gatesTrue
// holds the condition types True in an earlier change.
func poCheckConditions(p *poPod, e poEvent, gatesTrue map[string]bool, report func(kind, guarantee string, e poEvent, format string, args ...any)) {
	gates := map[string]bool{}
	for _, g := range p.Spec.ReadinessGates {
		gates[g.ConditionType] = true
	}
	for _, c := range p.Status.Conditions {
		if !poKnownConditions[c.Type] && !gates[c.Type] {
			report("cond-type", "LC-7", e, "condition type %q at %s is neither a pod condition nor one of its readiness gates", c.Type, poEventRef(e))
		}
		switch c.Status {
		case "True", "False", "Unknown":
		default:
			report("cond-status", "LC-7", e, "condition %s has status %q at %s, not True, False or Unknown", c.Type, c.Status, poEventRef(e))
		}
	}
	if p.condition(poCondScheduled) == "True" && p.Spec.NodeName == "" {
		report("scheduled-unbound", "LC-7", e, "condition PodScheduled True at %s while spec.nodeName is empty", poEventRef(e))
	}
	if init := p.condition(poCondInitialized); init != "" && init != "True" {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Running != nil && p.isAppContainer(cs.Name) {
				report("uninitialized-running", "LC-7", e, "app container %s runs at %s while condition Initialized is %s", cs.Name, poEventRef(e), init)
				break
			}
		}
	}
	notReady := func() string {
		for _, c := range p.Spec.Containers {
			found := false
			for _, cs := range p.Status.ContainerStatuses {
				if cs.Name == c.Name {
					found = true
					if !cs.Ready {
						return fmt.Sprintf("container %s is not ready", c.Name)
					}
				}
			}
			if !found {
				return fmt.Sprintf("container %s has no status", c.Name)
			}
		}
		return ""
	}
	if p.condition(poCondContainersReady) == "True" {
		if why := notReady(); why != "" {
			report("containers-ready", "LC-8", e, "condition ContainersReady True at %s while %s", poEventRef(e), why)
		}
	}
	if p.condition(poCondReady) != "True" {
		return
	}
	if cr := p.condition(poCondContainersReady); cr != "True" {
		report("ready-containers", "LC-8", e, "condition Ready True at %s while ContainersReady is %s", poEventRef(e), poCondName(cr))
	}
	if why := notReady(); why != "" {
		report("ready-container", "LC-8", e, "condition Ready True at %s while %s", poEventRef(e), why)
	}
	if p.Status.Phase != poRunning && p.Status.Reason != poReasonNodeLost {
		report("ready-phase", "LC-8", e, "condition Ready True at %s in phase %s: only a Running pod is ready", poEventRef(e), poPhaseName(p.Status.Phase))
	}
	for g := range gates {
		if s := p.condition(g); s != "True" && !gatesTrue[g] {
			report("ready-gate", "LC-8", e, "condition Ready True at %s while readiness gate %s is %s and was never True before (a missing gate counts as False)",
				poEventRef(e), g, poCondName(s))
		}
	}
}

// poSucceededWrong says why a pod recorded Succeeded cannot be, or "".
func poSucceededWrong(p *poPod) string {
	for _, cs := range p.Status.InitContainerStatuses {
		if cs.State.Running != nil {
			return fmt.Sprintf("init container %s runs", cs.Name)
		}
	}
	for _, c := range p.Spec.Containers {
		var cs *poContainerStatus
		for i := range p.Status.ContainerStatuses {
			if p.Status.ContainerStatuses[i].Name == c.Name {
				cs = &p.Status.ContainerStatuses[i]
			}
		}
		if cs == nil {
			return fmt.Sprintf("container %s has no status", c.Name)
		}
		if cs.State.Running != nil {
			return fmt.Sprintf("container %s runs", c.Name)
		}
		code, ok := cs.lastExit()
		if !ok {
			return fmt.Sprintf("container %s never terminated", c.Name)
		}
		if code != 0 {
			return fmt.Sprintf("container %s exited %d", c.Name, code)
		}
	}
	if (p.Spec.RestartPolicy == poAlways || p.Spec.RestartPolicy == "") && p.Metadata.DeletionTimestamp == "" {
		return "its restartPolicy is Always and it is not being deleted, so its containers restart"
	}
	return ""
}

// poFailedWrong says why a pod recorded Failed cannot be, or "".
func poFailedWrong(p *poPod) string {
	if p.Status.Reason == poReasonNodeLost {
		return "" // LC-4: failed by policy while its node is unreachable
	}
	failed := false
	for _, group := range [][]poContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, cs := range group {
			if cs.State.Running != nil {
				return fmt.Sprintf("container %s runs", cs.Name)
			}
			if code, ok := cs.lastExit(); ok && code != 0 {
				failed = true
			}
		}
	}
	if !failed && p.Metadata.DeletionTimestamp == "" && p.Status.Reason != poReasonEvicted {
		return "no container failed and the pod was neither deleted nor evicted"
	}
	return ""
}

// poLater reports whether RFC 3339 timestamp a is later than b; unparsable
// timestamps compare as not later.
func poLater(a, b string) bool {
	ta, oka := poTime(a)
	tb, okb := poTime(b)
	return oka && okb && ta.After(tb)
}

func poPhaseName(phase string) string {
	if phase == "" {
		return `""`
	}
	return phase
}

func poCondName(status string) string {
	if status == "" {
		return "absent"
	}
	return status
}

// poExpiredShortening reports whether a deletion's change of grace from
// before to after is kube-apiserver's shortening of an expired grace (see
// PS-3 above): to at most 1 s, and shorter than before.
func poExpiredShortening(before, after *int64) bool {
	return before != nil && after != nil && *after < *before && *after <= 1
}
