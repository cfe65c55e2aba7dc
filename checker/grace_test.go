package checker

import (
	"fmt"
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

// podVersion records a store change of pod web-0 (UID u) at t: terminating
// with deletionGracePeriodSeconds dgps when dgps > 0; extra is spliced into
// its first container's spec (a probe) and status is its status object.
func (b *hb) podVersion(t float64, u string, dgps int64, container, status string) *hb {
	meta := fmt.Sprintf(`"name":"web-0","namespace":"default","uid":%q`, u)
	if dgps > 0 {
		meta += fmt.Sprintf(`,"deletionTimestamp":"2030-01-01T00:10:00Z","deletionGracePeriodSeconds":%d`, dgps)
	}
	obj := fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{%s},"spec":{"containers":[{"name":"c","image":"podsafe.io/sim:1"%s}]},"status":{%s}}`,
		meta, container, status)
	b.h.Store = append(b.h.Store, history.StoreEvent{Type: history.StoreModified, Resource: "pods", Namespace: "default", Name: "web-0",
		RV: fmt.Sprint(len(b.h.Store) + 1), Object: []byte(obj), T: secs(t)})
	return b
}

// regraced records a deletion of web-0 (UID u) asking for g at t and the
// store's change to it 10 ms later, the pod terminating with grace was
// before.
func (b *hb) regraced(t float64, u string, g int64) *hb {
	return b.deleted(t, "workload", u, g).podVersion(t+0.01, u, g, "", "")
}

// graceFault records a fault active from start to end.
func (b *hb) graceFault(name string, start, end float64) *hb {
	b.h.Nemesis = append(b.h.Nemesis, history.Interval{ID: uint64(len(b.h.Nemesis) + 1), Name: name, Start: secs(start), End: secs(end), Healed: true})
	return b
}

// shortened is web-0 (UID a, a container ignoring TERM) deleted with 300 s
// at 2, TERM at 2.5, and its grace shortened to 5 s at 10 (seen by the
// store at 10.01).
func shortened() *hb {
	b := &hb{}
	return b.led(1, start, "n1", "web-0", "a").
		podVersion(1.5, "a", 0, "", "").
		regraced(2, "a", 300).
		led(2.5, term, "n1", "web-0", "a", grace(300)).
		regraced(10, "a", 5)
}

// PS-3, GP-5: the upper bound of a shortened grace is max(start + g, seen)
// + the reaction slack (1 s; tests run the clocks at one rate) + 2 s for
// KILL: max(2.5 + 5, 10.01) + 1 + 2 = 13.01, 10.51 s after the kill began
// at 2.5.
func TestGraceShortenedUpperBound(t *testing.T) {
	// The kubelet kept the old 300 s deadline.
	res := mustVerdict(t, CheckGrace(bg, shortened().led(302.5, kill, "n1", "web-0", "a", grace(300)).history(), Options{}), Illegal)
	ev := res.Evidence[0]
	mustMention(t, "description", ev.Description, "from 300 s to 5 s at t=10.01s", "KILL at ledger #2", "300.000 s after the kill began at ledger #1",
		"max(start + 5 s, that) + 1.000 s of wall time to react + 2.000 s (GP-3, LC-11) = 10.510 s after the start", "stated a grace of 300 s")
	if diff := cmp.Diff([]string{"a:term", "a:kill"}, evidenceActions(ev)); diff != "" {
		t.Errorf("evidence entries (-want +got):\n%s", diff)
	}
	if len(ev.API) != 1 || *ev.API[0].GracePeriodSeconds != 5 {
		t.Errorf("evidence calls %+v, want the deletion asking for 5 s", ev.API)
	}
	mustMention(t, "summary", res.Summary, "PS-3")

	// Just within the bound, still stating 300 s: the slack covers it.
	res = mustVerdict(t, CheckGrace(bg, shortened().led(13, kill, "n1", "web-0", "a", grace(300)).history(), Options{}), Ok)
	mustMention(t, "summary", res.Summary, "1 kill held to TERM by the deletion's deadline and KILL 2 s after it")
	// Just past it.
	mustVerdict(t, CheckGrace(bg, shortened().led(13.2, kill, "n1", "web-0", "a", grace(300)).history(), Options{}), Illegal)
	// The kubelet stated the shortened grace, so it learned it, and still
	// killed late: as late as if it had not.
	res = mustVerdict(t, CheckGrace(bg, shortened().led(60, kill, "n1", "web-0", "a", grace(5)).history(), Options{}), Illegal)
	mustMention(t, "description", res.Evidence[0].Description, "stated a grace of 5 s")
}

// A shortening committed after the KILL bounds nothing; a kill that began
// after the shortening counts from its own start.
func TestGraceShortenedAfterKill(t *testing.T) {
	b := &hb{}
	b.led(1, start, "n1", "web-0", "a").
		podVersion(1.5, "a", 0, "", "").
		regraced(2, "a", 5).
		led(2.5, term, "n1", "web-0", "a", grace(5)).
		led(7.5, kill, "n1", "web-0", "a", grace(5)).
		regraced(8, "a", 2)
	mustVerdict(t, CheckGrace(bg, b.history(), Options{}), Ok)

	// The kill began at 30, long after the shortening to 5 s at 10, with
	// the old grace: bound 30 + 5 + 1 + 2 = 38.
	late := func(killAt float64) *hb {
		b := &hb{}
		return b.led(1, start, "n1", "web-0", "a").
			podVersion(1.5, "a", 0, "", "").
			regraced(2, "a", 300).
			regraced(10, "a", 5).
			led(30, term, "n1", "web-0", "a", grace(300)).
			led(killAt, kill, "n1", "web-0", "a", grace(300))
	}
	mustVerdict(t, CheckGrace(bg, late(37.9).history(), Options{}), Ok)
	mustVerdict(t, CheckGrace(bg, late(38.2).history(), Options{}), Illegal)
}

// Two shortenings: each bounds the kill from when the store showed it.
func TestGraceShortenedTwice(t *testing.T) {
	twice := func(killAt float64, stated int64) *hb {
		b := &hb{}
		return b.led(1, start, "n1", "web-0", "a").
			podVersion(1.5, "a", 0, "", "").
			regraced(2, "a", 300).
			led(2.5, term, "n1", "web-0", "a", grace(300)).
			regraced(10, "a", 100).
			regraced(50, "a", 5).
			led(killAt, kill, "n1", "web-0", "a", grace(stated))
	}
	// The kubelet learned 100 s but not 5 s: held to 50.01 + 1 + 2.
	res := mustVerdict(t, CheckGrace(bg, twice(105, 100).history(), Options{}), Illegal)
	mustMention(t, "description", res.Evidence[0].Description, "from 100 s to 5 s at t=50.01s")
	mustVerdict(t, CheckGrace(bg, twice(53, 100).history(), Options{}), Ok)
	// It learned neither: the first one's bound is 2.5 + 100 + 1 + 2 =
	// 105.5.
	res = mustVerdict(t, CheckGrace(bg, twice(120, 300).history(), Options{}), Illegal)
	mustMention(t, "description", res.Evidence[0].Description, "from 300 s to 100 s")
	mustVerdict(t, CheckGrace(bg, twice(105.4, 300).history(), Options{}), Illegal) // the 5 s one
}

// A fault overlapping the window from the shortening to the kill's end may
// have delayed the kubelet: no judgement, whatever the fault.
func TestGraceShortenedDuringFault(t *testing.T) {
	for _, f := range []struct {
		name       string
		start, end float64
		want       Verdict
	}{
		{"pause-kubelet", 9, 12, Ok},
		{"kill-kubelet", 100, 200, Ok},
		{"partition-node", 0, 10.5, Ok},
		{"clock-skew", 303, 310, Illegal}, // after the KILL
		{"isolate-one", 1, 9, Illegal},    // healed before the shortening
	} {
		t.Run(f.name, func(t *testing.T) {
			b := shortened().led(302.5, kill, "n1", "web-0", "a", grace(300)).graceFault(f.name, f.start, f.end)
			res := mustVerdict(t, CheckGrace(bg, b.history(), Options{}), f.want)
			if f.want == Ok {
				mustMention(t, "summary", res.Summary, "1 kill not held to some deletion's deadline: a fault overlapped")
			}
		})
	}
}

// A container that exits by itself long after the shortened deadline was
// never killed: Illegal if its kubelet was seen alive past the bound, not
// judged if it may have stopped (with the cluster) first.
func TestGraceShortenedExitWithoutKill(t *testing.T) {
	b := shortened().call(30, "kubelet:n1", "update", "leases", "kube-node-lease", "n1").led(100, exit, "n1", "web-0", "a")
	res := mustVerdict(t, CheckGrace(bg, b.history(), Options{}), Illegal)
	mustMention(t, "description", res.Evidence[0].Description, "the container's exit at ledger #2")
	mustVerdict(t, CheckGrace(bg, shortened().led(100, exit, "n1", "web-0", "a").history(), Options{}), Ok)
	// Another node's kubelet proves nothing.
	b = shortened().call(30, "kubelet:n2", "update", "leases", "kube-node-lease", "n2").led(100, exit, "n1", "web-0", "a")
	mustVerdict(t, CheckGrace(bg, b.history(), Options{}), Ok)
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

// hung is web-0 (UID a, a container ignoring TERM, a preStop hook that never
// ends) deleted with grace g at 0.5 (the store's change at 0.51), its hook
// started at 1 and abandoned by TERM at termAt, KILL at killAt. The grace
// deadline is 1 + g.
func hung(g int64, termAt, killAt float64, mods ...func(*hb)) *hb {
	b := &hb{}
	b.led(0, start, "n1", "web-0", "a").
		podVersion(0.2, "a", 0, "", "").
		regraced(0.5, "a", g).
		led(1, preStart, "n1", "web-0", "a")
	for _, m := range mods {
		m(b)
	}
	return b.led(termAt, term, "n1", "web-0", "a", grace(g)).
		led(termAt+0.001, preEnd, "n1", "web-0", "a").
		led(killAt, kill, "n1", "web-0", "a", grace(g)).
		led(killAt+0.1, exit, "n1", "web-0", "a")
}

// LC-11: a preStop hook still running at the grace deadline gets TERM
// there and KILL 2 s later (the one 2 s extension), within the reaction
// slack (1 s): with grace 10 and the hook from 1, TERM by 12 and KILL by 14.
// A kubelet that waits 2 s more for the hook and then gives 2 s after TERM
// (KILL at the deadline + 4 s) is late.
func TestGraceHangingPreStop(t *testing.T) {
	res := mustVerdict(t, CheckGrace(bg, hung(10, 11, 13).history(), Options{}), Ok)
	mustMention(t, "summary", res.Summary, "1 kill held to TERM by the deletion's deadline and KILL 2 s after it")
	mustVerdict(t, CheckGrace(bg, hung(10, 11.9, 13.9).history(), Options{}), Ok)

	// KILL at the deadline + 4 s, TERM at the deadline.
	res = mustVerdict(t, CheckGrace(bg, hung(10, 11, 15).history(), Options{}), Illegal)
	ev := res.Evidence[0]
	mustMention(t, "description", ev.Description, "marked the pod terminating with a grace of 10 s at t=510ms",
		"KILL at ledger #4", "14.000 s after the kill began at ledger #1",
		"max(start + 10 s, that) + 1.000 s of wall time to react + 2.000 s (GP-3, LC-11) = 13.000 s after the start", "LC-11")
	if diff := cmp.Diff([]string{"a:prestop-start", "a:term", "a:prestop-end", "a:kill", "a:exit"}, evidenceActions(ev)); diff != "" {
		t.Errorf("evidence entries (-want +got):\n%s", diff)
	}
	if len(ev.API) != 1 || *ev.API[0].GracePeriodSeconds != 10 {
		t.Errorf("evidence calls %+v, want the deletion asking for 10 s", ev.API)
	}
	// The old schedule: the hook waited on 2 s past the deadline, TERM
	// then, KILL 2 s after TERM.
	res = mustVerdict(t, CheckGrace(bg, hung(10, 13, 15).history(), Options{}), Illegal)
	mustMention(t, "description", res.Evidence[0].Description, "TERM at ledger #2", "12.000 s after the kill began",
		"max(start + 10 s, that) + 1.000 s of wall time to react = 11.000 s after the start")
	// The lower bound still holds: KILL no sooner than TERM + 2 s.
	res = mustVerdict(t, CheckGrace(bg, hung(10, 11, 12.5).history(), Options{}), Illegal)
	mustMention(t, "description", res.Evidence[0].Description, "TERM + 2 s")
	// Grace 1 with a hanging hook: TERM at 2, KILL at 4.
	mustVerdict(t, CheckGrace(bg, hung(1, 2, 4).history(), Options{}), Ok)
	mustVerdict(t, CheckGrace(bg, hung(1, 4, 6).history(), Options{}), Illegal)
}

// A grace shortened while the hook hangs: the hook is abandoned at the new
// deadline, or at once when that is past, and KILL follows 2 s later.
func TestGraceHangingPreStopShortened(t *testing.T) {
	at := func(shortAt float64) func(*hb) {
		return func(b *hb) { b.regraced(shortAt, "a", 5) }
	}
	// Shortened to 5 s at 3 (seen 3.01), the new deadline 6 still ahead:
	// TERM by max(6, 3.01) + 1 = 7, KILL by 9.
	mustVerdict(t, CheckGrace(bg, hung(300, 6, 8, at(3)).history(), Options{}), Ok)
	res := mustVerdict(t, CheckGrace(bg, hung(300, 8, 10, at(3)).history(), Options{}), Illegal)
	mustMention(t, "description", res.Evidence[0].Description, "from 300 s to 5 s at t=3.01s", "TERM at ledger #2")
	// Shortened at 8 (seen 8.01), the deadline 6 already past: TERM at once,
	// by 9.01, KILL by 11.01.
	mustVerdict(t, CheckGrace(bg, hung(300, 8.05, 10.05, at(8)).history(), Options{}), Ok)
	mustVerdict(t, CheckGrace(bg, hung(300, 10.05, 12.05, at(8)).history(), Options{}), Illegal)
}

// An orphan's kill (the object force deleted before the kill began, LC-13)
// has the kubelet's own grace: the deletion's deadline does not bound it.
func TestGraceUpperBoundOrphan(t *testing.T) {
	b := &hb{}
	b.led(0, start, "n1", "web-0", "a").
		podVersion(0.2, "a", 0, "", "").
		regraced(0.5, "a", 10).
		storeDeleted(0.8, "a", "n1", "Running").
		led(1, term, "n1", "web-0", "a", grace(10)).
		led(20, kill, "n1", "web-0", "a", grace(10))
	mustVerdict(t, CheckGrace(bg, b.history(), Options{}), Ok)
}

// A second deletion asked for 62 s of a pod deleted with 281 s when 60.5 s
// had passed by the kubelet's clock, but more by the API server's: the API
// server moved the deadline to now with grace 1 (kube-apiserver's rule for
// an expired shortening), and the kubelet honoured that 1 s, killing 61.45 s
// after the kill began. That is Ok, however early against the 62 s asked
// for. With the store showing the grace shortened to 62 s instead, the same
// kill is the kubelet's own wrong grace (GP-1, Illegal), and so is a kill
// honouring 1 s before the API server shortened anything.
func TestGraceExpiredShortening(t *testing.T) {
	expired := func(shortenTo int64, killAt float64) *hb {
		b := &hb{}
		b.led(1, start, "n1", "web-0", "a").
			podVersion(1.5, "a", 0, "", "").
			regraced(10, "a", 281).
			led(10.05, term, "n1", "web-0", "a", grace(281))
		if killAt > 70.5 {
			b.deleted(70.5, "workload", "a", 62).
				podVersion(70.51, "a", shortenTo, "", "")
		}
		return b.led(killAt, kill, "n1", "web-0", "a", grace(1))
	}
	res := mustVerdict(t, CheckGrace(bg, expired(1, 71.5).history(), Options{}), Ok)
	mustMention(t, "summary", res.Summary, "1 kill honoured the 1 s the API server set")

	res = mustVerdict(t, CheckGrace(bg, expired(62, 71.5).history(), Options{}), Illegal)
	mustMention(t, "description", res.Evidence[0].Description, "GP-1")

	mustVerdict(t, CheckGrace(bg, expired(1, 30).history(), Options{}), Illegal)

	// The store's record of the shortening to 1 s may come after the kill
	// (its follower lags the kubelet's own watch): the DELETE that made
	// that version, invoked before the kill, answered with it. A DELETE
	// invoked after the kill explains nothing.
	lagged := func(callAt float64) *hb {
		b := &hb{}
		b.led(1, start, "n1", "web-0", "a").
			podVersion(1.5, "a", 0, "", "").
			regraced(10, "a", 281).
			led(10.05, term, "n1", "web-0", "a", grace(281)).
			deleted(callAt, "workload", "a", 62)
		b.h.API[len(b.h.API)-1].ResourceVersion = fmt.Sprint(len(b.h.Store) + 1)
		return b.led(71.5, kill, "n1", "web-0", "a", grace(1)).
			podVersion(71.6, "a", 1, "", "")
	}
	res = mustVerdict(t, CheckGrace(bg, lagged(70.5).history(), Options{}), Ok)
	mustMention(t, "summary", res.Summary, "1 kill honoured the 1 s the API server set")
	mustVerdict(t, CheckGrace(bg, lagged(71.55).history(), Options{}), Illegal)
}
