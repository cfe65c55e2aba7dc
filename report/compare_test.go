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

// compareRun writes a run directory holding results.json as raw JSON (so
// that one can lack the target field, as files written before it did) and,
// when scenarioTarget is not empty, a scenario.json naming that target.
func compareRun(t *testing.T, dir string, results map[string]any, scenarioTarget string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(results)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ResultsFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if scenarioTarget != "" {
		s := `{"name":"x","workload":"pets","nemesis":["partition-node"],"target":"` + scenarioTarget + `"}`
		if err := os.WriteFile(filepath.Join(dir, ScenarioFile), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func writeSpecs(t *testing.T, store string, specs []SpecResult) {
	t.Helper()
	b, _ := json.Marshal(specs)
	if err := os.WriteFile(filepath.Join(store, SpecsFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// compareStores writes two stores of made-up conformance runs: embedded (an
// old results.json without a target) and kube (one run naming its target in
// results.json, one only in scenario.json). PS-1 passes on embedded and
// fails on kube; PS-4 passes on embedded and is undecided on kube; PS-14
// passes a spec on embedded and is skipped on kube, saying why; PS-11
// passes on both; LC-4 is covered by neither.
func compareStores(t *testing.T) (embedded, kube string) {
	t.Helper()
	root := t.TempDir()
	embedded, kube = filepath.Join(root, "emb"), filepath.Join(root, "kube")
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	compareRun(t, filepath.Join(embedded, "conformance-pets", "a-seed12"), map[string]any{
		"scenario": "conformance-pets", "seed": 12, "verdict": "ok", "started": t0,
		"checks": []checker.Result{chk("at-most-one", checker.Ok, "PS-1", "PS-11"), chk("grace-period", checker.Ok, "PS-4")},
	}, "")
	writeSpecs(t, embedded, []SpecResult{{Name: "conformance PS-14: fences first", IDs: []string{"PS-14"}, State: StatusPassed}})

	compareRun(t, filepath.Join(kube, "conformance-kube-pets", "b-seed12"), map[string]any{
		"scenario": "conformance-kube-pets", "target": "kube", "seed": 12, "verdict": "illegal", "started": t0,
		"checks": []checker.Result{
			{Checker: "at-most-one", Verdict: checker.Illegal, Guarantees: []string{"PS-1"}, Summary: "pod web-0 ran on node-0 and node-1\nsecond line"},
			chk("grace-period", checker.Unknown, "PS-4"),
		},
	}, "")
	compareRun(t, filepath.Join(kube, "conformance-kube-replicas", "c-seed14"), map[string]any{
		"scenario": "conformance-kube-replicas", "seed": 14, "verdict": "ok", "started": t0.Add(time.Minute),
		"checks": []checker.Result{chk("at-most-one", checker.Ok, "PS-11")},
	}, "kube")
	writeSpecs(t, kube, []SpecResult{{Name: "conformance PS-14: fences first", IDs: []string{"PS-14"}, State: "skipped",
		Reason: "not covered on this target: conformance run fencing on kube: no fencing controller there\nmore"}})
	return embedded, kube
}

func TestCompare(t *testing.T) {
	embedded, kube := compareStores(t)
	c, err := CompareStores(embedded, kube, [2]string{})
	if err != nil {
		t.Fatal(err)
	}
	for _, store := range []string{embedded, kube} {
		if _, err := os.Stat(filepath.Join(store, ConformanceJSONFile)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("comparing wrote into the store %s: %v", store, err)
		}
	}
	out := filepath.Join(filepath.Dir(kube), "out", "cmp")
	if err := WriteComparison(out, c); err != nil {
		t.Fatal(err)
	}

	// The JSON, read back.
	b, err := os.ReadFile(filepath.Join(out, CompareJSONFile))
	if err != nil {
		t.Fatal(err)
	}
	var got Comparison
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Differences != 3 || !cmp.Equal(got.Differing, []string{"PS-1", "PS-4", "PS-14"}) {
		t.Errorf("differences %d %v, want 3: PS-1, PS-4, PS-14", got.Differences, got.Differing)
	}
	if len(got.Sides) != 2 || got.Sides[0].Name != "embedded" || got.Sides[1].Name != "kube" ||
		!cmp.Equal(got.Sides[0].Targets, []string{"embedded"}) || !cmp.Equal(got.Sides[1].Targets, []string{"kube"}) {
		t.Fatalf("sides %+v, want embedded (from no target at all) and kube (from results.json and scenario.json)", got.Sides)
	}
	if got.Sides[0].Store != embedded || got.Sides[1].Totals.Runs != 2 || got.Sides[1].Totals.Failed != 1 {
		t.Errorf("sides %+v", got.Sides)
	}
	for _, r := range got.Sides[1].Runs {
		if r.Target != "kube" {
			t.Errorf("kube run %s has target %q", r.Dir, r.Target)
		}
	}
	type cell struct {
		Status, Evidence string
	}
	rows := map[string][2]cell{}
	differ := map[string]bool{}
	for _, r := range got.Rows {
		if len(r.Cells) != 2 || r.Cells[0].Side != "embedded" || r.Cells[1].Side != "kube" {
			t.Fatalf("%s: cells %+v", r.ID, r.Cells)
		}
		rows[r.ID] = [2]cell{{r.Cells[0].Status, r.Cells[0].Evidence}, {r.Cells[1].Status, r.Cells[1].Evidence}}
		differ[r.ID] = r.Differ
	}
	want := map[string][2]cell{
		"PS-1": {{StatusPassed, "Ok in 1 run (conformance-pets) by at-most-one"},
			{StatusFailed, "conformance-kube-pets seed 12: at-most-one: pod web-0 ran on node-0 and node-1"}},
		"PS-4": {{StatusPassed, "Ok in 1 run (conformance-pets) by grace-period"},
			{StatusUnknown, "conformance-kube-pets seed 12: grace-period: grace-period said Unknown"}},
		"PS-11": {{StatusPassed, "Ok in 1 run (conformance-pets) by at-most-one"},
			{StatusPassed, "Ok in 1 run (conformance-kube-replicas) by at-most-one"}},
		"PS-14": {{StatusPassed, "spec passed: conformance PS-14: fences first"},
			{StatusNotCovered, "skipped: conformance PS-14: fences first: not covered on this target: conformance run fencing on kube: no fencing controller there"}},
		"LC-4": {{StatusNotCovered, "no run or spec judged it"}, {StatusNotCovered, "no run or spec judged it"}},
	}
	for id, w := range want {
		if diff := cmp.Diff(w, rows[id]); diff != "" {
			t.Errorf("%s (-want +got):\n%s", id, diff)
		}
	}
	for id, d := range map[string]bool{"PS-1": true, "PS-4": true, "PS-14": true, "PS-11": false, "LC-4": false} {
		if differ[id] != d {
			t.Errorf("%s differ = %v, want %v", id, differ[id], d)
		}
	}

	// The page names the differing IDs at the top and marks their rows.
	page, err := os.ReadFile(filepath.Join(out, CompareHTMLFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{
		`data-differences="3"`, `<a href="#g-PS-1">PS-1</a>`, `<a href="#g-PS-14">PS-14</a>`,
		`<tr id="g-PS-1" class="differ">`, `<tr id="g-LC-4" class="same">`,
		"pod web-0 ran on node-0 and node-1", "no fencing controller there", "<th>embedded</th><th>kube</th>",
		// Links to runs outside the output directory go up to them.
		`href="../../kube/conformance-kube-pets/b-seed12/report.html"`,
	} {
		if !strings.Contains(string(page), w) {
			t.Errorf("%s lacks %q", CompareHTMLFile, w)
		}
	}
}

// Two stores of one target are named after their stores; --names wins.
func TestCompareNames(t *testing.T) {
	embedded, _ := compareStores(t)
	other := filepath.Join(t.TempDir(), "other")
	compareRun(t, filepath.Join(other, "r", "a"), map[string]any{"scenario": "r", "seed": 1, "verdict": "ok",
		"checks": []checker.Result{chk("amo", checker.Ok, "PS-1")}}, "")
	c, err := CompareStores(embedded, other, [2]string{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Sides[0].Name != embedded || c.Sides[1].Name != other {
		t.Errorf("names %q, %q; want the stores", c.Sides[0].Name, c.Sides[1].Name)
	}
	c, err = CompareStores(embedded, other, [2]string{"before", "after"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Sides[0].Name != "before" || c.Sides[1].Name != "after" || c.Rows[0].Cells[1].Side != "after" {
		t.Errorf("names %q, %q; want before, after", c.Sides[0].Name, c.Sides[1].Name)
	}
	if _, err := CompareStores(embedded, t.TempDir(), [2]string{}); !errors.Is(err, ErrNoRuns) {
		t.Errorf("comparing with an empty store: %v, want ErrNoRuns", err)
	}
}

// Hostile text from results never reaches the page unescaped.
func TestCompareEscapes(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	storeRun(t, a, "evil", 1, time.Now(), chk(evil, checker.Illegal, "PS-1"))
	storeRun(t, b, "fine", 1, time.Now(), chk("amo", checker.Ok, "PS-1"))
	c, err := CompareStores(a, b, [2]string{evil, "b"})
	if err != nil {
		t.Fatal(err)
	}
	page, err := RenderComparison(c, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(page), "<script>") {
		t.Errorf("%s carries hostile text unescaped", CompareHTMLFile)
	}
}

func TestRunLink(t *testing.T) {
	root := t.TempDir()
	for _, tc := range []struct{ dir, run, want string }{
		{root, filepath.Join(root, "pets", "a"), "pets/a/report.html"},
		{filepath.Join(root, "out"), filepath.Join(root, "store", "a b"), "../store/a%20b/report.html"},
		// A first segment with a colon is not read as a scheme.
		{root, filepath.Join(root, "javascript:alert(1)"), "./javascript:alert%281%29/report.html"},
	} {
		if got := string(runLink(tc.dir, tc.run)); got != tc.want {
			t.Errorf("runLink(%s, %s) = %q, want %q", tc.dir, tc.run, got, tc.want)
		}
	}
}
