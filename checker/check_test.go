package checker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsafe/podsafe/history"
)

func TestMerge(t *testing.T) {
	tests := []struct {
		in   []Verdict
		want Verdict
	}{
		{nil, Ok},
		{[]Verdict{Ok, Ok}, Ok},
		{[]Verdict{Ok, Unknown}, Unknown},
		{[]Verdict{Unknown, Illegal, Ok}, Illegal},
		{[]Verdict{Ok, "garbled"}, Unknown},
	}
	for _, tt := range tests {
		if got := MergeVerdicts(tt.in...); got != tt.want {
			t.Errorf("MergeVerdicts(%v) = %s, want %s", tt.in, got, tt.want)
		}
	}
	if got := Merge([]Result{{Verdict: Ok}, {Verdict: Unknown}}); got != Unknown {
		t.Errorf("Merge = %s, want Unknown", got)
	}
}

// everything is a history every checker applies to.
func everything(t *testing.T) *history.History {
	b := &hb{}
	// The fencing controller ran (the authority checker judges PS-14 only
	// then).
	b.call(0.1, identityFencing, "list", "nodes", "", "")
	b.created(0.5, identityPet, "web-0", "a").
		pod(0.6, added, 1, poObj("a")).
		pod(0.8, modified, 2, poObj("a", poBound("n1"))).
		led(1, history.LedgerStart, "n1", "web-0", "a").
		led(1.2, history.LedgerExit, "n1", "web-0", "a", func(e *history.LedgerEntry) { e.ExitCode = 1 }).
		led(11.5, history.LedgerStart, "n1", "web-0", "a").
		led(12, history.LedgerWrite, "n1", "web-0", "a", vol("v0", 3)).
		deleted(13, "workload", "a", 30).
		led(14, history.LedgerTerm, "n1", "web-0", "a", grace(30)).
		led(15, history.LedgerExit, "n1", "web-0", "a").
		// Its kubelet finishes the deletion (PS-8), of a pod of its own
		// node (PS-1).
		deleted(16, "kubelet:n1", "a", 0)
	b.h.Ops = ops(t, "0 0 10 create x a -> ok")
	h := b.history()
	// A register run's watches, reads, lists and committed Leases.
	w := cleanWatch()
	h.Ops = append(h.Ops, w.h.Ops...)
	h.Store = append(h.Store, w.h.Store...)
	h.Logs = append(h.Logs, w.h.Logs...)
	h.Watch = w.h.Watch
	// On the embedded target, where the authority checker also judges the
	// store's removals and the refusals of graceful deletions (LC-11, PS-3).
	h.Meta.Extra = map[string]string{history.ExtraTarget: history.TargetEmbedded}
	return h
}

func TestCatalogNamesEveryChecker(t *testing.T) {
	h := everything(t)
	var names []string
	for _, c := range Catalog() {
		names = append(names, c.Name)
		if c.Description == "" || len(c.Guarantees) == 0 {
			t.Errorf("catalog entry %+v lacks a description or guarantees", c)
		}
	}
	// The scheduler's decisions come from histories of their own: a legal
	// preemption, and a legal placement under a zone constraint.
	preempt := preemptCase{victim: prioPod("victim", 1000, "800m"), preemptor: prioPod("pre", 3000, "500m")}.history(t)
	spread := spreadCase{zones("node1", "zoneA", "node2", "zoneA", "node3", "zoneB", "node4", "zoneB"),
		[]string{"node1", "node2", "node3"}, incoming(spreadOn(zoneKey, 1))}.history(t, "node4")
	// The node controller's mark of a node that stopped heart-beating.
	nb := newNodeHist(t, 10*time.Second).status(0.5, corev1.ConditionTrue, "KubeletReady", 0.5).renew(every(1, 20, 2)...)
	nb.status(31, corev1.ConditionUnknown, nodeReasonStatusUnknown, 0)
	ran := map[string]bool{}
	// A container's probes and a kill for one.
	probes := prClean().history()
	// A cluster converged after its final heal.
	settled := cvHistory(t, converged(), time.Second)
	for i, hist := range []*history.History{h, preempt, spread, &nb.h, probes, settled} {
		for _, r := range Check(context.Background(), hist, Options{}) {
			if i > 0 && r.Checker != PreemptionChecker && r.Checker != SpreadChecker && r.Checker != NodeHealthChecker && r.Checker != ProbeChecker && r.Checker != ConvergenceChecker {
				continue // the scheduler's, nodes' and probes' histories are minimal for their checkers only
			}
			ran[r.Checker] = true
			if r.Verdict != Ok {
				t.Errorf("%s: %s: %s", r.Checker, r.Verdict, r.Summary)
			}
			if diff := cmp.Diff(catalogGuarantees(r.Checker), r.Guarantees); diff != "" {
				t.Errorf("%s judged other guarantees than the catalog lists (-catalog +result):\n%s", r.Checker, diff)
			}
		}
	}
	var order []string
	for _, n := range names {
		if ran[n] {
			order = append(order, n)
		}
	}
	if diff := cmp.Diff(names, order); diff != "" {
		t.Errorf("checkers run vs catalog (-catalog +ran):\n%s", diff)
	}
}

