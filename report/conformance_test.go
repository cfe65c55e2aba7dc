package report

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/podsafe/podsafe/checker"
)

// storeRun writes a run directory with only results.json and scenario.json.
func storeRun(t *testing.T, store, scenario string, seed uint64, started time.Time, checks ...checker.Result) string {
	t.Helper()
	dir := filepath.Join(store, scenario, started.Format("20060102T150405Z")+"-seed"+string(rune('0'+seed)))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := Results{Scenario: scenario, Seed: seed, Dir: dir, Verdict: checker.Merge(checks), Checks: checks, Started: started}
	if err := WriteResults(dir, r); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, ScenarioFile), []byte(`{"name":"`+scenario+`","workload":"w-`+scenario+`","nemesis":["partition"]}`), 0o644)
	return dir
}

func chk(name string, v checker.Verdict, ids ...string) checker.Result {
	return checker.Result{Checker: name, Verdict: v, Guarantees: ids, Summary: name + " said " + string(v)}
}

func TestConformance(t *testing.T) {
	store := t.TempDir()
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	a := storeRun(t, store, "pets", 1, t0, chk("amo", checker.Ok, "PS-1", "PS-11"), chk("grace", checker.Ok, "PS-4"))
	b := storeRun(t, store, "pets", 2, t0.Add(time.Hour), chk("amo", checker.Illegal, "PS-1", "PS-11"), chk("grace", checker.Unknown, "PS-4"))
	c := storeRun(t, store, "register", 3, t0.Add(2*time.Hour), chk("lin", checker.Unknown, "STORE-LIN"), chk("amo", checker.Ok, "PS-1"), chk("new", checker.Ok, "XX-1"))
	broken := filepath.Join(store, "broken", "run")
	os.MkdirAll(broken, 0o755)
	os.WriteFile(filepath.Join(broken, ResultsFile), []byte("{"), 0o644)
	crashed := filepath.Join(store, "crashed", "run") // a history but no results yet
	os.MkdirAll(crashed, 0o755)
	os.WriteFile(filepath.Join(crashed, HistoryFile), []byte(`{"kind":"meta","t":0}`+"\n"), 0o644)
	// store/latest links to a run; it must not count twice.
	if err := os.Symlink(filepath.Join("register", filepath.Base(c)), filepath.Join(store, "latest")); err != nil {
		t.Fatal(err)
	}

	dirs, err := FindRuns(store)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{broken, crashed, a, b, c}, dirs); diff != "" {
		t.Errorf("FindRuns (-want +got):\n%s", diff)
	}
	rep, err := ConformanceDir(store)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 2 || !strings.Contains(rep.Problems[0].Error, filepath.Join(broken, ResultsFile)) {
		t.Errorf("problems %+v, want the corrupt and the missing results.json named", rep.Problems)
	}
	type row struct {
		Status                  string
		Covered                 bool
		Specs, Checkers         []string
		Failed, Passed, Unknown []uint64
	}
	seeds := func(refs []RunRef) []uint64 {
		var out []uint64
		for _, r := range refs {
			out = append(out, r.Seed)
		}
		return out
	}
	got := map[string]row{}
	for _, r := range rep.Rows {
		got[r.ID] = row{r.Status, r.Covered, r.Specs, r.Checkers, seeds(r.Failed), seeds(r.Passed), seeds(r.Unknown)}
	}
	want := map[string]row{
		"PS-1":      {StatusFailed, true, []string{"pets", "register"}, []string{"amo"}, []uint64{2}, []uint64{1, 3}, nil},
		"PS-11":     {StatusFailed, true, []string{"pets"}, []string{"amo"}, []uint64{2}, []uint64{1}, nil},
		"PS-4":      {StatusPassed, true, []string{"pets"}, []string{"grace"}, nil, []uint64{1}, []uint64{2}},
		"STORE-LIN": {StatusUnknown, true, []string{"register"}, []string{"lin"}, nil, nil, []uint64{3}},
		"XX-1":      {StatusPassed, true, []string{"register"}, []string{"new"}, nil, []uint64{3}, nil},
		"TS-E":      {StatusNotCovered, false, []string{}, []string{}, nil, nil, nil},
	}
	for id, w := range want {
		if diff := cmp.Diff(w, got[id]); diff != "" {
			t.Errorf("%s (-want +got):\n%s", id, diff)
		}
	}
	wantTotals := ConformanceTotals{Guarantees: len(catalogue) + 1, Covered: 5, Passed: 2, Failed: 2, Unknown: 1,
		NotCovered: len(catalogue) - 4, Runs: 3, RunsFailed: 2}
	if diff := cmp.Diff(wantTotals, rep.Totals); diff != "" {
		t.Errorf("totals (-want +got):\n%s", diff)
	}
	if rep.Runs[0].Seed != 3 || rep.Runs[0].Workload != "w-register" {
		t.Errorf("runs %+v, want newest first with the workload from scenario.json", rep.Runs)
	}

	// The three files.
	var back ConformanceReport
	b2, err := os.ReadFile(filepath.Join(store, ConformanceJSONFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b2, &back); err != nil || len(back.Rows) != len(rep.Rows) {
		t.Errorf("conformance.json: %v, %d rows", err, len(back.Rows))
	}
	j := readJUnit(t, filepath.Join(store, ConformanceJUnitFile))
	if len(j.Suites) != 1 {
		t.Fatalf("%d suites", len(j.Suites))
	}
	s := j.Suites[0]
	// One case per guarantee, one error per unreadable directory.
	if s.Tests != len(rep.Rows)+2 || s.Failures != 2 || s.Errors != 2 || s.Skipped != len(catalogue)-4+1 {
		t.Errorf("junit tests=%d failures=%d errors=%d skipped=%d", s.Tests, s.Failures, s.Errors, s.Skipped)
	}
	for _, c := range s.Cases {
		if c.Name == "PS-1 a pod executes on exactly one node" {
			if c.ClassName != "PS" || c.Failure == nil || !strings.Contains(c.Failure.Text, "pets seed 2") || !strings.Contains(c.Failure.Message, "1 of 3 runs") {
				t.Errorf("PS-1 case %+v", c)
			}
		}
	}
	page, err := os.ReadFile(filepath.Join(store, ConformanceHTMLFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`<span class="badge v-illegal">failed</span> podsafe conformance`, `href="pets/` + filepath.Base(b) + `/report.html"`, "not covered", "amo said Illegal"} {
		if !strings.Contains(string(page), w) {
			t.Errorf("conformance.html lacks %q", w)
		}
	}
}

func TestConformanceNoRuns(t *testing.T) {
	empty := t.TempDir()
	if _, err := ConformanceDir(empty); !errors.Is(err, ErrNoRuns) {
		t.Errorf("ConformanceDir of an empty store: %v, want ErrNoRuns", err)
	}
	if _, err := ConformanceDir(filepath.Join(empty, "nope")); err == nil {
		t.Errorf("ConformanceDir of a missing directory succeeded")
	}
	if _, err := Conformance(nil); !errors.Is(err, ErrNoRuns) {
		t.Errorf("Conformance(nil): %v", err)
	}
}

func TestConformanceEscapes(t *testing.T) {
	store := t.TempDir()
	storeRun(t, store, "evil", 1, time.Now(), chk(evil, checker.Illegal, "PS-1"))
	if _, err := ConformanceDir(store); err != nil {
		t.Fatal(err)
	}
	page, _ := os.ReadFile(filepath.Join(store, ConformanceHTMLFile))
	if strings.Contains(string(page), "<script>") {
		t.Errorf("conformance.html carries hostile text unescaped")
	}
}

// The suite's specs count in: a passed spec labelled with an ID covers a
// guarantee no run judged, a failed one fails it, a skipped one covers
// nothing; a corrupt specs.json is named.
func TestConformanceSpecs(t *testing.T) {
	store := t.TempDir()
	storeRun(t, store, "pets", 1, time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), chk("amo", checker.Ok, "PS-1"))
	specs := []SpecResult{
		{Name: "PR-1 probe", IDs: []string{"PR-1"}, State: StatusPassed},
		{Name: "TS-1 probe", IDs: []string{"TS-1"}, State: StatusFailed, Failure: "accepted maxSkew 0"},
		{Name: "PR-5 probe", IDs: []string{"PR-5"}, State: "skipped", Reason: "not covered on kube: no such thing there\nstack"},
		{Name: "PS-1 spec", IDs: []string{"PS-1"}, State: StatusPassed},
	}
	b, _ := json.Marshal(specs)
	if err := os.WriteFile(filepath.Join(store, SpecsFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := ConformanceDir(store)
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]string{}
	for _, r := range rep.Rows {
		status[r.ID] = r.Status
	}
	want := map[string]string{"PR-1": StatusPassed, "TS-1": StatusFailed, "PR-5": StatusNotCovered, "PS-1": StatusPassed, "LC-1": StatusNotCovered}
	for id, w := range want {
		if status[id] != w {
			t.Errorf("%s: status %q, want %q", id, status[id], w)
		}
	}
	if rep.Totals.Failed != 1 || rep.Totals.Passed != 2 || rep.Totals.Covered != 3 {
		t.Errorf("totals %+v", rep.Totals)
	}
	// A skipped spec's reason is kept, on the page and in the JUnit file.
	for _, r := range rep.Rows {
		if r.ID == "PR-5" && !cmp.Equal(r.SpecsSkipped, []string{"PR-5 probe: not covered on kube: no such thing there"}) {
			t.Errorf("PR-5 skipped specs %q", r.SpecsSkipped)
		}
		if r.ID == "TS-1" && !cmp.Equal(r.SpecFailures, []string{"TS-1 probe: accepted maxSkew 0"}) {
			t.Errorf("TS-1 spec failures %q", r.SpecFailures)
		}
	}
	page, _ := os.ReadFile(filepath.Join(store, ConformanceHTMLFile))
	if !strings.Contains(string(page), "skipped: PR-5 probe: not covered on kube: no such thing there") {
		t.Errorf("conformance.html lacks PR-5's skip reason")
	}
	j := readJUnit(t, filepath.Join(store, ConformanceJUnitFile))
	for _, c := range j.Suites[0].Cases {
		if strings.HasPrefix(c.Name, "PR-5 ") && (c.Skipped == nil || !strings.Contains(c.Skipped.Message, "not covered: skipped PR-5 probe: not covered on kube")) {
			t.Errorf("PR-5 case %+v", c)
		}
	}
	os.WriteFile(filepath.Join(store, SpecsFile), []byte("["), 0o644)
	if _, err := ConformanceDir(store); err == nil || !strings.Contains(err.Error(), SpecsFile) {
		t.Errorf("corrupt specs.json: error %v, want one naming it", err)
	}
}
