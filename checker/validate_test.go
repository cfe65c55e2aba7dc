package checker

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/podsafe/podsafe/history"
)

// mustUnassumed wants res to be Unknown for the broken assumption what,
// with evidence; it returns the first evidence.
func mustUnassumed(t *testing.T, res Result, what assumption, words ...string) Evidence {
	t.Helper()
	res = mustVerdict(t, res, Unknown)
	mustMention(t, "summary", res.Summary, "not judged", string(what))
	if len(res.Evidence) == 0 {
		t.Fatalf("no evidence of the broken assumption")
	}
	mustMention(t, "evidence", res.Evidence[0].Description, append([]string{string(what)}, words...)...)
	return res.Evidence[0]
}

// A completion that does not match its invocation: the register checker
// does not judge, even a history it would find illegal.
func TestAssumeOpsWellFormed(t *testing.T) {
	// A stale read: Illegal when the premises hold.
	stale := []string{"0 0 10 create x a -> ok", "1 20 30 cas x a b -> ok", "2 40 50 get x -> a"}
	mustVerdict(t, CheckRegister(bg, ops(t, stale...), Options{}), Illegal)

	for _, tc := range []struct {
		name  string
		spoil func([]history.Op) []history.Op
		words []string
		ops   []uint64 // the evidence's
	}{
		{"returned before invoked", func(h []history.Op) []history.Op { h[1].Return = 15; return h },
			[]string{"op 2 (cas \"x\")", "before its invocation at 20ns"}, []uint64{2}},
		{"known outcome without a return", func(h []history.Op) []history.Op { h[2].Return = 1<<63 - 1; return h },
			[]string{"op 3 (get \"x\") completed (ok)", "or never"}, []uint64{3}},
		{"one ID twice", func(h []history.Op) []history.Op { h[2].ID = 1; return h },
			[]string{"operation ID 1 is recorded twice"}, []uint64{1, 1}},
		{"a client's times go back", func(h []history.Op) []history.Op {
			h[0].Process, h[1].Process = 5, 5
			h[0].ID, h[1].ID = 2, 1 // the cas was made first, yet invoked later
			return h
		}, []string{"client 5 invoked op 2 (create \"x\") at 0s, before its earlier op 1 (cas \"x\") at 20ns"}, []uint64{1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.spoil(ops(t, stale...))
			ev := mustUnassumed(t, CheckRegister(bg, h, Options{}), assumeOpsWellFormed, tc.words...)
			var ids []uint64
			for _, op := range ev.Ops {
				ids = append(ids, op.ID)
			}
			if diff := cmp.Diff(tc.ops, ids); diff != "" {
				t.Errorf("evidence operations (-want +got):\n%s", diff)
			}
		})
	}
}

// A client with two judged operations outstanding at once: the register
// checker does not judge it, whatever the operations say; an operation of
// unknown outcome does not count.
func TestAssumeOneOutstanding(t *testing.T) {
	stale := ops(t, "0 0 10 create x a -> ok", "1 20 30 cas x a b -> ok", "2 40 50 get x -> a", "2 45 55 get x -> b")
	ev := mustUnassumed(t, CheckRegister(bg, stale, Options{}), assumeOneOutstanding,
		"client 2 invoked op 4 (get \"x\") at 45ns while its op 3 (get \"x\"), invoked at 40ns, was still outstanding (returned at 50ns)")
	if len(ev.Ops) != 2 || ev.Ops[0].ID != 3 || ev.Ops[1].ID != 4 {
		t.Errorf("evidence operations %+v, want ops 3 and 4", ev.Ops)
	}
	// The same operations by three clients are judged: a stale read.
	stale[3].Process = 3
	mustVerdict(t, CheckRegister(bg, stale, Options{}), Illegal)

	// A client that gave up on an operation may go on (it should take a
	// new identity, but its unknown operation may take effect at any time
	// anyway), and a read that returned nothing is judged by no one.
	mustVerdict(t, CheckRegister(bg, ops(t, "0 0 inf create x a -> ?", "0 5 10 get x -> absent", "0 7 12 get x -> ?"), Options{}), Ok)
}

// An API call that returns before it is invoked, or a fault that ends
// before it began: the checkers that place calls and faults in time do not
// judge.
func TestAssumeCallsWellFormed(t *testing.T) {
	b := endPod(runningPod().force(10, "node-controller"))
	mustVerdict(t, CheckAuthority(bg, b.history(), Options{}), Illegal)
	b.h.API[1].Return = b.h.API[1].Invoke - 1
	ev := mustUnassumed(t, CheckAuthority(bg, b.history(), Options{}), assumeCallsWellFormed,
		"the call node-controller delete pods default/web-0 grace 0", "returned before it was invoked")
	if len(ev.API) != 1 || ev.API[0].Identity != "node-controller" {
		t.Errorf("evidence calls %+v, want the force deletion", ev.API)
	}

	b = endPod(runningPod().force(10, "node-controller"))
	b.h.Nemesis = []history.Interval{{Name: "partition-node", Description: "cut n1", Start: secs(20), End: secs(19), Healed: true}}
	mustUnassumed(t, CheckAuthority(bg, b.history(), Options{}), assumeCallsWellFormed,
		"fault partition-node (cut n1) ended at 19s, before it began at 20s")
}

