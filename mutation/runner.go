package mutation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/podsafe/podsafe/checker"
	"github.com/podsafe/podsafe/report"
)

// The verdicts of a run that gave none.
const (
	verdictCrashed  = "crashed"
	verdictTimedOut = "timed out"
)

// executor runs the go command and podsafe binaries for one mutation run.
type executor struct {
	root        string
	goCmd       string
	unitTimeout time.Duration
	runTimeout  time.Duration
	// runsForAll runs the scenarios of mutants the unit tests killed too,
	// so that a checker's catch is measured for every mutant.
	runsForAll bool
}

// goRun runs the go command in the module root and returns its combined
// output.
func (e *executor) goRun(parent context.Context, timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.goCmd, args...)
	cmd.Dir = e.root
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	switch {
	case err == nil:
	case parent.Err() != nil:
		err = parent.Err()
	case ctx.Err() != nil:
		err = fmt.Errorf("%w (after %s)", context.DeadlineExceeded, timeout)
	}
	return string(out), err
}

// buildPodsafe builds podsafe, mutated by overlay when it is not empty.
func (e *executor) buildPodsafe(ctx context.Context, overlay, out string) error {
	args := []string{"build"}
	if overlay != "" {
		args = append(args, "-overlay", overlay)
	}
	args = append(args, "-o", out, "./cmd/podsafe")
	if o, err := e.goRun(ctx, 20*time.Minute, args...); err != nil {
		return fmt.Errorf("building podsafe: %w\n%s", err, tail(o, 10))
	}
	return nil
}

// runScenario runs bug's scenario with the podsafe binary bin, its store
// under dir, and reads its verdict; the run's directory is removed after.
func (e *executor) runScenario(ctx context.Context, bin, dir, bug string) (r report.MutantRun) {
	start := time.Now()
	r = report.MutantRun{Scenario: bug}
	defer func() { r.Seconds = time.Since(start).Seconds() }()
	s, err := Scenario(bug)
	if err != nil {
		r.Verdict, r.Error = verdictCrashed, err.Error()
		return r
	}
	store := filepath.Join(dir, "runs-"+bug)
	defer os.RemoveAll(store)
	file := filepath.Join(dir, s.Name+".json")
	b, _ := json.Marshal(s)
	if err := os.WriteFile(file, b, 0o644); err != nil {
		r.Verdict, r.Error = verdictCrashed, err.Error()
		return r
	}
	rctx, cancel := context.WithTimeout(ctx, e.runTimeout)
	defer cancel()
	cmd := exec.CommandContext(rctx, bin, "test", "--scenario", file, "--store", store, "--compress=false")
	cmd.Dir = dir
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	runErr := cmd.Run()
	if rctx.Err() != nil && ctx.Err() == nil {
		r.Verdict, r.Error = verdictTimedOut, fmt.Sprintf("no verdict after %s", e.runTimeout)
		return r
	}
	res, err := readRunResults(store)
	if err != nil {
		r.Verdict, r.Error = verdictCrashed, strings.TrimSpace(fmt.Sprintf("%v; %v\n%s", err, runErr, tail(out.String(), 5)))
		return r
	}
	r.Verdict = string(res.Verdict)
	for _, c := range res.Checks {
		if c.Verdict == checker.Illegal {
			r.Illegal = append(r.Illegal, c.Checker)
			r.Guarantees = append(r.Guarantees, c.Guarantees...)
		}
	}
	slices.Sort(r.Guarantees)
	r.Guarantees = slices.Compact(r.Guarantees)
	if res.Error != "" {
		r.Error = res.Error
	}
	return r
}

// readRunResults reads the results.json of the one run beneath store.
func readRunResults(store string) (*report.Results, error) {
	found, _ := filepath.Glob(filepath.Join(store, "*", "*", report.ResultsFile))
	if len(found) == 0 {
		return nil, errors.New("the run wrote no results.json")
	}
	b, err := os.ReadFile(found[0])
	if err != nil {
		return nil, fmt.Errorf("reading the run's results: %w", err)
	}
	var res report.Results
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("reading %s: %w", found[0], err)
	}
	return &res, nil
}

