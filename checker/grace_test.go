package checker

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/podsafe/podsafe/history"
)

const (
	start    = history.LedgerStart
	term     = history.LedgerTerm
	kill     = history.LedgerKill
	exit     = history.LedgerExit
	preStart = history.LedgerPreStopStart
	preEnd   = history.LedgerPreStopEnd
)

// deleted records a deletion of web-0 (UID u) asking for grace g.
func (b *hb) deleted(t float64, identity, u string, g int64) *hb {
	return b.call(t, identity, "delete", "pods", "default", "web-0", uid(u), askGrace(g))
}

// graceKill is the usual termination of web-0 (UID a) after a deletion
// asking for 30 s: preStop 3 s → 6 s, TERM, then KILL at kill.
func graceKill(killAt float64) *hb {
	b := &hb{}
	return b.led(1, start, "n1", "web-0", "a").
		deleted(2, "workload", "a", 30).
		led(3, preStart, "n1", "web-0", "a").
		led(6, preEnd, "n1", "web-0", "a").
		led(6.001, term, "n1", "web-0", "a", grace(30)).
		led(killAt, kill, "n1", "web-0", "a", grace(30)).
		led(killAt+0.1, exit, "n1", "web-0", "a")
}

func TestGraceOk(t *testing.T) {
	res := mustVerdict(t, CheckGrace(bg, graceKill(33).history(), Options{}), Ok)
	if res.Stats.Ops != 1 || res.Stats.Checked != 1 || res.Stats.Keys != 1 {
		t.Errorf("stats %+v", res.Stats)
	}
	// The tolerance: 50 ms early is still fine, 200 ms is not.
	mustVerdict(t, CheckGrace(bg, graceKill(32.95).history(), Options{}), Ok)
	mustVerdict(t, CheckGrace(bg, graceKill(32.8).history(), Options{}), Illegal)
}

// KILL 14 s after TERM, 17 s into a 30 s grace period.
func TestGraceKillEarly(t *testing.T) {
	res := mustVerdict(t, CheckGrace(bg, graceKill(20).history(), Options{}), Illegal)
	ev := res.Evidence[0]
	if ev.Key != "default/web-0" {
		t.Errorf("evidence key %q", ev.Key)
	}
	if diff := cmp.Diff([]string{"a:prestop-start", "a:prestop-end", "a:term", "a:kill"}, evidenceActions(ev)); diff != "" {
		t.Errorf("evidence entries (-want +got):\n%s", diff)
	}
	if len(ev.API) != 1 || *ev.API[0].GracePeriodSeconds != 30 {
		t.Errorf("evidence calls %+v, want the deletion asking for 30 s", ev.API)
	}
	mustMention(t, "description", ev.Description, "KILL at ledger #4", "17.000 s after the kill began", "max(start + 30 s, TERM + 2 s) = 30.000 s", "grace 30 s")
}

