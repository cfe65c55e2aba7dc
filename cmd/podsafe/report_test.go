package main

import (
	"context"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/podsafe/podsafe/checker"
	"github.com/podsafe/podsafe/report"
)

// writeRun writes a small run directory: a history of one op and one fault,
// and results with the given verdict.
func writeRun(t *testing.T, dir string, seed uint64, v checker.Verdict, started time.Time) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	hist := `{"kind":"meta","t":0,"seed":1,"scenario":"reg","start":"2026-11-22T10:00:00Z"}
{"kind":"invoke","t":100,"id":1,"process":0,"f":"get","key":"k","invoke":100}
{"kind":"complete","t":200,"id":1,"process":0,"f":"get","key":"k","status":"ok","invoke":100,"return":200}
{"kind":"nemesis","t":150,"id":1,"name":"partition","phase":"start","targets":["cp-0"]}
{"kind":"nemesis","t":180,"id":1,"phase":"end","targets":["cp-0"]}
`
	if err := os.WriteFile(filepath.Join(dir, report.HistoryFile), []byte(hist), 0o644); err != nil {
		t.Fatal(err)
	}
	r := report.Results{Scenario: "reg", Seed: seed, Dir: dir, Verdict: v, Started: started, Finished: started.Add(time.Second),
		Checks: []checker.Result{{Checker: "store-linearizability", Verdict: v, Guarantees: []string{"STORE-LIN"}, Summary: "judged"}}}
	if err := report.WriteResults(dir, r); err != nil {
		t.Fatal(err)
	}
}

