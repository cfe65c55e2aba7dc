package checker

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/podsafe/podsafe/history"
)

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
