package checker

import (
	"fmt"
	"strings"
	"testing"

	"github.com/podsafe/podsafe/history"
)

// boPod is pod a (web-0, container c) with restart policy, bound to n1, as
// the store records it, and its first run: started at 0.5 s.
func boPod(policy string) *hb {
	b := (&hb{}).pod(0.1, added, 10, poObj("a", poBound("n1"), poPolicy(policy)))
	return poLed(b, 0.5, start, "c", 0)
}

// boCycle appends an exit of c with code at exitAt and its restart delay
// seconds later, on node.
func boCycle(b *hb, node string, exitAt, delay float64, code int) *hb {
	b.led(exitAt, exit, node, "web-0", "a", ctr("c"), func(e *history.LedgerEntry) { e.ExitCode = code })
	return b.led(exitAt+delay, start, node, "web-0", "a", ctr("c"))
}

// boLoop is a crash loop: each run lasts ran seconds, then the container
// restarts after delays[i].
func boLoop(policy string, ran float64, delays ...float64) *hb {
	b := boPod(policy)
	t := 0.5
	for _, d := range delays {
		t += ran
		boCycle(b, "n1", t, d, 1)
		t += d
	}
	return b
}

func TestBackoffOk(t *testing.T) {
	// 10, 20, 40, 80, 160, then capped at 300 s; a little more is fine.
	b := boLoop(poAlways, 1, 10, 20.2, 40, 80, 160, 300, 300, 301)
	res := mustVerdict(t, CheckBackoff(bg, b.history(), Options{}), Ok)
	if res.Stats.Ops != 8 || res.Stats.Checked != 8 || res.Stats.Keys != 1 {
		t.Errorf("stats %+v", res.Stats)
	}
	figs := map[string]float64{}
	for _, f := range res.Figures {
		figs[f.Name] = f.Value
	}
	if figs["restarts"] != 8 || figs["restart delay max"] < 300.9 || figs["restart delay max"] > 301.1 {
		t.Errorf("figures %+v", res.Figures)
	}
	// Within the tolerance.
	mustVerdict(t, CheckBackoff(bg, boLoop(poAlways, 1, 9.6, 19.6).history(), Options{}), Ok)
}

func TestBackoffNothingToJudge(t *testing.T) {
	b := boPod(poAlways)
	mustVerdict(t, CheckBackoff(bg, b.history(), Options{}), Unknown)
	if boHasRestart(b.h.Ledger) {
		t.Errorf("a restart found in one run")
	}
	if !boHasRestart(boLoop(poAlways, 1, 10).h.Ledger) {
		t.Errorf("no restart found in a crash loop")
	}
}

func TestBackoffEarly(t *testing.T) {
	for _, tc := range []struct {
		name   string
		delays []float64
		words  []string
	}{
		{"first restart at once", []float64{0.2}, []string{"restarted 0.200 s after its exit", "back-off of 10.000 s", "restart 1 in a row"}},
		{"no doubling", []float64{10, 10}, []string{"restarted 10.000 s", "back-off of 20.000 s", "restart 2 in a row"}},
		{"cap reached too early", []float64{10, 20, 40, 80, 160, 290}, []string{"back-off of 300.000 s", "restart 6 in a row"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := mustVerdict(t, CheckBackoff(bg, boLoop(poAlways, 1, tc.delays...).history(), Options{}), Illegal)
			ev := res.Evidence[0]
			if ev.Key != "default/web-0" {
				t.Errorf("evidence key %q", ev.Key)
			}
			mustMention(t, "evidence", ev.Description, append([]string{"LC-6", `container "c"`, "UID a", "on n1"}, tc.words...)...)
			if got := evidenceActions(ev); strings.Join(got, ",") != "a:start,a:exit,a:start" {
				t.Errorf("evidence entries %v, want the run, its exit and the restart", got)
			}
		})
	}
}

// A run of 10 min resets the back-off to 10 s; 9 min does not.
func TestBackoffReset(t *testing.T) {
	b := boPod(poAlways)
	boCycle(b, "n1", 1, 10, 1)
	boCycle(b, "n1", 12, 20, 1)
	boCycle(b, "n1", 32+600, 10, 1) // ran 10 min: back to 10 s
	boCycle(b, "n1", 643, 20, 1)
	mustVerdict(t, CheckBackoff(bg, b.history(), Options{}), Ok)

	b = boPod(poAlways)
	boCycle(b, "n1", 1, 10, 1)
	boCycle(b, "n1", 12, 20, 1)
	boCycle(b, "n1", 32+540, 10, 1) // ran 9 min: 40 s is due
	res := mustVerdict(t, CheckBackoff(bg, b.history(), Options{}), Illegal)
	mustMention(t, "evidence", res.Evidence[0].Description, "back-off of 40.000 s", "the run before lasted 540.000 s")
}