// prepare applies m through an overlay in dir, compiles its package and
// runs the package's unit tests when they cover it. ok is false when the
// mutant is not viable (r says why).
func (e *executor) prepare(ctx context.Context, m *Mutant, dir string) (r report.MutantResult, overlay string, ok bool) {
	r = resultOf(m)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.Status, r.Reason = report.MutantNotViable, err.Error()
		return r, "", false
	}
	ov, err := m.WriteOverlay(e.root, dir)
	if err != nil {
		r.Status, r.Reason = report.MutantNotViable, err.Error()
		return r, "", false
	}
	if out, err := e.goRun(ctx, 20*time.Minute, "build", "-overlay", ov, "./"+m.Package); err != nil {
		r.Status, r.Reason = buildFailure(out, err)
		return r, "", false
	}
	// The unit tests run whatever gremlins' coverage said: it calls some
	// positions not covered that a test runs (the conditions of switch
	// cases among them), and such mutants were counted survivors that the
	// unit tests kill (storage.go's `case resp.StatusCode == 400`,
	// delete.go's `case d == nil || *d == 0`).
	_, err = e.goRun(ctx, e.unitTimeout, "test", "-overlay", ov, "-count=1", "-failfast", "-timeout", e.unitTimeout.String(), "./"+m.Package)
	r.KilledByUnit = err != nil
	if errors.Is(err, context.DeadlineExceeded) {
		r.Reason = "unit tests timed out: " + err.Error()
	}
	return r, ov, true
}

// evaluateUnit judges m by its package's unit tests alone.
func (e *executor) evaluateUnit(ctx context.Context, m *Mutant, dir string) report.MutantResult {
	defer os.RemoveAll(dir)
	r, _, ok := e.prepare(ctx, m, dir)
	if ok {
		classify(&r)
	}
	return r
}

// evaluate judges m by its package's unit tests and by the scenarios run
// over a podsafe built with it.
func (e *executor) evaluate(ctx context.Context, m *Mutant, scenarios []string, dir string) (r report.MutantResult) {
	start := time.Now()
	defer os.RemoveAll(dir)
	defer func() { r.Seconds = time.Since(start).Seconds() }()
	r, ov, ok := e.prepare(ctx, m, dir)
	if !ok {
		return r
	}
	if r.KilledByUnit && !e.runsForAll {
		r.Status = report.MutantKilledByUnit
		return r
	}
	bin := filepath.Join(dir, "podsafe")
	if err := e.buildPodsafe(ctx, ov, bin); err != nil {
		r.Status, r.Reason = buildFailure("", err)
		return r
	}
	for _, bug := range scenarios {
		run := e.runScenario(ctx, bin, dir, bug)
		r.Runs = append(r.Runs, run)
		if run.Verdict == string(checker.Illegal) || ctx.Err() != nil {
			break // one catch is enough; the rest would only add IDs
		}
	}
	classify(&r)
	return r
}

// classify sets the status of a mutant whose unit tests and runs are done:
// a checker's Illegal first, then a run that crashed, timed out or could
// not be judged (the baseline run of each scenario was judged Ok), then
// the unit tests.
func classify(r *report.MutantResult) {
	r.Status = report.MutantSurvived
	crashed := false
	for _, run := range r.Runs {
		switch run.Verdict {
		case string(checker.Illegal):
			r.Status = report.MutantKilledByChecker
			r.Broke = append(r.Broke, run.Guarantees...)
		case string(checker.Ok):
		default:
			crashed = true
		}
	}
	slices.Sort(r.Broke)
	r.Broke = slices.Compact(r.Broke)
	switch {
	case r.Status == report.MutantKilledByChecker:
	case crashed:
		r.Status = report.MutantKilledByCrash
	case r.KilledByUnit:
		r.Status = report.MutantKilledByUnit
	}
	r.Guarantees = append(r.Guarantees, r.Broke...)
	slices.Sort(r.Guarantees)
	r.Guarantees = slices.Compact(r.Guarantees)
}

// resultOf is the part of a mutant's result known before it is run.
func resultOf(m *Mutant) report.MutantResult {
	return report.MutantResult{
		ID: m.ID(), Package: m.Package, File: m.File, Line: m.Line, Column: m.Column, Func: m.Func,
		Mutator: m.Mutator, Original: m.Original, Replacement: m.Replacement, Source: m.Source,
		CoveredByUnit: m.CoveredByUnit,
	}
}

// buildFailure is the status of a mutant whose build failed: not viable
// when the compiler refused it, not run when the build timed out or was
// cancelled (the machine's doing, not the mutant's).
func buildFailure(out string, err error) (status, reason string) {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return report.MutantNotRun, "build: " + err.Error()
	}
	return report.MutantNotViable, compilerComplaint(out, err)
}

// compilerComplaint is the first error line of a failed build.
func compilerComplaint(out string, err error) string {
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "#") {
			return l
		}
	}
	return err.Error()
}

// scenarioNames are the names of the runs PackageScenarios entries make.
func scenarioNames(names []string) []string {
	out := make([]string, len(names))
	for i, b := range names {
		out[i] = "mutation-" + b
	}
	return out
}
