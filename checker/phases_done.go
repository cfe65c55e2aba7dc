package checker

import (
	"fmt"
	"time"

	"github.com/podsafe/podsafe/history"
)

// poUnfinished judges LC-2's liveness half: a pod whose containers have
// all exited for good (restartPolicy Never, or OnFailure with every last
// exit 0) reaches Succeeded or Failed. The kubelet reports the phase as
// soon as it sees the last exit; the slack of a restart owed
// (owedRestartSlack scaled, owedRestartWallSlack wall) bounds the wait. A
// pod is judged only when it has no init container that restarts
// (sidecar), every app container ran and its last run ended in an exit,
// no fault anywhere overlaps the wait, the node was never fenced or
// powered off then, the node's runtime recorded something after the wait
// (its kubelet was not starved), the pod was not marked for deletion or
// removed by its end, and the history goes on past it; not when store
// events of pods were lost. It returns the violations and how many pods it
// judged.
func poUnfinished(h *history.History, pods *podIndex, runs []run, dist *boDisturbances) ([]poViolation, int) {
	if poStoreLost(h.Logs) || len(runs) == 0 {
		return nil, 0
	}
	scale := historyScale(h)
	wait := int64(float64(BackoffTolerance+owedRestartSlack)/scale) + int64(owedRestartWallSlack)
	quiet := newLivenessWaits(h, dist)
	lastRun := map[boCtrKey]int{} // the last run of each container, index into runs
	for i, r := range runs {
		lastRun[boCtrKey{r.uid, r.container}] = i
	}
	var out []poViolation
	judged := 0
	for _, ph := range pods.instances {
		spec := pods.spec(ph.uid)
		if spec == nil || len(spec.Spec.Containers) == 0 || (spec.Spec.RestartPolicy != poNever && spec.Spec.RestartPolicy != poOnFailure) {
			continue
		}
		sidecar := false
		for _, c := range spec.Spec.InitContainers {
			sidecar = sidecar || c.RestartPolicy == poAlways
		}
		if sidecar {
			continue
		}
		var done int64
		node, ok := "", true
		var idx []int
		failed := false
		for _, c := range spec.Spec.Containers {
			i, ran := lastRun[boCtrKey{ph.uid, c.Name}]
			if !ran || runs[i].end == endless || h.Ledger[runs[i].end].Action != history.LedgerExit {
				ok = false
				break
			}
			e := h.Ledger[runs[i].end]
			if spec.Spec.RestartPolicy == poOnFailure && e.ExitCode != 0 {
				ok = false // it restarts
				break
			}
			failed = failed || e.ExitCode != 0
			if e.T > done {
				done, node = e.T, runs[i].node
			}
			idx = append(idx, runs[i].start, runs[i].end)
		}
		if !ok {
			continue
		}
		due := done + wait
		terminalAt, terminal := poTerminalAt(ph)
		// Marked for deletion or removed before it was due, and not
		// terminal first: not judged.
		if alive := poAliveUntil(ph); due > h.End || (alive <= due && !(terminal && terminalAt <= alive)) || !quiet.judgeable(node, done, due) {
			continue
		}
		judged++
		if terminal && terminalAt <= due {
			continue
		}
		want := "Succeeded"
		if failed {
			want = "Failed"
		}
		late := fmt.Sprintf("never recorded it Succeeded or Failed (it should be %s)", want)
		if terminal {
			late = fmt.Sprintf("recorded it terminal only at t=%s, %s after that exit", time.Duration(terminalAt), seconds(time.Duration(float64(terminalAt-done)*scale)))
		}
		out = append(out, poViolation{uid: ph.uid, key: podRef(spec.Metadata.Namespace, spec.Metadata.Name), guarantee: "LC-2", t: due,
			desc: fmt.Sprintf("every container exited for good under restartPolicy %s, the last at t=%s on %s, yet the store %s: the kubelet reports the phase within %s (%s scaled and %s wall)",
				spec.Spec.RestartPolicy, time.Duration(done), node, late, seconds(time.Duration(float64(wait)*scale)), owedRestartSlack+BackoffTolerance, owedRestartWallSlack),
			ledger: ledgerEntries(h.Ledger, idx...)})
	}
	return out, judged
}

// poTerminalAt is the recorder time of the first store line showing the
// pod Succeeded or Failed.
func poTerminalAt(ph *poPodHistory) (int64, bool) {
	for _, e := range ph.events {
		if p := e.pod; p != nil && (p.Status.Phase == "Succeeded" || p.Status.Phase == "Failed") {
			return e.t, true
		}
	}
	return 0, false
}
