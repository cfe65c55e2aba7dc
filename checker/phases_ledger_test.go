package checker

import (
	"testing"

	"github.com/podsafe/podsafe/history"
)

// poInitPod is pod a with init containers names (a "side…" name is a
// sidecar), bound to n1.
func poInitPod(names ...string) *hb {
	return (&hb{}).pod(0.5, added, 10, poObj("a", poBound("n1"), poInits(names...)))
}

func poLed(b *hb, t float64, action history.LedgerAction, container string, code int) *hb {
	return b.led(t, action, "n1", "web-0", "a", ctr(container), func(e *history.LedgerEntry) { e.ExitCode = code })
}

func TestPhasesInitOrder(t *testing.T) {
	ok := poInitPod("init-a", "init-b")
	poLed(ok, 1, start, "init-a", 0)
	poLed(ok, 2, exit, "init-a", 1) // fails, and is retried
	poLed(ok, 12, start, "init-a", 0)
	poLed(ok, 13, exit, "init-a", 0)
	poLed(ok, 14, start, "init-b", 0)
	poLed(ok, 15, exit, "init-b", 0)
	poLed(ok, 16, start, "c", 0)
	res := mustVerdict(t, CheckPhases(bg, ok.history(), Options{}), Ok)
	mustMention(t, "summary", res.Summary, "4 container starts")

	for _, tc := range []struct {
		name  string
		build func(b *hb)
		words []string
	}{{
		name: "app before the init containers",
		build: func(b *hb) {
			poLed(b, 1, start, "init-a", 0)
			poLed(b, 2, exit, "init-a", 0)
			poLed(b, 3, start, "c", 0)
		},
		words: []string{"container c started", "before init container init-b ever ran"},
	}, {
		name: "second init while the first runs",
		build: func(b *hb) {
			poLed(b, 1, start, "init-a", 0)
			poLed(b, 2, start, "init-b", 0)
		},
		words: []string{"container init-b started", "while init container init-a", "still ran"},
	}, {
		name: "app after a failed init container",
		build: func(b *hb) {
			poLed(b, 1, start, "init-a", 0)
			poLed(b, 2, exit, "init-a", 0)
			poLed(b, 3, start, "init-b", 0)
			poLed(b, 4, exit, "init-b", 1)
			poLed(b, 5, start, "c", 0)
		},
		words: []string{"container c started", "init-b's last run exited 1"},
	}, {
		name: "init container again while the app runs",
		build: func(b *hb) {
			poLed(b, 1, start, "init-a", 0)
			poLed(b, 2, exit, "init-a", 0)
			poLed(b, 3, start, "init-b", 0)
			poLed(b, 4, exit, "init-b", 0)
			poLed(b, 5, start, "c", 0)
			poLed(b, 6, start, "init-b", 0)
		},
		words: []string{"container init-b started", "while app container c"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			b := poInitPod("init-a", "init-b")
			tc.build(b)
			res := poIllegal(t, b.history(), "LC-10", tc.words...)
			if len(res.Evidence[0].Ledger) == 0 {
				t.Errorf("evidence without ledger entries")
			}
		})
	}
}

// A sidecar (an init container with restartPolicy Always) need only have
// started before the next container; it runs on beside them.
func TestPhasesInitSidecar(t *testing.T) {
	ok := poInitPod("side-proxy", "init-a")
	poLed(ok, 1, start, "side-proxy", 0)
	poLed(ok, 2, start, "init-a", 0)
	poLed(ok, 3, exit, "init-a", 0)
	poLed(ok, 4, start, "c", 0)
	poLed(ok, 5, exit, "side-proxy", 1)
	poLed(ok, 6, start, "side-proxy", 0)
	mustVerdict(t, CheckPhases(bg, ok.history(), Options{}), Ok)

	bad := poInitPod("side-proxy", "init-a")
	poLed(bad, 1, start, "init-a", 0)
	poLed(bad, 2, exit, "init-a", 0)
	poLed(bad, 3, start, "c", 0)
	poIllegal(t, bad.history(), "LC-10", "container init-a started", "before the sidecar init container side-proxy ever started")
}

// After a power loss the new machine runs the pod afresh: init containers
// first again.
func TestPhasesInitAfterPowerOff(t *testing.T) {
	b := poInitPod("init-a")
	poLed(b, 1, start, "init-a", 0)
	poLed(b, 2, exit, "init-a", 0)
	poLed(b, 3, start, "c", 0)
	poLed(b, 4, history.LedgerPowerOff, "c", 0)
	poLed(b, 4, exit, "c", 137)
	poLed(b, 10, start, "init-a", 0)
	poLed(b, 11, exit, "init-a", 0)
	poLed(b, 12, start, "c", 0)
	mustVerdict(t, CheckPhases(bg, b.history(), Options{}), Ok)
}

// Nothing starts in a pod after the store recorded it terminal, unless the
// node controller failed it for a lost node (LC-4).
func TestPhasesStartAfterTerminal(t *testing.T) {
	build := func(reason string) *hb {
		b := (&hb{}).pod(0.5, added, 10, poObj("a", poBound("n1"), poPolicy(poOnFailure)))
		poLed(b, 1, start, "c", 0)
		poLed(b, 2, exit, "c", 0)
		phase := poSucceeded
		if reason == poReasonNodeLost {
			phase = poFailed
		}
		b.pod(3, modified, 11, poObj("a", poBound("n1"), poPolicy(poOnFailure), poPhaseIs(phase), poExitedCtr("c", 0), poReason(reason)))
		return poLed(b, 4, start, "c", 0)
	}
	poIllegal(t, build("").history(), "LC-2", "container c started", "after the store recorded the pod Succeeded at MODIFIED rv 11")
	mustVerdict(t, CheckPhases(bg, build(poReasonNodeLost).history(), Options{}), Ok)
}
