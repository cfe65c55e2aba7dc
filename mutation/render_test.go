package mutation

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/podsafe/podsafe/report"
)

func TestClassify(t *testing.T) {
	ok := report.MutantRun{Scenario: "a", Verdict: "Ok"}
	illegal := report.MutantRun{Scenario: "b", Verdict: "Illegal", Illegal: []string{"grace"}, Guarantees: []string{"PS-4", "GP-2"}}
	crashed := report.MutantRun{Scenario: "c", Verdict: verdictCrashed}
	unknown := report.MutantRun{Scenario: "d", Verdict: "Unknown"}
	for _, c := range []struct {
		name   string
		unit   bool
		runs   []report.MutantRun
		status string
		broke  []string
	}{
		{"survivor", false, []report.MutantRun{ok, ok}, report.MutantSurvived, nil},
		{"unit only", true, []report.MutantRun{ok}, report.MutantKilledByUnit, nil},
		{"checker over unit", true, []report.MutantRun{ok, illegal}, report.MutantKilledByChecker, []string{"GP-2", "PS-4"}},
		{"checker over crash", false, []report.MutantRun{crashed, illegal}, report.MutantKilledByChecker, []string{"GP-2", "PS-4"}},
		{"crash", true, []report.MutantRun{crashed}, report.MutantKilledByCrash, nil},
		{"unknown", false, []report.MutantRun{unknown}, report.MutantKilledByCrash, nil},
		{"no run", false, nil, report.MutantSurvived, nil},
	} {
		r := report.MutantResult{KilledByUnit: c.unit, Runs: c.runs, Guarantees: []string{"PS-4"}}
		classify(&r)
		if r.Status != c.status {
			t.Errorf("%s: %s, want %s", c.name, r.Status, c.status)
		}
		if diff := cmp.Diff(c.broke, r.Broke); diff != "" {
			t.Errorf("%s: broke (-want +got):\n%s", c.name, diff)
		}
	}
}

// sampleResults is a two-package run: storage with a checker's kill, a
// unit-only kill, a survivor and a mutant that did not compile; raftstore
// with a crash and an equivalent mutant.
func sampleResults() *report.MutationResults {
	res := &report.MutationResults{
		Generated: time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC), Tool: "gremlins v0.6.0", Seed: 1, PerPackage: 4,
		Mutators: []string{ConditionalsNegation},
		Packages: []report.MutationPackage{
			{Package: "cluster/storage", Total: 28, Sampled: 4, NotViable: 1, KilledByUnit: 2, KilledByChecker: 1, Survived: 1, Scenarios: []string{"mutation-storage-accepts-fenced-writes"}},
			{Package: "raftstore", Total: 300, Sampled: 1, Equivalent: 1, KilledByCrash: 1, Scenarios: []string{"mutation-stale-read"}},
		},
		Mutants: []report.MutantResult{
			{ID: "k", File: "cluster/storage/storage.go", Line: 1, Column: 2, Status: report.MutantKilledByChecker, KilledByUnit: true, Guarantees: []string{"PS-15"}, Seconds: 60},
			{ID: "u", File: "cluster/storage/storage.go", Line: 3, Column: 4, Status: report.MutantKilledByUnit, KilledByUnit: true, Guarantees: []string{"PS-15"}, Seconds: 50},
			{ID: "s", File: "cluster/storage/storage.go", Line: 141, Column: 14, Func: "Server.write", Mutator: ConditionalsNegation, Original: "==", Replacement: "!=",
				Source: "if tok == 0 {", Status: report.MutantSurvived, Guarantees: []string{"PS-14", "PS-15"}, Runs: []report.MutantRun{{Scenario: "mutation-storage-accepts-fenced-writes", Verdict: "Ok"}}, Seconds: 70},
			{ID: "n", File: "cluster/storage/storage.go", Line: 9, Column: 9, Status: report.MutantNotViable, Reason: "invalid operation", Seconds: 5},
			{ID: "c", File: "raftstore/ops.go", Line: 5, Column: 5, Status: report.MutantKilledByCrash, Guarantees: []string{"STORE-LIN"}, Seconds: 95},
			{ID: "e", File: "raftstore/ops.go", Line: 7, Column: 7, Func: "Store.read", Mutator: ConditionalsBoundary, Source: "if n >= 0 {", Status: report.MutantEquivalent, Reason: "n is never 0"},
		},
	}
	res.Guarantees()
	return res
}