func TestGraceBounds(t *testing.T) {
	tests := []struct {
		name string
		b    *hb
		want Verdict
		// words the summary or first evidence must mention
		mention []string
	}{
		// GP-3: 2 s after TERM even with a 1 s grace.
		{"TERM + 2 s with a short grace", (&hb{}).
			led(1, start, "n1", "web-0", "a").
			led(10, term, "n1", "web-0", "a", grace(1)).
			led(12, kill, "n1", "web-0", "a", grace(1)), Ok, nil},
		{"KILL 1 s after TERM", (&hb{}).
			led(1, start, "n1", "web-0", "a").
			led(10, term, "n1", "web-0", "a", grace(1)).
			led(11, kill, "n1", "web-0", "a", grace(1)), Illegal, []string{"as the kubelet stated it"}},
		// PS-3: a shorter deletion shortens, a longer one never lengthens.
		{"shortened, then a longer request ignored", (&hb{}).
			led(1, start, "n1", "web-0", "a").
			deleted(2, "workload", "a", 30).
			led(3, term, "n1", "web-0", "a", grace(30)).
			deleted(4, "workload", "a", 5).
			deleted(5, "workload", "a", 60).
			led(8, kill, "n1", "web-0", "a", grace(5)), Ok, nil},
		{"shortened, still too early", (&hb{}).
			led(1, start, "n1", "web-0", "a").
			deleted(2, "workload", "a", 30).
			led(3, term, "n1", "web-0", "a", grace(30)).
			deleted(4, "workload", "a", 5).
			led(7, kill, "n1", "web-0", "a", grace(5)), Illegal, []string{"start + 5 s"}},
		// A deletion after the KILL does not count.
		{"a deletion after the KILL", (&hb{}).
			led(1, start, "n1", "web-0", "a").
			deleted(2, "workload", "a", 30).
			led(3, term, "n1", "web-0", "a", grace(30)).
			led(7, kill, "n1", "web-0", "a", grace(30)).
			deleted(8, "workload", "a", 1), Illegal, nil},
		// A negative grace counts as 1 (GP-6).
		{"negative grace", (&hb{}).
			led(1, start, "n1", "web-0", "a").
			deleted(2, "workload", "a", -5).
			led(3, term, "n1", "web-0", "a", grace(1)).
			led(5, kill, "n1", "web-0", "a", grace(1)), Ok, nil},
		// No grace requested: the pod's own, as the kubelet stated it.
		{"deletion without a grace", (&hb{}).
			led(1, start, "n1", "web-0", "a").
			call(2, "scheduler", "delete", "pods", "default", "web-0", uid("a")).
			led(3, term, "n1", "web-0", "a", grace(10)).
			led(12, kill, "n1", "web-0", "a", grace(10)), Illegal, []string{"start + 10 s"}},
		// A probe kill began before any deletion: its own grace (GP-1),
		// capped by the deletion that came later (GP-5).
		{"probe kill, then a longer deletion", (&hb{}).
			led(1, start, "n1", "web-0", "a").
			led(5, term, "n1", "web-0", "a", grace(5)).
			deleted(6, "workload", "a", 30).
			led(10, kill, "n1", "web-0", "a", grace(5)), Ok, nil},
		// A deletion of unknown outcome that named no UID may have been of
		// an earlier pod of that name: it lowers the grace but does not make
		// a later probe kill a deletion's.
		{"old deletion by name", (&hb{}).
			call(1, "workload", "delete", "pods", "default", "web-0", askGrace(30), outcome(history.StatusUnknown)).
			led(5, start, "n1", "web-0", "b").
			led(10, term, "n1", "web-0", "b", grace(5)).
			led(15, kill, "n1", "web-0", "b", grace(5)), Ok, nil},
		// A deletecollection may have deleted any pod of its namespace.
		{"deletecollection", (&hb{}).
			led(1, start, "n1", "web-0", "a").
			deleted(2, "workload", "a", 30).
			call(2.5, identityAdmin, "deletecollection", "pods", "default", "", askGrace(3)).
			led(3, term, "n1", "web-0", "a", grace(3)).
			led(6, kill, "n1", "web-0", "a", grace(3)), Ok, nil},
		// Several containers are judged one by one.
		{"the second container killed early", (&hb{}).
			led(1, start, "n1", "web-0", "a").
			led(1, start, "n1", "web-0", "a", ctr("side")).
			deleted(2, "workload", "a", 10).
			led(3, term, "n1", "web-0", "a", grace(10)).
			led(3, term, "n1", "web-0", "a", grace(10), ctr("side")).
			led(13, kill, "n1", "web-0", "a", grace(10)).
			led(6, kill, "n1", "web-0", "a", grace(10), ctr("side")), Illegal, []string{`container "side"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mustResult(t, CheckGrace(bg, tt.b.history(), Options{}), tt.want, tt.mention...)
		})
	}
}

// PS-5, LC-12: a kubelet restarted during termination starts over with the
// full grace; the later KILL is no lengthening, and a KILL on the old
// schedule is too early for the new kill.
func TestGraceKubeletRestart(t *testing.T) {
	restart := func(killAt float64) *hb {
		b := &hb{}
		return b.led(0, start, "n1", "web-0", "a").
			deleted(0.5, "workload", "a", 10).
			led(1, preStart, "n1", "web-0", "a").
			led(2, preEnd, "n1", "web-0", "a"). // the kubelet died during preStop
			led(3, term, "n1", "web-0", "a", grace(10)).
			// the kubelet died again; the new one starts over
			led(20, preStart, "n1", "web-0", "a").
			led(22, preEnd, "n1", "web-0", "a").
			led(22, term, "n1", "web-0", "a", grace(10)).
			led(killAt, kill, "n1", "web-0", "a", grace(10))
	}
	res := mustVerdict(t, CheckGrace(bg, restart(30).history(), Options{}), Ok)
	mustMention(t, "summary", res.Summary, "1 kill began again after a kubelet restart", "PS-5")
	if res.Stats.Ops != 2 {
		t.Errorf("%d kills, want 2", res.Stats.Ops)
	}
	res = mustVerdict(t, CheckGrace(bg, restart(24).history(), Options{}), Illegal)
	mustMention(t, "description", res.Evidence[0].Description, "4.000 s after the kill began at ledger #4")

	// A restarted kubelet that KILLs without sending TERM again is held to
	// the first TERM and the new start.
	b := &hb{}
	b.led(0, start, "n1", "web-0", "a").
		deleted(0.5, "workload", "a", 10).
		led(1, term, "n1", "web-0", "a", grace(10)).
		led(20, preStart, "n1", "web-0", "a").
		led(21, preEnd, "n1", "web-0", "a").
		led(30, kill, "n1", "web-0", "a", grace(10))
	mustVerdict(t, CheckGrace(bg, b.history(), Options{}), Ok)
}

func TestGraceKillWithoutTerm(t *testing.T) {
	b := &hb{}
	b.led(1, start, "n1", "web-0", "a").
		deleted(2, "workload", "a", 30).
		led(40, kill, "n1", "web-0", "a", grace(30))
	res := mustVerdict(t, CheckGrace(bg, b.history(), Options{}), Illegal)
	mustMention(t, "description", res.Evidence[0].Description, "without TERM")

	// A force deletion (grace 0) bounds nothing: LC-13.
	b = &hb{}
	b.led(1, start, "n1", "web-0", "a").
		deleted(2, "workload", "a", 30).
		deleted(3, identityAdmin, "a", 0).
		led(4, kill, "n1", "web-0", "a")
	res = mustVerdict(t, CheckGrace(bg, b.history(), Options{}), Ok)
	mustMention(t, "summary", res.Summary, "force-deleted")
}

// The history shows the pod object gone before the KILL (a 404 on its
// name, or its name created again): the API deleted it at once, and the
// kubelet's short orphan grace is allowed.
func TestGraceObjectGone(t *testing.T) {
	for _, signal := range []func(*hb) *hb{
		func(b *hb) *hb { return b.call(2.5, identityPet, "get", "pods", "default", "web-0", notFound) },
		func(b *hb) *hb { return b.created(2.5, identityPet, "web-0", "b") },
	} {
		b := &hb{}
		b.led(1, start, "n1", "web-0", "a").deleted(2, "workload", "a", 30)
		signal(b).
			led(3, term, "n1", "web-0", "a", grace(1)).
			led(5, kill, "n1", "web-0", "a", grace(1))
		mustVerdict(t, CheckGrace(bg, b.history(), Options{}), Ok)
	}
	// A 404 from before the pod existed says nothing.
	b := &hb{}
	b.call(0.5, identityPet, "get", "pods", "default", "web-0", notFound).
		led(1, start, "n1", "web-0", "a").
		deleted(2, "workload", "a", 30).
		led(3, term, "n1", "web-0", "a", grace(30)).
		led(5, kill, "n1", "web-0", "a", grace(30))
	mustVerdict(t, CheckGrace(bg, b.history(), Options{}), Illegal)
}

// The kubelet stated a shorter grace than the deletion asked for and kept
// to it: a probe kill racing the deletion, a terminal pod deleted at once,
// or a wrongly computed grace. The history cannot tell: Unknown.
func TestGraceStatedShorter(t *testing.T) {
	b := &hb{}
	b.led(1, start, "n1", "web-0", "a").
		deleted(2, "workload", "a", 30).
		led(3, term, "n1", "web-0", "a", grace(5)).
		led(8, kill, "n1", "web-0", "a", grace(5))
	res := mustVerdict(t, CheckGrace(bg, b.history(), Options{}), Unknown)
	mustMention(t, "summary", res.Summary, "GP-5", "GP-1")
	mustMention(t, "evidence", res.Evidence[0].Description, "honours the 5 s the kubelet stated")

	// Breaking even the kubelet's own grace is Illegal.
	b = &hb{}
	b.led(1, start, "n1", "web-0", "a").
		deleted(2, "workload", "a", 30).
		led(3, term, "n1", "web-0", "a", grace(5)).
		led(4, kill, "n1", "web-0", "a", grace(5))
	mustVerdict(t, CheckGrace(bg, b.history(), Options{}), Illegal)
}

// GP-1: the kubelet stated a grace shorter than the deletion asked for and
// kept to it. With no store events the history cannot tell a wrong grace
// from a probe, eviction or orphan kill (Unknown, TestGraceStatedShorter);
// when the store rules all of those out, the kill is Illegal.
func TestGraceStatedShorterRuledOut(t *testing.T) {
	const probe = `,"livenessProbe":{"exec":{"command":["true"]}}`
	stated := func(container, status string, mods ...func(*hb)) *hb {
		b := &hb{}
		b.led(1, start, "n1", "web-0", "a").
			podVersion(1.5, "a", 0, container, status).
			deleted(2, "workload", "a", 30).
			podVersion(2.01, "a", 30, container, status)
		for _, m := range mods {
			m(b)
		}
		return b.led(3, term, "n1", "web-0", "a", grace(5)).
			led(8, kill, "n1", "web-0", "a", grace(5))
	}
	res := mustVerdict(t, CheckGrace(bg, stated("", "").history(), Options{}), Illegal)
	mustMention(t, "description", res.Evidence[0].Description, "the store rules out a probe, eviction or orphan kill", "GP-1", "grace 30 s")

	for name, b := range map[string]*hb{
		"a liveness probe": stated(probe, ""),
		"evicted":          stated("", `"phase":"Failed","reason":"Evicted"`),
		"memory in scripts": stated("", "", func(b *hb) {
			b.h.Store[0].Object = []byte(strings.Replace(string(b.h.Store[0].Object), `"uid"`, `"annotations":{"podsafe.io/script.c":"ignore-term mem=200Mi"},"uid"`, 1))
		}),
		"memory pressure": stated("", "", func(b *hb) {
			b.h.Store = append(b.h.Store, history.StoreEvent{Type: history.StoreModified, Resource: "nodes", Name: "n2",
				Object: []byte(`{"metadata":{"name":"n2"},"status":{"conditions":[{"type":"MemoryPressure","status":"True"}]}}`), T: secs(2.5)})
		}),
		"object gone": stated("", "", func(b *hb) {
			b.h.Store = append(b.h.Store, history.StoreEvent{Type: history.StoreDeleted, Resource: "pods", Namespace: "default", Name: "web-0",
				Object: b.h.Store[1].Object, T: secs(2.5)})
		}),
	} {
		t.Run(name, func(t *testing.T) {
			mustVerdict(t, CheckGrace(bg, b.history(), Options{}), Unknown)
		})
	}
}

// GP-2, LC-11: TERM waits for the preStop hook until the grace deadline.
func TestGraceTermDuringPreStop(t *testing.T) {
	hook := func(termAt, endAt float64, lag time.Duration) *hb {
		b := &hb{}
		return b.led(0, start, "n1", "web-0", "a").
			deleted(0.5, "workload", "a", 30).
			led(1, preStart, "n1", "web-0", "a").
			led(termAt, term, "n1", "web-0", "a", grace(30)).
			led(endAt, preEnd, "n1", "web-0", "a", wallLag(lag)).
			led(max(termAt+2, 31), kill, "n1", "web-0", "a", grace(30))
	}
	res := mustVerdict(t, CheckGrace(bg, hook(2, 9, time.Second).history(), Options{}), Illegal)
	ev := res.Evidence[0]
	mustMention(t, "description", ev.Description, "TERM at ledger #2", "while the hook ran until ledger #3")
	if diff := cmp.Diff([]string{"a:prestop-start", "a:term", "a:prestop-end", "a:kill"}, evidenceActions(ev)); diff != "" {
		t.Errorf("evidence entries (-want +got):\n%s", diff)
	}
	// The hook's end recorded just after TERM, by wall time: the hook had
	// ended, its goroutine recorded it late.
	mustVerdict(t, CheckGrace(bg, hook(2, 3, 0).history(), Options{}), Ok)
	// A hanging hook is abandoned at the deadline (31 s). TERM later than
	// that breaks no lower bound; the upper one needs the store's deadline
	// (TestGraceHangingPreStop).
	mustVerdict(t, CheckGrace(bg, hook(31, 31.001, time.Second).history(), Options{}), Ok)
	mustVerdict(t, CheckGrace(bg, hook(33, 33.001, time.Second).history(), Options{}), Ok)
}

func TestGraceEmpty(t *testing.T) {
	mustVerdict(t, CheckGrace(bg, &history.History{}, Options{}), Unknown)
	b := (&hb{}).led(1, start, "n1", "web-0", "a").led(2, exit, "n1", "web-0", "a")
	mustVerdict(t, CheckGrace(bg, b.history(), Options{}), Unknown)
	// A kill with no grace anywhere is not judged.
	b = (&hb{}).led(1, start, "n1", "web-0", "a").led(2, term, "n1", "web-0", "a").led(3, kill, "n1", "web-0", "a")
	res := mustVerdict(t, CheckGrace(bg, b.history(), Options{}), Unknown)
	mustMention(t, "summary", res.Summary, "no kill could be judged")
	// … and beside a judged one, it is only noted.
	b.led(4, start, "n1", "web-0", "b").led(5, term, "n1", "web-0", "b", grace(1)).led(7, kill, "n1", "web-0", "b", grace(1))
	res = mustVerdict(t, CheckGrace(bg, b.history(), Options{}), Ok)
	mustMention(t, "summary", res.Summary, "1 kill not judged")
}
