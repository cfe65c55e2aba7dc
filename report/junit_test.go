package report

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/podsafe/podsafe/history"
)

// readJUnit parses a JUnit file back.
func readJUnit(t *testing.T, path string) JUnitSuites {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "<?xml") {
		t.Errorf("%s has no XML declaration", path)
	}
	var j JUnitSuites
	if err := xml.Unmarshal(b, &j); err != nil {
		t.Fatalf("parsing %s: %v", path, err)
	}
	return j
}

func TestRunJUnit(t *testing.T) {
	dir := t.TempDir()
	r := writeTestRun(t, dir)
	r.Error = "cluster broke"
	r.Warnings = []string{"fault skipped"}
	path := filepath.Join(dir, JUnitFile)
	if err := WriteJUnit(path, NewJUnit("podsafe", RunJUnit(&r))); err != nil {
		t.Fatal(err)
	}
	j := readJUnit(t, path)
	if len(j.Suites) != 1 {
		t.Fatalf("%d suites, want 1", len(j.Suites))
	}
	s := j.Suites[0]
	cases := map[string]JUnitCase{}
	for _, c := range s.Cases {
		cases[c.ClassName+" "+c.Name] = c
	}
	// 7 guarantees judged (PS-1, PS-11, LC-3, PS-4, LC-11, GP-3,
	// STORE-LIN), 3 checkers, 1 run error.
	if s.Tests != 11 || len(s.Cases) != 11 {
		t.Errorf("tests=%d cases=%d, want 11", s.Tests, len(s.Cases))
	}
	// PS-1, PS-11, LC-3 and the at-most-one checker fail.
	if s.Failures != 4 || s.Skipped != 2 || s.Errors != 1 {
		t.Errorf("failures=%d skipped=%d errors=%d, want 4, 2 (STORE-LIN and the register checker), 1", s.Failures, s.Skipped, s.Errors)
	}
	if j.Tests != s.Tests || j.Failures != s.Failures || j.Errors != s.Errors || j.Skipped != s.Skipped {
		t.Errorf("root totals %+v disagree with the suite's", j)
	}
	ps1, ok := cases["PS PS-1 a pod executes on exactly one node"]
	if !ok {
		t.Fatalf("no testcase for PS-1 (classname the family, name ID and title); have %v", keys(cases))
	}
	if ps1.Failure == nil || ps1.Failure.Type != "Illegal" {
		t.Fatalf("PS-1: %+v, want an Illegal failure", ps1)
	}
	for _, want := range []string{"pet db-0 ran two UIDs at once", "uid-a on node-1 and uid-b on node-0 overlap", "ledger", "node-1", "uid-b", evil} {
		if !strings.Contains(ps1.Failure.Message+ps1.Failure.Text, want) {
			t.Errorf("PS-1 failure lacks %q:\n%s\n%s", want, ps1.Failure.Message, ps1.Failure.Text)
		}
	}
	if c := cases["STORE STORE-LIN the object store is linearizable"]; c.Skipped == nil || c.Failure != nil {
		t.Errorf("STORE-LIN: %+v, want skipped (Unknown)", c)
	}
	if c := cases["PS PS-4 kubelet termination timer: preStop, TERM, max(2s, rest), KILL"]; c.Skipped != nil || c.Failure != nil || c.Error != nil {
		t.Errorf("PS-4: %+v, want passed", c)
	}
	if c := cases["checker at-most-one"]; c.Failure == nil || c.Time != 0.001 {
		t.Errorf("checker at-most-one: %+v, want a failure taking 0.001s", c)
	}
	if c := cases["run run completed"]; c.Error == nil || c.Error.Message != "cluster broke" {
		t.Errorf("run error case: %+v", c)
	}
	if s.Time != 13 || s.Timestamp != "2026-11-22T10:00:00" {
		t.Errorf("time=%v timestamp=%q, want 13 and 2026-11-22T10:00:00", s.Time, s.Timestamp)
	}
	if !strings.Contains(s.SystemOut, "fault skipped") {
		t.Errorf("system-out %q lacks the warning", s.SystemOut)
	}
	props := map[string]string{}
	for _, p := range s.Properties {
		props[p.Name] = p.Value
	}
	if props["seed"] != "7" || props["verdict"] != "Illegal" || props["rerun"] == "" {
		t.Errorf("properties %v", props)
	}
}

func TestJUnitAllOk(t *testing.T) {
	r := &Results{Scenario: "s", Seed: 1, Verdict: "Ok"}
	s := RunJUnit(r)
	if s.Tests != 0 || s.Failures != 0 {
		t.Errorf("a run without checks: %+v", s)
	}
	path := filepath.Join(t.TempDir(), "j.xml")
	if err := WriteJUnit(path, NewJUnit("x", s)); err != nil {
		t.Fatal(err)
	}
	// Control characters are not valid XML; the file must still parse.
	r.Checks = append(r.Checks, testResults("", make([]history.LedgerEntry, 9)).Checks[1])
	r.Checks[0].Summary = "bell\x07 and nul\x00"
	if err := WriteJUnit(path, NewJUnit("x", RunJUnit(r))); err != nil {
		t.Fatal(err)
	}
	if j := readJUnit(t, path); j.Tests != 4 {
		t.Errorf("%d tests, want 4 (3 guarantees and the checker)", j.Tests)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