func TestWriteMarkdown(t *testing.T) {
	var b strings.Builder
	if err := WriteMarkdown(&b, sampleResults()); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"| cluster/storage | 4/28 | 1 | 0 | 2 | 1 | 0 | 1 | 67% | 33% | mutation-storage-accepts-fenced-writes |",
		"| raftstore | 1/300 | 0 | 1 | 0 | 0 | 1 | 0 | 100% | 0% | mutation-stale-read |",
		"| **total** | 5/328 | 1 | 1 | 2 | 1 | 1 | 1 | 75% | 25% |  |",
		"- `cluster/storage/storage.go:141:14` Server.write CONDITIONALS_NEGATION `==`→`!=` in `if tok == 0 {` — `mutation-storage-accepts-fenced-writes Ok` (counts against PS-14, PS-15)",
		"| PS-15 | 3 | 1 | 1 | 33% |",
		"| PS-14 | 1 | 0 | 1 | 0% |",
		"| STORE-LIN | 1 | 0 | 0 | 0% |",
		"- `raftstore/ops.go:7:7` Store.read CONDITIONALS_BOUNDARY `if n >= 0 {` — n is never 0",
		"5 mutants in 280 s (56 s each on average)",
		"in code that implements a guarantee (mapped in mutation/guarantees.yaml, or found breaking one by a run): 4 viable, kill rate 75%, checker kill rate 25%.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("mutation.md lacks %q:\n%s", want, md)
		}
	}
	// A mutant of code that implements no guarantee leaves the mapped
	// rates alone.
	res := sampleResults()
	res.Mutants = append(res.Mutants, report.MutantResult{ID: "t", File: "apiserver/table.go", Status: report.MutantSurvived})
	if v, k, c := MappedRates(res); v != 4 || k != 3 || c != 1 {
		t.Errorf("MappedRates = %d, %d, %d; want 4, 3, 1", v, k, c)
	}
	kill, checker := Rates(sampleResults())
	if kill != 75 || checker != 25 {
		t.Errorf("Rates = %v, %v; want 75, 25", kill, checker)
	}
}

func TestWriteResults(t *testing.T) {
	store := t.TempDir()
	res := sampleResults()
	dir, err := writeResults(store, res.Generated, res)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(store, "20261128T010000Z"); dir != want {
		t.Errorf("dir %s, want %s", dir, want)
	}
	// The latest link names it, and the conformance report reads it back.
	got, src, err := report.LoadMutation(store)
	if err != nil {
		t.Fatal(err)
	}
	if src != filepath.Join(store, "latest", report.MutationFile) {
		t.Errorf("read from %s", src)
	}
	if diff := cmp.Diff(res, got); diff != "" {
		t.Errorf("mutation.json round trip (-wrote +read):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(dir, MarkdownFile)); err != nil {
		t.Errorf("no mutation.md: %v", err)
	}
	// A second run moves the link.
	later := res.Generated.Add(time.Hour)
	if _, err := writeResults(store, later, res); err != nil {
		t.Fatal(err)
	}
	if l, _ := os.Readlink(filepath.Join(store, "latest")); l != "20261128T020000Z" {
		t.Errorf("latest -> %s after a second run", l)
	}
	b, _ := os.ReadFile(filepath.Join(dir, report.MutationFile))
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil || raw["guarantees"] == nil {
		t.Errorf("mutation.json lacks the per-guarantee rates: %v", err)
	}
}
