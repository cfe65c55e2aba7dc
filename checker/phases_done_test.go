package checker

import (
	"testing"
)

// TestPhasesUnfinished: a pod whose containers all exited for good is
// recorded Succeeded or Failed within the kubelet's slack (LC-2).
func TestPhasesUnfinished(t *testing.T) {
	// web-0 (UID a, container c) runs from 0.5 s and exits at 2 s with
	// code; terminal, when > 0, is when the store records it Succeeded or
	// Failed; the node's runtime records something at end.
	build := func(policy string, code int, terminal, end float64) *hb {
		b := boPod(policy)
		poLed(b, 2, exit, "c", code)
		if terminal > 0 {
			phase := "Succeeded"
			if code != 0 {
				phase = "Failed"
			}
			b.pod(terminal, modified, 11, poObj("a", poBound("n1"), poPolicy(policy), poPhaseIs(phase), poExitedCtr("c", code)))
		}
		return boProgress(b, end)
	}
	res := mustVerdict(t, CheckPhases(bg, build(poNever, 0, 0, 40).history(), Options{}), Illegal)
	mustMention(t, "evidence", res.Evidence[0].Description, "LC-2: pod default/web-0 (UID a): every container exited for good under restartPolicy Never",
		"never recorded it Succeeded or Failed (it should be Succeeded)", "within 12.500 s")
	res = mustVerdict(t, CheckPhases(bg, build(poNever, 3, 0, 40).history(), Options{}), Illegal)
	mustMention(t, "evidence", res.Evidence[0].Description, "(it should be Failed)")
	res = mustVerdict(t, CheckPhases(bg, build(poOnFailure, 0, 30, 40).history(), Options{}), Illegal)
	mustMention(t, "evidence", res.Evidence[0].Description, "recorded it terminal only at t=30s, 28.000 s after that exit")
	if len(res.Evidence[0].Ledger) != 2 {
		t.Errorf("evidence ledger %+v: want the container's start and exit", res.Evidence[0].Ledger)
	}

	// In time: said so.
	res = mustVerdict(t, CheckPhases(bg, build(poNever, 0, 3, 40).history(), Options{}), Ok)
	mustMention(t, "summary", res.Summary, "each of 1 pod whose containers all exited for good was recorded Succeeded or Failed in time")
	// Not judged: OnFailure after a failure restarts it; the history ends
	// too soon; a fault in the wait; the pod deleted first.
	mustVerdict(t, CheckPhases(bg, build(poOnFailure, 1, 0, 40).history(), Options{}), Ok)
	mustVerdict(t, CheckPhases(bg, build(poNever, 0, 0, 14).history(), Options{}), Ok)
	faulted := build(poNever, 0, 0, 40)
	faulted.fault(1, "partition", 3, 4)
	mustVerdict(t, CheckPhases(bg, faulted.history(), Options{}), Ok)
	deleted := build(poNever, 0, 0, 40)
	deleted.pod(2.5, modified, 12, poObj("a", poBound("n1"), poPolicy(poNever), poDeleting("2026-01-01T00:00:00Z", 30)))
	deleted.h.End = secs(40)
	mustVerdict(t, CheckPhases(bg, deleted.history(), Options{}), Ok)
}
