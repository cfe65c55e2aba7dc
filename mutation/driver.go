// Package mutation measures whether podsafe's checkers catch bugs in the
// system under test: it enumerates mutants of the system-under-test
// packages with gremlins (a dry run), applies a deterministic sample of
// them one at a time through the go command's -overlay (the tree is never
// written), runs the package's unit tests, then the bug zoo's scenarios and
// the conformance suite's runs for the package over a podsafe built with
// the mutant, and records which mutants a checker caught, which only the
// unit tests or a crash noticed, and which survived — per package and per guarantee (mutation.json,
// mutation.md).
package mutation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/podsafe/podsafe/checker"
	"github.com/podsafe/podsafe/report"
)

// Config configures a mutation run. Zero values take the defaults.
type Config struct {
	// Root is the module root (default ".").
	Root string
	// Commit, when set, is the commit whose tree is measured; empty
	// measures the working tree as it is when the run starts. Either way
	// the run works on a snapshot (see Snapshot).
	Commit string
	// Packages are the package directories (default DefaultPackages).
	Packages []string
	// PerPackage is how many mutants each package gets (default 5); 0 or
	// less after defaulting is not allowed, use a large number for all.
	PerPackage int
	// PerGuarantee, when above 0, tops the sample up so that each guarantee
	// the measured packages' code is mapped to (mutation/guarantees.yaml)
	// has at least that many sampled mutants, drawn from its code with
	// Seed, as far as its code has them.
	PerGuarantee int
	// Seed draws the sample (default 1).
	Seed uint64
	// Gremlins is the gremlins binary (pinned GremlinsVersion).
	Gremlins string
	// Store is where the run's directory is made (default store/mutation);
	// its "latest" link names the newest.
	Store string
	// Go is the go command (default "go").
	Go string
	// UnitTimeout bounds one run of a package's unit tests (default 5m, or
	// three times the unmutated package's tests with coverage if longer);
	// RunTimeout one scenario run (default 4m).
	UnitTimeout time.Duration
	RunTimeout  time.Duration
	// UnitSurvivorsOnly runs the scenarios only for mutants the unit tests
	// did not kill: cheaper, but a checker's catch is then unmeasured for
	// the rest.
	UnitSurvivorsOnly bool
	// Equivalents and Attributions default to the embedded lists.
	Equivalents  []Equivalent
	Attributions []Attribution
	// Progress gets one line per step (nil: none).
	Progress io.Writer
}

// ErrConfig reports a configuration a mutation run cannot use.
var ErrConfig = errors.New("mutation config")

