package report

import (
	"strings"
	"testing"

	"github.com/podsafe/podsafe/checker"
	"github.com/podsafe/podsafe/history"
)

func TestLabelNamesIncompleteAndInterruptedRuns(t *testing.T) {
	tests := []struct {
		r    Results
		want string
	}{
		{Results{Verdict: checker.Ok}, "Ok"},
		{Results{}, "Unknown"},
		{Results{Verdict: checker.Unknown, Incomplete: true}, "Unknown (incomplete run)"},
		{Results{Verdict: checker.Illegal, Incomplete: true}, "Illegal (incomplete run)"},
		{Results{Verdict: checker.Ok, Interrupted: true}, "Ok (interrupted)"},
	}
	for _, tt := range tests {
		if got := tt.r.Label(); got != tt.want {
			t.Errorf("Label of %+v = %q, want %q", tt.r, got, tt.want)
		}
	}
}

func TestIncompleteRunInJUnitAndReport(t *testing.T) {
	r := &Results{Scenario: "pets-kill", Verdict: checker.Unknown, Incomplete: true,
		Checks: []checker.Result{{Checker: checker.PhasesChecker, Verdict: checker.Ok, Guarantees: []string{"LC-1"}, Summary: "fine", Stats: checker.Stats{Checked: 3}}}}
	s := RunJUnit(r)
	var run *JUnitCase
	for i := range s.Cases {
		if s.Cases[i].ClassName == "run" {
			run = &s.Cases[i]
		}
	}
	if run == nil || run.Error == nil || run.Error.Type != "IncompleteRun" || !strings.Contains(run.Error.Message, IncompleteLabel) {
		t.Fatalf("JUnit cases %+v: want a run case in error naming the incomplete run", s.Cases)
	}
	if s.Errors != 1 {
		t.Errorf("suite counts %d errors, want 1", s.Errors)
	}
	page, err := RenderRun(&history.History{}, r, "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), "incomplete run") || !strings.Contains(string(page), "no closing record") {
		t.Error("report.html does not label the incomplete run")
	}
	// A complete run has no such case.
	r.Incomplete, r.Verdict = false, checker.Ok
	for _, c := range RunJUnit(r).Cases {
		if c.ClassName == "run" {
			t.Errorf("a complete run has a run case: %+v", c)
		}
	}
}
