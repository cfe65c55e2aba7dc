package checker

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/podsafe/podsafe/history"
)

// resultOf returns the result of the named checker, failing the test when
// there is none.
func resultOf(t *testing.T, results []Result, name string) Result {
	t.Helper()
	for _, r := range results {
		if r.Checker == name {
			return r
		}
	}
	t.Fatalf("no %s result among %+v", name, results)
	return Result{}
}

func TestPetsHistoryWithoutLedgerIsNotValid(t *testing.T) {
	b := (&hb{}).
		created(1, identityPet, "web-0", "a").
		storePod(1, "web-0", "a", "StatefulSet")
	bg := context.Background()

	// Without knowing the workload, nothing asks for a ledger.
	if got := resultsNames(Check(bg, b.history(), Options{})); strings.Contains(got, AtMostOneChecker) {
		t.Fatalf("checkers %s ran an at-most-one check without a ledger", got)
	}
	results := Check(bg, b.history(), Options{Workload: "pets"})
	r := resultOf(t, results, AtMostOneChecker)
	if r.Verdict != Unknown || !strings.Contains(r.Summary, "nothing to judge") || !strings.Contains(r.Summary, "ledger start lines") {
		t.Errorf("at-most-one = %s %q, want Unknown naming the missing ledger", r.Verdict, r.Summary)
	}
	if len(r.Guarantees) == 0 {
		t.Error("the Unknown result names no guarantee")
	}
	if v := Merge(results); v != Unknown {
		t.Errorf("verdict %s, want Unknown", v)
	}
	// Catalog order is kept: at-most-one comes before phases.
	if got, want := resultsNames(results), AtMostOneChecker+","+PhasesChecker; got != want {
		t.Errorf("checkers %s, want %s", got, want)
	}
}

func TestPetsHistoryWithNoPetRunJudgesNothing(t *testing.T) {
	// A container run of a pod no controller owns: the at-most-one checker
	// runs but has no pet to judge.
	b := (&hb{}).
		storePod(1, "job-x", "a", "").
		led(2, history.LedgerStart, "n1", "job-x", "a")
	bg := context.Background()
	if r := resultOf(t, Check(bg, b.history(), Options{}), AtMostOneChecker); r.Verdict != Ok {
		t.Fatalf("at-most-one without a workload = %s, want Ok (nothing demanded)", r.Verdict)
	}
	r := resultOf(t, Check(bg, b.history(), Options{Workload: "pets"}), AtMostOneChecker)
	if r.Verdict != Unknown || !strings.Contains(r.Summary, "nothing judged") {
		t.Errorf("at-most-one for the pets workload = %s %q, want Unknown: nothing judged", r.Verdict, r.Summary)
	}
}

// A replicas run has no pets, and at-most-one judges its container runs
// for their node: Ok, not "nothing judged"; with no run at all, Unknown.
func TestReplicasHistoryJudgesItsRuns(t *testing.T) {
	b := (&hb{}).
		storePod(1, "web-x", "a", "ReplicaSet").
		led(2, history.LedgerStart, "n1", "web-x", "a")
	bg := context.Background()
	if r := resultOf(t, Check(bg, b.history(), Options{Workload: "replicas"}), AtMostOneChecker); r.Verdict != Ok {
		t.Errorf("at-most-one for the replicas workload = %s %q, want Ok", r.Verdict, r.Summary)
	}
	b = (&hb{}).storePod(1, "web-x", "a", "ReplicaSet")
	if r := resultOf(t, Check(bg, b.history(), Options{Workload: "replicas"}), AtMostOneChecker); r.Verdict != Unknown {
		t.Errorf("at-most-one for a replicas run without runs = %s %q, want Unknown", r.Verdict, r.Summary)
	}
}

func TestPetsHistoryWithPetRunsStaysOk(t *testing.T) {
	b := (&hb{}).
		created(1, identityPet, "web-0", "a").
		storePod(1, "web-0", "a", "StatefulSet").
		led(2, history.LedgerStart, "n1", "web-0", "a")
	results := Check(context.Background(), b.history(), Options{Workload: "pets"})
	if r := resultOf(t, results, AtMostOneChecker); r.Verdict != Ok {
		t.Errorf("at-most-one = %s %q, want Ok", r.Verdict, r.Summary)
	}
}

func TestRegisterWithoutCompletionsIsUnknown(t *testing.T) {
	full := ops(t, "0 0 10 create x a -> ok", "1 20 30 get x -> a", "0 40 50 cas x a b -> ok")
	stripped := make([]history.Op, len(full))
	for i, op := range full {
		// What the loader makes of an invoke line with no completion.
		stripped[i] = history.Op{ID: op.ID, Process: op.Process, Func: op.Func, Key: op.Key, Value: op.Value, Expect: op.Expect,
			Invoke: op.Invoke, Status: history.StatusUnknown, Return: math.MaxInt64}
	}
	bg := context.Background()
	if r := CheckRegister(bg, full, Options{}); r.Verdict != Ok {
		t.Fatalf("the full history = %s %q, want Ok", r.Verdict, r.Summary)
	}
	r := CheckRegister(bg, stripped, Options{})
	if r.Verdict != Unknown || !strings.Contains(r.Summary, "none of the 3 register operations completed") {
		t.Errorf("without completions = %s %q, want Unknown: none completed", r.Verdict, r.Summary)
	}
	// Failures only say nothing about the state either.
	failed := ops(t, "0 0 10 create x a -> fail:unavailable", "1 20 30 cas x a b -> fail:unavailable")
	if r := CheckRegister(bg, failed, Options{}); r.Verdict != Unknown {
		t.Errorf("failures only = %s %q, want Unknown", r.Verdict, r.Summary)
	}
}