// A clock fault on the node's kubelet between exit and restart leaves the
// restart unjudged (and the count starts over); the same fault on another
// node does not.
func TestBackoffClockFault(t *testing.T) {
	build := func(target string) *hb {
		b := boLoop(poAlways, 1, 10, 2) // the second restart is early
		b.h.Nemesis = append(b.h.Nemesis, history.Interval{ID: 1, Name: "clock-jump", Targets: []string{target},
			Start: secs(13), End: secs(13.5), Healed: true})
		return b
	}
	res := mustVerdict(t, CheckBackoff(bg, build("kubelet/n1").history(), Options{}), Ok)
	mustMention(t, "summary", res.Summary, "1 restart not judged")
	if res.Stats.Checked != 1 {
		t.Errorf("stats %+v", res.Stats)
	}
	mustVerdict(t, CheckBackoff(bg, build("kubelet/n2").history(), Options{}), Illegal)

	// Only unjudged restarts: Unknown.
	b := boLoop(poAlways, 1, 2)
	b.h.Nemesis = append(b.h.Nemesis, history.Interval{ID: 1, Name: "clock-strobe", Targets: []string{"kubelet/n1"},
		Start: secs(0), End: secs(20), Healed: true})
	mustVerdict(t, CheckBackoff(bg, b.history(), Options{}), Unknown)
}

// The checker reads what a fault did from its recorded effect and nodes,
// not from its name: a fault of a name it never heard of that crashed the
// node's kubelet leaves the restart unjudged; one that cut the node off, or
// crashed another node's kubelet, does not.
func TestBackoffStructuredFault(t *testing.T) {
	build := func(effect history.FaultEffect, node string) *hb {
		b := boLoop(poAlways, 1, 10, 2) // the second restart is early
		b.h.Nemesis = append(b.h.Nemesis, history.Interval{ID: 1, Name: "some-new-fault", Effect: effect,
			Components: []string{"kubelet-process-of-" + node}, Nodes: []string{node},
			Start: secs(13), End: secs(13.5), Healed: true})
		return b
	}
	mustVerdict(t, CheckBackoff(bg, build(history.EffectKill, "n1").history(), Options{}), Ok)
	mustVerdict(t, CheckBackoff(bg, build(history.EffectCut, "n1").history(), Options{}), Illegal)
	mustVerdict(t, CheckBackoff(bg, build(history.EffectKill, "n2").history(), Options{}), Illegal)
}

// A kubelet restarted (its back-off lives in memory) restarts an exited
// container at once and starts the count over.
func TestBackoffKubeletRestart(t *testing.T) {
	b := boPod(poAlways)
	boCycle(b, "n1", 1, 10, 1)
	boCycle(b, "n1", 12, 1, 1) // the kubelet was down meanwhile
	boCycle(b, "n1", 14, 10, 1)
	b.h.Nemesis = append(b.h.Nemesis, history.Interval{ID: 1, Name: "kill-kubelet", Targets: []string{"kubelet/n1"},
		Start: secs(12.2), End: secs(12.8), Healed: true})
	mustVerdict(t, CheckBackoff(bg, b.history(), Options{}), Ok)
}

// A power loss: the new machine runs the pod afresh, whatever the policy.
func TestBackoffPowerOff(t *testing.T) {
	b := boPod(poNever)
	poLed(b, 2, history.LedgerPowerOff, "c", 0)
	poLed(b, 2, exit, "c", 137)
	poLed(b, 3, start, "c", 0)
	mustVerdict(t, CheckBackoff(bg, b.history(), Options{}), Unknown)
}

func TestBackoffPolicy(t *testing.T) {
	for _, tc := range []struct {
		policy string
		code   int
		want   Verdict
		words  []string
	}{
		{poNever, 1, Illegal, []string{"restartPolicy is Never"}},
		{poOnFailure, 0, Illegal, []string{"OnFailure and the container exited 0"}},
		{poOnFailure, 1, Ok, nil},
		{poAlways, 0, Ok, nil},
	} {
		t.Run(fmt.Sprintf("%s exit %d", tc.policy, tc.code), func(t *testing.T) {
			b := boPod(tc.policy)
			boCycle(b, "n1", 1, 10, tc.code)
			res := mustVerdict(t, CheckBackoff(bg, b.history(), Options{}), tc.want)
			if tc.want == Illegal {
				mustMention(t, "evidence", res.Evidence[0].Description, tc.words...)
			}
		})
	}
	// A regular init container that exited 0 is done; a sidecar restarts.
	b := (&hb{}).pod(0.1, added, 10, poObj("a", poBound("n1"), poInits("init-a", "side-proxy")))
	poLed(b, 1, start, "init-a", 0)
	poLed(b, 2, exit, "init-a", 0)
	poLed(b, 3, start, "side-proxy", 0)
	poLed(b, 4, exit, "side-proxy", 0)
	poLed(b, 14, start, "side-proxy", 0)
	mustVerdict(t, CheckBackoff(bg, b.history(), Options{}), Ok)
	poLed(b, 30, start, "init-a", 0)
	res := mustVerdict(t, CheckBackoff(bg, b.history(), Options{}), Illegal)
	mustMention(t, "evidence", res.Evidence[0].Description, `container "init-a"`, "init container that exited 0")
}