func TestReportCmd(t *testing.T) {
	store := t.TempDir()
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	ok := filepath.Join(store, "reg", "a-seed1")
	bad := filepath.Join(store, "reg", "b-seed2")
	writeRun(t, ok, 1, checker.Ok, t0)
	writeRun(t, bad, 2, checker.Illegal, t0.Add(time.Minute))

	// A run directory: report.html and junit.xml.
	out, code := run(context.Background(), "report", ok)
	if code != 0 || !strings.Contains(out, "wrote "+filepath.Join(ok, "report.html")) {
		t.Fatalf("podsafe report RUN: exit %d: %s", code, out)
	}
	page, err := os.ReadFile(filepath.Join(ok, "report.html"))
	if err != nil || !strings.Contains(string(page), `id="timeline-box"`) {
		t.Errorf("report.html: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(ok, "junit.xml"))
	if err != nil {
		t.Fatal(err)
	}
	var j report.JUnitSuites
	if err := xml.Unmarshal(b, &j); err != nil || j.Tests != 2 || j.Failures != 0 {
		t.Errorf("junit.xml: %v, %+v", err, j)
	}

	// A store: the conformance report.
	out, code = run(context.Background(), "report", store)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("2 runs: 1 of %d guarantees covered, 0 passed, 1 failed", len(report.Catalogue()))) {
		t.Fatalf("podsafe report STORE: exit %d: %s", code, out)
	}
	for _, f := range []string{"conformance.json", "conformance.html", "conformance-junit.xml"} {
		if _, err := os.Stat(filepath.Join(store, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestReportCmdErrors(t *testing.T) {
	dir := t.TempDir()
	noResults := filepath.Join(dir, "noresults")
	os.MkdirAll(noResults, 0o755)
	os.WriteFile(filepath.Join(noResults, "history.jsonl"), []byte(`{"kind":"meta","t":0}`+"\n"), 0o644)
	corrupt := filepath.Join(dir, "corrupt")
	writeRun(t, corrupt, 1, checker.Ok, time.Now())
	os.WriteFile(filepath.Join(corrupt, "results.json"), []byte(`{"verdict":`), 0o644)
	badHistory := filepath.Join(dir, "badhistory")
	writeRun(t, badHistory, 1, checker.Ok, time.Now())
	os.WriteFile(filepath.Join(badHistory, "history.jsonl"), []byte(`{"kind":"invoke","t":1}`+"\n"), 0o644)
	empty := filepath.Join(dir, "empty")
	os.MkdirAll(empty, 0o755)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no argument", []string{"report"}, "requires at least 1 arg"},
		{"missing directory", []string{"report", filepath.Join(dir, "nope")}, "no such file or directory"},
		{"missing results.json", []string{"report", noResults}, filepath.Join(noResults, "results.json")},
		{"corrupt results.json", []string{"report", corrupt}, filepath.Join(corrupt, "results.json") + " is corrupt"},
		{"corrupt history", []string{"report", badHistory}, filepath.Join(badHistory, "history.jsonl")},
		{"store without runs", []string{"report", empty}, empty + " holds no run"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code := run(context.Background(), tc.args...)
			if code != exitUsage || !strings.Contains(out, tc.want) {
				t.Errorf("podsafe %s: exit %d, output %q; want exit %d and %q", strings.Join(tc.args, " "), code, out, exitUsage, tc.want)
			}
		})
	}
}

// writeTargetRun writes a run directory with results.json naming target
// (none when empty) and one checker's verdict on PS-1.
func writeTargetRun(t *testing.T, dir, target string, v checker.Verdict) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := report.Results{Scenario: "conformance-pets", Target: target, Seed: 12, Dir: dir, Verdict: v,
		Checks: []checker.Result{{Checker: "at-most-one", Verdict: v, Guarantees: []string{"PS-1"}, Summary: "judged " + string(v)}}}
	if err := report.WriteResults(dir, r); err != nil {
		t.Fatal(err)
	}
}

func TestReportCompare(t *testing.T) {
	root := t.TempDir()
	emb, kube := filepath.Join(root, "emb"), filepath.Join(root, "kube")
	writeTargetRun(t, filepath.Join(emb, "pets", "a"), "", checker.Ok)
	writeTargetRun(t, filepath.Join(kube, "pets", "b"), "kube", checker.Illegal)
	out := filepath.Join(root, "cmp")
	got, code := run(context.Background(), "report", "--compare", emb, kube, "--out", out)
	if code != 0 {
		t.Fatalf("podsafe report --compare: exit %d: %s", code, got)
	}
	for _, w := range []string{"embedded (" + emb + ", 1 runs): 1 of", "kube (" + kube + ", 1 runs)", "1 differences: PS-1", "wrote " + filepath.Join(out, report.CompareHTMLFile)} {
		if !strings.Contains(got, w) {
			t.Errorf("output lacks %q:\n%s", w, got)
		}
	}
	page, err := os.ReadFile(filepath.Join(out, report.CompareHTMLFile))
	if err != nil || !strings.Contains(string(page), `<tr id="g-PS-1" class="differ">`) {
		t.Errorf("%s: %v, or PS-1 not marked as differing", report.CompareHTMLFile, err)
	}
	if _, err := os.Stat(filepath.Join(out, report.CompareJSONFile)); err != nil {
		t.Error(err)
	}
	// Nothing is written into the stores.
	if _, err := os.Stat(filepath.Join(emb, report.ConformanceJSONFile)); err == nil {
		t.Errorf("report --compare wrote into %s", emb)
	}

	// --names renames the sides; the default --out is the current directory.
	t.Chdir(t.TempDir())
	got, code = run(context.Background(), "report", "--compare", "--names", "before,after", emb, kube)
	if code != 0 || !strings.Contains(got, "before (") || !strings.Contains(got, "wrote "+report.CompareHTMLFile) {
		t.Errorf("podsafe report --compare --names: exit %d: %s", code, got)
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"one store", []string{"report", "--compare", emb}, "--compare takes two stores, got 1"},
		{"three stores", []string{"report", "--compare", emb, kube, out}, "--compare takes two stores, got 3"},
		{"--out without --compare", []string{"report", emb, "--out", out}, "--out and --names go with --compare"},
		{"one name", []string{"report", "--compare", emb, kube, "--names", "x"}, "--names takes two names"},
		{"same names", []string{"report", "--compare", emb, kube, "--names", "x,x"}, "two different, non-empty names"},
		{"missing store", []string{"report", "--compare", emb, filepath.Join(root, "nope")}, "no such file or directory"},
		{"empty store", []string{"report", "--compare", emb, t.TempDir()}, "no run directory with a results.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, code := run(context.Background(), tc.args...)
			if code != exitUsage || !strings.Contains(got, tc.want) {
				t.Errorf("podsafe %s: exit %d, output %q; want exit %d and %q", strings.Join(tc.args, " "), code, got, exitUsage, tc.want)
			}
		})
	}
}