func TestRegisterWorkloadWithoutOperationsIsUnknown(t *testing.T) {
	results := Check(context.Background(), &history.History{}, Options{Workload: "register"})
	r := resultOf(t, results, RegisterChecker)
	if r.Verdict != Unknown || !strings.Contains(r.Summary, "register workload ran") {
		t.Errorf("register = %s %q, want Unknown: the workload ran but recorded nothing", r.Verdict, r.Summary)
	}
	// An unknown workload name demands nothing.
	if got := Check(context.Background(), &history.History{}, Options{Workload: "something-else"}); len(got) != 0 {
		t.Errorf("results %+v for a workload podsafe does not know, want none", got)
	}
}

func TestExpectedNamesCatalogCheckers(t *testing.T) {
	for w, exps := range workloadExpects {
		for _, e := range exps {
			if len(catalogGuarantees(e.checker)) == 0 {
				t.Errorf("workload %s expects %q, which is not in the catalog", w, e.checker)
			}
		}
	}
}

func resultsNames(results []Result) string {
	var names []string
	for _, r := range results {
		names = append(names, r.Checker)
	}
	return strings.Join(names, ",")
}

func TestCheckSafeTurnsAPanicIntoUnknown(t *testing.T) {
	res := checkSafe(PhasesChecker, func() Result {
		var p *history.History
		return Result{Checker: PhasesChecker, Summary: p.Meta.Scenario} // nil dereference
	})
	if res.Verdict != Unknown || res.Checker != PhasesChecker || !strings.Contains(res.Summary, "crashed") {
		t.Fatalf("result %+v, want Unknown naming the crash", res)
	}
	if len(res.Evidence) != 1 || !strings.Contains(res.Evidence[0].Description, "nil pointer") || !strings.Contains(res.Evidence[0].Description, "goroutine") {
		t.Errorf("evidence %+v, want the panic and its stack", res.Evidence)
	}
	if len(res.Guarantees) == 0 {
		t.Error("no guarantees named")
	}
	if ok := checkSafe(PhasesChecker, func() Result { return Result{Checker: PhasesChecker, Verdict: Ok} }); ok.Verdict != Ok {
		t.Errorf("a checker that returns keeps its verdict, got %s", ok.Verdict)
	}
}

func TestChosenCheckersOnlyAndEachMustJudge(t *testing.T) {
	h := &history.History{Ops: ops(t, "0 0 10 create x a -> ok", "1 20 30 get x -> a")}
	bg := context.Background()
	results := Check(bg, h, Options{Checkers: []string{RegisterChecker}})
	if got := resultsNames(results); got != RegisterChecker {
		t.Fatalf("checkers %s, want only %s", got, RegisterChecker)
	}
	// A chosen checker whose input the history lacks answers Unknown.
	results = Check(bg, h, Options{Checkers: []string{SpreadChecker, RegisterChecker}})
	if got, want := resultsNames(results), RegisterChecker+","+SpreadChecker; got != want {
		t.Fatalf("checkers %s, want %s", got, want)
	}
	r := resultOf(t, results, SpreadChecker)
	if r.Verdict != Unknown || !strings.Contains(r.Summary, "the scenario asks for this checker") {
		t.Errorf("spread = %s %q, want Unknown: asked for, nothing to judge", r.Verdict, r.Summary)
	}
	if v := Merge(results); v != Unknown {
		t.Errorf("verdict %s, want Unknown", v)
	}
	// A workload's demand on a checker the scenario left out does not
	// bring it back.
	results = Check(bg, &history.History{Ops: h.Ops}, Options{Workload: "pets", Checkers: []string{RegisterChecker}})
	if got := resultsNames(results); got != RegisterChecker {
		t.Errorf("checkers %s, want only %s", got, RegisterChecker)
	}
}

// Workloads run together feed what each of them feeds, each checker once.
func TestExpectedOfAMix(t *testing.T) {
	got := strings.Join(Expected("pets+spread"), ",")
	if got != strings.Join([]string{AtMostOneChecker, PhasesChecker, SpreadChecker}, ",") {
		t.Errorf("Expected(pets+spread) = %s, want at-most-one, phases and topology-spread once each", got)
	}
	if got := Expected("pets+nothing"); len(got) != 2 {
		t.Errorf("Expected(pets+nothing) = %v, want what pets feeds", got)
	}
}