func (c *Config) defaults() error {
	if c.Root == "" {
		c.Root = "."
	}
	if len(c.Packages) == 0 {
		c.Packages = DefaultPackages
	}
	pkgs := make([]string, 0, len(c.Packages))
	for _, p := range c.Packages {
		n, err := NormalizePackage(p)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrConfig, err)
		}
		pkgs = append(pkgs, n)
	}
	c.Packages = pkgs
	if c.PerPackage == 0 {
		c.PerPackage = 5
	}
	if c.PerPackage < 0 {
		return fmt.Errorf("%w: per-package sample must be at least 1, got %d", ErrConfig, c.PerPackage)
	}
	if c.PerGuarantee < 0 {
		return fmt.Errorf("%w: per-guarantee sample must be 0 (none) or more, got %d", ErrConfig, c.PerGuarantee)
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Gremlins == "" {
		return fmt.Errorf("%w: no gremlins binary: install gremlins %s (make mutation does) and pass its path", ErrConfig, GremlinsVersion)
	}
	if _, err := os.Stat(c.Gremlins); err != nil {
		return fmt.Errorf("%w: gremlins binary: %w (make mutation installs gremlins %s)", ErrConfig, err, GremlinsVersion)
	}
	if c.Store == "" {
		c.Store = filepath.Join("store", "mutation")
	}
	if c.Go == "" {
		c.Go = "go"
	}
	if c.UnitTimeout <= 0 {
		c.UnitTimeout = 5 * time.Minute
	}
	if c.RunTimeout <= 0 {
		c.RunTimeout = 4 * time.Minute
	}
	var err error
	if c.Equivalents == nil {
		if c.Equivalents, err = LoadEquivalents(nil); err != nil {
			return err
		}
	}
	if c.Attributions == nil {
		if c.Attributions, err = LoadAttributions(nil); err != nil {
			return err
		}
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	return nil
}

// Run runs the mutation run c describes and writes mutation.json and
// mutation.md into a new directory of c.Store, which it returns.
func Run(ctx context.Context, c Config) (*report.MutationResults, string, error) {
	if err := c.defaults(); err != nil {
		return nil, "", err
	}
	start := time.Now()
	work, err := os.MkdirTemp("", "podsafe-mutation-")
	if err != nil {
		return nil, "", fmt.Errorf("mutation work directory: %w", err)
	}
	defer os.RemoveAll(work)
	snap := filepath.Join(work, "snapshot")
	if c.Commit != "" {
		// The results name the commit measured, not "HEAD", which moves.
		if c.Commit, err = ResolveCommit(ctx, c.Root, c.Commit); err != nil {
			return nil, "", err
		}
	}
	if err := Snapshot(ctx, c.Root, snap, c.Commit); err != nil {
		return nil, "", err
	}
	ex := &executor{root: snap, goCmd: c.Go, unitTimeout: c.UnitTimeout, runTimeout: c.RunTimeout, runsForAll: !c.UnitSurvivorsOnly}
	res := &report.MutationResults{Generated: start.UTC(), Tool: "gremlins " + GremlinsVersion, Seed: c.Seed, PerPackage: c.PerPackage, PerGuarantee: c.PerGuarantee, Mutators: Mutators, Commit: c.Commit}

	// The unmutated system's run of each scenario: a scenario that is not
	// Ok without a mutant would kill every mutant, so it is not used.
	base := filepath.Join(work, "baseline")
	if err := os.MkdirAll(base, 0o755); err != nil {
		return nil, "", fmt.Errorf("mutation baseline: %w", err)
	}
	bin := filepath.Join(base, "podsafe")
	if err := ex.buildPodsafe(ctx, "", bin); err != nil {
		return nil, "", err
	}
	usable := map[string]bool{}
	for _, bug := range scenariosOf(c.Packages) {
		r := ex.runScenario(ctx, bin, base, bug)
		res.Baselines = append(res.Baselines, r)
		fmt.Fprintf(c.Progress, "baseline %-40s %-9s %5.0fs %s\n", r.Scenario, r.Verdict, r.Seconds, firstLineOf(r.Error))
		if r.Verdict == string(checker.Ok) {
			usable[bug] = true
		} else {
			res.Warnings = append(res.Warnings, fmt.Sprintf("scenario %s is %s without any mutant (%s); its runs are left out", bug, r.Verdict, r.Error))
		}
	}

	// Enumerate every package first, so that the per-guarantee top-up
	// draws from all of them; then judge each package's sample.
	type pkgWork struct {
		report      report.MutationPackage
		candidates  []Mutant
		sample      []Mutant
		scenarios   []string
		unitTimeout time.Duration
	}
	works := make([]*pkgWork, 0, len(c.Packages))
	for _, pkg := range c.Packages {
		if err := ctx.Err(); err != nil {
			return nil, "", err
		}
		t0 := time.Now()
		all, err := Enumerate(ctx, c.Gremlins, snap, pkg, c.Progress)
		if err != nil {
			return nil, "", err
		}
		// The enumeration ran the package's unit tests once (gremlins'
		// coverage step): a mutant's run may take three times as long, as
		// gremlins allows, before its timeout counts as a kill.
		w := &pkgWork{unitTimeout: max(c.UnitTimeout, 3*time.Since(t0))}
		for _, b := range PackageScenarios[pkg] {
			if usable[b] {
				w.scenarios = append(w.scenarios, b)
			}
		}
		w.report = report.MutationPackage{Package: pkg, Total: len(all), Scenarios: scenarioNames(w.scenarios)}
		for i := range all {
			m := &all[i]
			if err := m.Locate(snap); err != nil {
				res.Warnings = append(res.Warnings, err.Error())
				continue
			}
			if m.InMarker {
				r := resultOf(m)
				r.Status, r.Reason, r.Guarantees = report.MutantEquivalent, markerReason, Attribute(c.Attributions, m)
				res.Mutants = append(res.Mutants, r)
				w.report.Equivalent++
				continue
			}
			if e, ok := equivalent(c.Equivalents, m); ok {
				r := resultOf(m)
				r.Status, r.Reason, r.Guarantees = report.MutantEquivalent, e.Reason, Attribute(c.Attributions, m)
				res.Mutants = append(res.Mutants, r)
				w.report.Equivalent++
				continue
			}
			w.candidates = append(w.candidates, *m)
		}
		w.sample = Sample(w.candidates, c.PerPackage, c.Seed, pkg)
		works = append(works, w)
	}
	if c.PerGuarantee > 0 {
		cands := map[string][]Mutant{}
		samples := map[string][]Mutant{}
		for _, w := range works {
			cands[w.report.Package], samples[w.report.Package] = w.candidates, w.sample
		}
		samples = TopUpByGuarantee(cands, samples, c.Attributions, c.PerGuarantee, c.Seed)
		for _, w := range works {
			w.sample = samples[w.report.Package]
		}
	}

	n := 0
	for _, w := range works {
		ex.unitTimeout = w.unitTimeout
		pr := w.report
		pr.Sampled = len(w.sample)
		for i := range w.sample {
			m := &w.sample[i]
			n++
			r := ex.evaluate(ctx, m, w.scenarios, filepath.Join(work, fmt.Sprintf("m%d", n)))
			if err := ctx.Err(); err != nil {
				return nil, "", fmt.Errorf("mutation run stopped at %s: %w", m.ID(), err)
			}
			if r.Status != report.MutantNotViable && r.Status != report.MutantNotRun {
				r.Guarantees = mergeIDs(Attribute(c.Attributions, m), r.Guarantees)
			}
			if r.Status == report.MutantNotRun {
				res.Warnings = append(res.Warnings, fmt.Sprintf("%s was not run: %s", r.ID, r.Reason))
			}
			count(&pr, r)
			res.Mutants = append(res.Mutants, r)
			fmt.Fprintf(c.Progress, "%-60s %-22s %5.0fs %s\n", r.ID, r.Status, r.Seconds, runsSummary(r.Runs))
		}
		res.Packages = append(res.Packages, pr)
	}
	res.Guarantees()
	res.Elapsed = time.Since(start).Seconds()
	dir, err := writeResults(c.Store, start, res)
	return res, dir, err
}

// markerReason is why a mutant in a failpoint marker's function is
// equivalent.
const markerReason = "in a failpoint marker's function (a planted bug of the zoo): only a failpoint build runs it, and mutation runs use ordinary builds"

// equivalent finds m in the equivalent list.
func equivalent(es []Equivalent, m *Mutant) (Equivalent, bool) {
	for _, e := range es {
		if e.Matches(m) {
			return e, true
		}
	}
	return Equivalent{}, false
}

// count adds a sampled mutant's outcome to its package's counts.
func count(p *report.MutationPackage, r report.MutantResult) {
	if r.KilledByUnit {
		p.KilledByUnit++
	}
	switch r.Status {
	case report.MutantNotViable:
		p.NotViable++
	case report.MutantNotRun:
		p.NotRun++
	case report.MutantKilledByChecker:
		p.KilledByChecker++
	case report.MutantKilledByCrash:
		p.KilledByCrash++
	case report.MutantSurvived:
		p.Survived++
	}
}

func firstLineOf(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func mergeIDs(a, b []string) []string {
	out := append(append([]string(nil), a...), b...)
	return sortedUnique(out)
}

func runsSummary(runs []report.MutantRun) string {
	s := ""
	for _, r := range runs {
		s += fmt.Sprintf(" %s=%s", r.Scenario, r.Verdict)
	}
	return s
}