// The recorder's clock goes back along a container's entries: the checkers
// that place them among API calls do not judge.
func TestAssumeRecorderClock(t *testing.T) {
	// A pet force deleted by the node controller while it still ran: the
	// container's exit is recorded after its start, but 3 s before it.
	b := (&hb{}).created(0.5, identityPet, "web-0", "a").led(5, start, "n1", "web-0", "a").
		force(10, "node-controller").led(2, exit, "n1", "web-0", "a")
	ev := mustUnassumed(t, CheckAuthority(bg, b.history(), Options{}), assumeRecorderClock,
		`container "c" of pod default/web-0 (UID a) has exit at ledger #1 (t=2s`, "recorded after its start at ledger #0 (t=5s", "3s later")
	if diff := cmp.Diff([]string{"a:start", "a:exit"}, evidenceActions(ev)); diff != "" {
		t.Errorf("evidence entries (-want +got):\n%s", diff)
	}
	for _, res := range []Result{CheckAtMostOne(bg, b.history(), Options{}), CheckGrace(bg, graceKillRecordedEarly().history(), Options{})} {
		mustUnassumed(t, res, assumeRecorderClock)
	}
	// Within the slack of two writers racing for the recorder, it is
	// judged.
	b = (&hb{}).created(0.5, identityPet, "web-0", "a").led(5, start, "n1", "web-0", "a").
		force(10, "node-controller").led(4.5, exit, "n1", "web-0", "a", func(e *history.LedgerEntry) { e.Scaled = e.Scaled.Add(40 * time.Second) })
	mustVerdict(t, CheckAuthority(bg, b.history(), Options{}), Ok)
}

// graceKillRecordedEarly is graceKill(33) with the KILL's recorder time
// 30 s early.
func graceKillRecordedEarly() *hb {
	b := graceKill(33)
	i := slices.IndexFunc(b.h.Ledger, func(e history.LedgerEntry) bool { return e.Action == kill })
	b.h.Ledger[i].T -= secs(30)
	return b
}

// A node's clock goes back along a container's entries, with no fault to
// move it: the checkers that measure durations on it do not judge. Across
// a clock fault of that node it is judged.
func TestAssumeNodeClock(t *testing.T) {
	// KILL 13 s after TERM on the node's clock, which then reads 20 s
	// before that at the exit: a kill that would be too early.
	b := graceKill(20)
	b.h.Ledger[len(b.h.Ledger)-1].Scaled = scaledBase.Add(time.Duration(secs(0.5)))
	ev := mustUnassumed(t, CheckGrace(bg, b.history(), Options{}), assumeNodeClock,
		"node n1's clock goes back", `container "c" of pod default/web-0 (UID a) has exit at ledger #5`, "19.500 s before its kill at ledger #4")
	if diff := cmp.Diff([]string{"a:kill", "a:exit"}, evidenceActions(ev)); diff != "" {
		t.Errorf("evidence entries (-want +got):\n%s", diff)
	}
	mustUnassumed(t, CheckBackoff(bg, restartAfterClockBack().history(), Options{}), assumeNodeClock, "node n1's clock goes back")

	b.h.Nemesis = []history.Interval{{Name: "clock-jump", Targets: []string{"kubelet/n1"}, Start: secs(19), End: secs(30), Healed: true}}
	mustVerdict(t, CheckGrace(bg, b.history(), Options{}), Illegal)
	// The same from the structured record, whatever the fault's name.
	b.h.Nemesis = []history.Interval{{Name: "some-new-fault", Effect: history.EffectClock, Components: []string{"agent-n1"},
		Nodes: []string{"n1"}, Start: secs(19), End: secs(30), Healed: true}}
	mustVerdict(t, CheckGrace(bg, b.history(), Options{}), Illegal)
	b.h.Nemesis[0].Effect = history.EffectCut
	mustUnassumed(t, CheckGrace(bg, b.history(), Options{}), assumeNodeClock, "node n1's clock goes back")
	// At-most-one orders runs by the ledger and measures nothing on the
	// node's clock: it judges.
	if res := CheckAtMostOne(bg, restartAfterClockBack().history(), Options{}); res.Verdict == Unknown {
		t.Errorf("at-most-one: %s: %s", res.Verdict, res.Summary)
	}
}

// restartAfterClockBack is a container of web-0 (UID a) that exits and
// starts again 1 s later by the recorder, its node's clock 30 s back.
func restartAfterClockBack() *hb {
	b := (&hb{}).created(0.5, identityPet, "web-0", "a").
		led(1, start, "n1", "web-0", "a").
		led(20, exit, "n1", "web-0", "a", func(e *history.LedgerEntry) { e.ExitCode = 1 }).
		led(21, start, "n1", "web-0", "a", func(e *history.LedgerEntry) { e.Scaled = e.Scaled.Add(-30 * time.Second) })
	return b
}

// Check answers Unknown for each checker that rests on a broken
// assumption, and judges the others.
func TestCheckUnassumed(t *testing.T) {
	b := graceKillRecordedEarly()
	b.led(40, history.LedgerWrite, "n1", "web-0", "a", vol("v0", 1))
	h := b.history()
	h.Ops = ops(t, "0 0 10 create x a -> ok", "0 5 15 get x -> a")
	got := map[string]Verdict{}
	for _, r := range Check(bg, h, Options{}) {
		got[r.Checker] = r.Verdict
	}
	want := map[string]Verdict{
		RegisterChecker:  Unknown, // one client, two operations at once
		AtMostOneChecker: Unknown, // the recorder's clock goes back
		GraceChecker:     Unknown,
		AuthorityChecker: Unknown,
		StorageChecker:   Ok, // reads the ledger's order only
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("verdicts (-want +got):\n%s", diff)
	}
}