func TestCheckWritesVisualization(t *testing.T) {
	dir := t.TempDir()
	h := &history.History{Ops: ops(t, "0 0 10 create x a -> ok", "1 20 30 get x -> a")}
	path := filepath.Join(dir, "linearizability.html")
	results := Check(context.Background(), h, Options{VisualizationPath: path})
	if len(results) != 1 || results[0].Verdict != Ok {
		t.Fatalf("results %+v, want one Ok", results)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("no visualization: %v", err)
	}

	bad := filepath.Join(dir, "missing", "x.html")
	results = Check(context.Background(), h, Options{VisualizationPath: bad})
	if len(results) != 1 || results[0].Verdict != Ok || !strings.Contains(results[0].Summary, bad) {
		t.Errorf("results %+v, want Ok with the write failure in the summary", results)
	}
}

func TestCheck(t *testing.T) {
	register := ops(t, "0 0 10 create x a -> ok", "1 20 30 get x -> absent")
	b := &hb{}
	writes := b.led(1, history.LedgerWrite, "n1", "web-0", "a", vol("v0", 3)).
		led(2, history.LedgerWrite, "n2", "web-0", "b", vol("v0", 4)).
		led(3, history.LedgerWrite, "n1", "web-0", "a", vol("v0", 3)).h.Ledger
	b = &hb{}
	kills := b.led(1, history.LedgerTerm, "n1", "web-0", "a", grace(5)).
		led(7, history.LedgerKill, "n1", "web-0", "a", grace(5)).h.Ledger
	b = &hb{}
	deletions := b.call(1, "workload", "delete", "pods", "default", "web-0", askGrace(3)).
		call(1, "workload", "get", "pods", "default", "web-0").h.API
	watched := cleanWatch().h
	stale := cleanWatch()
	stale.get(17, 18, "k1", "a@5") // after the watch delivered k1=b at RV 7
	tests := []struct {
		name   string
		ops    []history.Op
		ledger []history.LedgerEntry
		api    []history.APICall
		h      *history.History // instead of the fields above
		want   []string         // checker names
		v      Verdict
	}{
		{name: "no operations", v: Ok},
		{name: "other workloads only", ops: []history.Op{{ID: 1, Func: "scale", Key: "rs", Status: history.StatusOK}}, v: Ok},
		{name: "register operations", ops: register, want: []string{RegisterChecker}, v: Illegal},
		{name: "storage writes only", ledger: writes, want: []string{StorageChecker}, v: Illegal},
		{name: "kills only", ledger: kills, want: []string{GraceChecker}, v: Ok},
		{name: "API calls without a deletion", api: deletions[1:], v: Ok},
		{name: "deletions", api: deletions, want: []string{AuthorityChecker}, v: Ok},
		{name: "watches", h: &watched, v: Ok,
			want: []string{RegisterChecker, RevisionChecker, WatchOrderChecker, WatchValueChecker, ReadAfterWatchChecker, ListChecker}},
		{name: "a stale read after a watch", h: &stale.h, v: Illegal,
			want: []string{RegisterChecker, RevisionChecker, WatchOrderChecker, WatchValueChecker, ReadAfterWatchChecker, ListChecker}},
		{name: "everything", ops: register, ledger: append(writes, kills...), api: deletions,
			want: []string{RegisterChecker, StorageChecker, GraceChecker, AuthorityChecker}, v: Illegal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.h
			if h == nil {
				h = &history.History{Ops: tt.ops, Ledger: tt.ledger, API: tt.api}
			}
			results := Check(context.Background(), h, Options{})
			var names []string
			for _, r := range results {
				names = append(names, r.Checker)
			}
			if diff := cmp.Diff(tt.want, names); diff != "" {
				t.Errorf("checkers run (-want +got):\n%s", diff)
			}
			if got := Merge(results); got != tt.v {
				t.Errorf("overall verdict %s, want %s", got, tt.v)
			}
		})
	}
}