// Restarts happen only on the node the container ran on.
func TestBackoffOtherNode(t *testing.T) {
	b := boPod(poAlways)
	boCycle(b, "n2", 1, 10, 1)
	res := mustVerdict(t, CheckBackoff(bg, b.history(), Options{}), Illegal)
	mustMention(t, "evidence", res.Evidence[0].Description, "ran on n1", "restarted on n2", "same node")
}

// A node recorded fenced stays so until an admin unfences it: restarts
// there are not judged on back-off (a power fence's new machine starts
// afresh).
func TestBackoffFencedNode(t *testing.T) {
	b := boLoop(poAlways, 1, 10, 2)
	mustVerdict(t, CheckBackoff(bg, b.history(), Options{}), Illegal)
	b.nodeStatus(12.8, "n1", true)
	res := mustVerdict(t, CheckBackoff(bg, b.history(), Options{}), Ok)
	mustMention(t, "summary", res.Summary, "1 restart not judged")
}

// TestBackoffOwedRestart: a container that exited under a policy that
// restarts it, of a pod never deleted nor finished, must run again within
// the longest back-off (LC-6's liveness half).
func TestBackoffOwedRestart(t *testing.T) {
	// A crash loop: restarts after 10 s and 20 s, then an exit at 33.5 s
	// and nothing until end. Its next back-off is 40 s: a restart is owed
	// within twice that, 80 s, and the slack (0.5 + 10 s scaled, 2 s wall;
	// the history is at time scale 1): by 126 s.
	build := func(policy string, code int, end float64) *hb {
		b := boLoop(policy, 1, 10, 20)
		poLed(b, 33.5, exit, "c", code)
		return boProgress(b, end)
	}
	res := mustVerdict(t, CheckBackoff(bg, build(poAlways, 1, 400).history(), Options{}), Illegal)
	mustMention(t, "evidence", res.Evidence[0].Description, `LC-6: container "c" of pod default/web-0 (UID a) on n1 exited at`, "(code 1) and was not started again",
		"restartPolicy Always restarts it, within 90.500 s (twice its back-off of 40.000 s due to restart 3 in a row", "the pod stayed to the history's end 366.500 s past the exit")
	if len(res.Evidence[0].Ledger) != 2 {
		t.Errorf("evidence ledger %+v, want the run's start and exit", res.Evidence[0].Ledger)
	}
	mustVerdict(t, CheckBackoff(bg, build(poOnFailure, 1, 400).history(), Options{}), Illegal)
	// Exit 0 under Always is restarted too.
	mustVerdict(t, CheckBackoff(bg, build(poAlways, 0, 400).history(), Options{}), Illegal)

	// Not owed, or not yet due: Ok.
	for name, b := range map[string]*hb{
		"the history ends before the restart is due": build(poAlways, 1, 125),
		"OnFailure after exit 0":                     build(poOnFailure, 0, 400),
	} {
		res := mustVerdict(t, CheckBackoff(bg, b.history(), Options{}), Ok)
		if strings.Contains(res.Summary, "not started again") {
			t.Errorf("%s: %s", name, res.Summary)
		}
	}
	// Never restarts nothing: no restart, none owed.
	never := boPod(poNever)
	poLed(never, 2, exit, "c", 1)
	never.h.End = secs(400)
	mustVerdict(t, CheckBackoff(bg, never.history(), Options{}), Unknown)
	// Deleted only long after the restart was due: owed all the same.
	late := build(poAlways, 1, 200)
	late.pod(200, modified, 11, poObj("a", poBound("n1"), poPolicy(poAlways), poDeleting("2026-01-01T00:00:00Z", 30)))
	res = mustVerdict(t, CheckBackoff(bg, late.history(), Options{}), Illegal)
	mustMention(t, "evidence", res.Evidence[0].Description, "the pod stayed until it was marked for deletion, removed or finished 166.500 s past the exit")
	// A first exit is owed its restart within twice 10 s and the slack.
	first := func(end float64) *hb {
		b := boPod(poAlways)
		poLed(b, 2, exit, "c", 1)
		return boProgress(b, end)
	}
	res = mustVerdict(t, CheckBackoff(bg, first(2+20+10.5+2+1).history(), Options{}), Illegal)
	mustMention(t, "evidence", res.Evidence[0].Description, "within 30.500 s (twice its back-off of 10.000 s due to restart 1 in a row")
	mustVerdict(t, CheckBackoff(bg, first(2+20+10.5+2-1).history(), Options{}), Unknown)
	// A history with no restart at all is judged when an exit owed one
	// (the kubelet may restart nothing), and left alone otherwise.
	byName := func(h *history.History) map[string]Verdict {
		out := map[string]Verdict{}
		for _, r := range Check(bg, h, Options{}) {
			out[r.Checker] = r.Verdict
		}
		return out
	}
	if got := byName(first(400).history())[BackoffChecker]; got != Illegal {
		t.Errorf("the full check of a history whose only exit owed a restart: restart-backoff %q, want Illegal", got)
	}
	if got, ok := byName(first(20).history())[BackoffChecker]; ok {
		t.Errorf("the full check of a history with no restart owed yet ran restart-backoff: %q", got)
	}
	// Nothing recorded on the node after the restart was due (its kubelet
	// may have been starved): not judged.
	quiet := first(400)
	quiet.h.Ledger = quiet.h.Ledger[:len(quiet.h.Ledger)-1]
	mustVerdict(t, CheckBackoff(bg, quiet.history(), Options{}), Unknown)
	// Any fault in the wait, on any node or none: not judged.
	elsewhere := first(400)
	elsewhere.h.Nemesis = append(elsewhere.h.Nemesis, history.Interval{ID: 1, Name: "partition", Start: secs(10), End: secs(12), Healed: true})
	mustVerdict(t, CheckBackoff(bg, elsewhere.history(), Options{}), Unknown)

	// The pod was deleted, or finished: nothing owed.
	deleted := build(poAlways, 1, 400)
	deleted.pod(34, modified, 11, poObj("a", poBound("n1"), poPolicy(poAlways), poDeleting("2026-01-01T00:00:00Z", 30)))
	mustVerdict(t, CheckBackoff(bg, deleted.history(), Options{}), Ok)
	failed := build(poAlways, 1, 400)
	failed.pod(34, modified, 11, poObj("a", poBound("n1"), poPolicy(poAlways), poPhaseIs("Failed")))
	mustVerdict(t, CheckBackoff(bg, failed.history(), Options{}), Ok)
	// A fault touched the count (a kubelet paused between two earlier
	// restarts): the kubelet may wait up to BackoffMax, and did not.
	paused := build(poAlways, 1, 400)
	paused.h.Nemesis = append(paused.h.Nemesis, history.Interval{ID: 1, Name: "pause-kubelet", Targets: []string{"kubelet/n1"},
		Start: secs(12), End: secs(12.2), Healed: true})
	res = mustVerdict(t, CheckBackoff(bg, paused.history(), Options{}), Illegal)
	mustMention(t, "evidence", res.Evidence[0].Description, "within 310.500 s (the longest back-off, 5m0s: a fault touched its count")
	// ... but not before BackoffMax and the slack passed (the pause
	// left no restart judged on back-off either: Unknown).
	pausedShort := build(poAlways, 1, 33.5+300)
	pausedShort.h.Nemesis = paused.h.Nemesis
	mustVerdict(t, CheckBackoff(bg, pausedShort.history(), Options{}), Unknown)
	// The kubelet crashed before the restart was due: not judged.
	crashed := build(poAlways, 1, 400)
	crashed.h.Nemesis = append(crashed.h.Nemesis, history.Interval{ID: 1, Name: "kill-kubelet", Targets: []string{"kubelet/n1"},
		Start: secs(100), End: secs(101), Healed: true})
	mustVerdict(t, CheckBackoff(bg, crashed.history(), Options{}), Ok)
	// Store events of pods lost: a deletion may be missing.
	lost := build(poAlways, 1, 400)
	lost.h.Logs = append(lost.h.Logs, history.LogEntry{Msg: "store events lost", Attrs: map[string]string{"resource": "pods"}})
	mustVerdict(t, CheckBackoff(bg, lost.history(), Options{}), Ok)

	// Restarted and running at the end: said so.
	running := boProgress(boLoop(poAlways, 1, 10, 20), 400)
	res = mustVerdict(t, CheckBackoff(bg, running.history(), Options{}), Ok)
	mustMention(t, "summary", res.Summary, "1 container of pods alive at the end ran again after each exit their policy restarts")
}

// boProgress records, at end, a start of another pod's container on n1:
// the node's runtime went on.
func boProgress(b *hb, end float64) *hb {
	return b.led(end, start, "n1", "other-0", "o", ctr("x"))
}
