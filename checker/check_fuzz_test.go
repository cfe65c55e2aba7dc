package checker

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/podsafe/podsafe/history"
)

// fuzzCheckTimeout bounds each checker in FuzzCheck; fuzzCheckBound is how
// long Check may take in all before the fuzzer calls it a hang.
const (
	fuzzCheckTimeout = 20 * time.Millisecond
	fuzzCheckBound   = 5 * time.Second
)

// FuzzCheck runs Check over whatever history.Read accepts. Check never
// panics, runs exactly the checkers that apply (in Catalog order, each
// once, with the catalog's guarantees and a verdict of Ok, Illegal or
// Unknown), answers within its timeout, and leaves the history as it was.
func FuzzCheck(f *testing.F) {
	seeds := []*history.History{
		runningPod().force(10, identityAdmin).history(),
		endPod(runningPod().force(10, "kubelet:n1")).history(),
		runningPod().deleted(5, "workload", "a", 30).led(6, term, "n1", "web-0", "a", grace(30)).led(7, exit, "n1", "web-0", "a").history(),
		&cleanWatch().h,
	}
	// The start of a generated run: every kind of event, small enough to
	// fuzz quickly (a whole run is 90 KB).
	for seed := range uint64(2) {
		h := generateRun(runConfig{Seed: seed, Events: 40, RegisterShare: 0.3,
			Nodes: 3, Zones: 2, Sets: 1, Replicas: 2, ReplicaSets: 1, Members: 2, Faults: 2, Scale: 50})
		h.Ops, h.API, h.Ledger, h.Store, h.Logs = h.Ops[:min(len(h.Ops), 8)], h.API[:min(len(h.API), 6)],
			h.Ledger[:min(len(h.Ledger), 10)], h.Store[:min(len(h.Store), 5)], h.Logs[:min(len(h.Logs), 2)]
		seeds = append(seeds, h)
	}
	for _, h := range seeds {
		f.Add(encodeHistory(h))
	}
	f.Add([]byte(`{"kind":"meta","t":0}` + "\n" +
		`{"kind":"invoke","t":1,"id":1,"process":0,"f":"create","key":"k","value":"a","invoke":1}` + "\n" +
		`{"kind":"complete","t":2,"id":1,"process":0,"f":"create","key":"k","value":"a","status":"ok","invoke":1,"return":2}` + "\n" +
		`{"kind":"invoke","t":3,"id":2,"process":1,"f":"get","key":"k","invoke":3}` + "\n" +
		`{"kind":"complete","t":4,"id":2,"process":1,"f":"get","key":"k","status":"ok","output":"b","found":true,"invoke":3,"return":4}` + "\n"))

	catalog := map[string][]string{}
	var order []string
	for _, c := range Catalog() {
		catalog[c.Name] = c.Guarantees
		order = append(order, c.Name)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := history.Read(bytes.NewReader(data))
		if err != nil {
			return
		}
		want := applicable(h)
		ctx, cancel := context.WithTimeout(context.Background(), fuzzCheckBound)
		defer cancel()
		start := time.Now()
		results := Check(ctx, h, Options{Timeout: fuzzCheckTimeout})
		if took := time.Since(start); took > fuzzCheckBound {
			t.Fatalf("Check took %s with a timeout of %s per checker", took, fuzzCheckTimeout)
		}
		var got []string
		for _, r := range results {
			got = append(got, r.Checker)
			switch r.Verdict {
			case Ok, Illegal, Unknown:
			default:
				t.Fatalf("%s: verdict %q", r.Checker, r.Verdict)
			}
			g, ok := catalog[r.Checker]
			if !ok {
				t.Fatalf("result of %q, which the catalog does not list", r.Checker)
			}
			// A checker may judge fewer than its catalog guarantees (the
			// authority checker judges PS-14 only when fencing ran), never
			// others.
			for _, id := range r.Guarantees {
				if !slices.Contains(g, id) {
					t.Fatalf("%s judged %s, which the catalog does not give it (%v)", r.Checker, id, g)
				}
			}
			if r.Summary == "" {
				t.Fatalf("%s: %s with no summary", r.Checker, r.Verdict)
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("checkers run (-applicable +ran):\n%s", diff)
		}
		if !slices.IsSortedFunc(got, func(a, b string) int { return slices.Index(order, a) - slices.Index(order, b) }) {
			t.Fatalf("results %v not in catalog order", got)
		}
		// Check only reads: the history is as a second read gives it.
		again, err := history.Read(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("a second read fails: %v", err)
		}
		if diff := cmp.Diff(again, h); diff != "" {
			t.Fatalf("Check changed the history (-read +after check):\n%s", diff)
		}
	})
}

// applicable names the checkers Check's documentation says apply to h, in
// Catalog order.
func applicable(h *history.History) []string {
	ledger := func(actions ...history.LedgerAction) bool {
		return slices.ContainsFunc(h.Ledger, func(e history.LedgerEntry) bool { return slices.Contains(actions, e.Action) })
	}
	var out []string
	add := func(applies bool, names ...string) {
		if applies {
			out = append(out, names...)
		}
	}
	add(slices.ContainsFunc(h.Ops, IsRegisterOp), RegisterChecker)
	add(revisionApplies(h), RevisionChecker)
	add(watchApplies(h), WatchOrderChecker, WatchValueChecker, ReadAfterWatchChecker, ListChecker)
	add(ledger(history.LedgerStart), AtMostOneChecker)
	add(ledger(history.LedgerWrite, history.LedgerWriteRefused), StorageChecker)
	add(ledger(history.LedgerTerm, history.LedgerKill), GraceChecker)
	add(slices.ContainsFunc(h.API, func(c history.APICall) bool { return isPodDeletion(&c) || isPodCollectionDeletion(&c) }), AuthorityChecker)
	add(poHasPods(h.Store), PhasesChecker)
	add(boHasRestart(h.Ledger), BackoffChecker)
	add(preemptApplies(h), PreemptionChecker)
	add(spreadApplies(h), SpreadChecker)
	add(nodeHealthApplies(h), NodeHealthChecker)
	add(convergenceApplies(h), ConvergenceChecker)
	return out
}

// encodeHistory writes h as history lines, for seeds.
func encodeHistory(h *history.History) []byte {
	c := *h
	for _, op := range c.Ops {
		c.End = max(c.End, op.Invoke)
	}
	b, err := history.Encode(&c)
	if err != nil {
		panic(err)
	}
	return b
}
