package mutation

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/podsafe/podsafe/report"
)

// MarkdownFile is the table a mutation run writes beside mutation.json.
const MarkdownFile = "mutation.md"

// writeResults writes res as mutation.json and mutation.md into a new
// directory store/<UTC timestamp> and points store/latest at it.
func writeResults(store string, start time.Time, res *report.MutationResults) (string, error) {
	name := start.UTC().Format("20060102T150405Z")
	dir := filepath.Join(store, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("writing mutation results: %w", err)
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encoding mutation results: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, report.MutationFile), append(b, '\n'), 0o644); err != nil {
		return "", fmt.Errorf("writing mutation results: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, MarkdownFile))
	if err != nil {
		return "", fmt.Errorf("writing mutation table: %w", err)
	}
	if err := WriteMarkdown(f, res); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("writing mutation table: %w", err)
	}
	latest := filepath.Join(store, "latest")
	os.Remove(latest)
	if err := os.Symlink(name, latest); err != nil {
		return dir, fmt.Errorf("linking %s: %w", latest, err)
	}
	return dir, nil
}

// pct is a/b as a percentage, "–" when b is 0.
func pct(a, b int) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f%%", 100*float64(a)/float64(b))
}

// WriteMarkdown writes the mutation table: per package the mutants, what
// killed them and the rates; the totals; each survivor's location; the
// kill rate per guarantee; the equivalent mutants left out.
func WriteMarkdown(w io.Writer, res *report.MutationResults) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Mutation run %s\n\n", res.Generated.Format("2006-01-02 15:04:05 UTC"))
	topUp := ""
	if res.PerGuarantee > 0 {
		topUp = fmt.Sprintf(", then more until each guarantee the code implements had %d (as far as its code has them)", res.PerGuarantee)
	}
	fmt.Fprintf(&b, "Mutants enumerated by %s (%s); %d per package drawn with seed %d%s; each applied through go's -overlay, then the package's unit tests and the package's runs (the bug zoo's scenarios for the package and the conformance runs of its guarantees) over a podsafe built with it. ",
		res.Tool, strings.Join(res.Mutators, ", "), res.PerPackage, res.Seed, topUp)
	b.WriteString("The rates are of the sample, not of every mutant. \"Killed by unit tests\" overlaps the run columns: a run is made whatever the unit tests say. Kill rate: killed by anything over viable; checker kill rate: killed by a checker over viable.\n\n")
	b.WriteString("| package | mutants (sampled/total) | not viable | equivalent | killed by unit tests | killed by a checker over a run | killed by crash | survived | kill rate | checker kill rate | scenarios |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	var tot report.MutationPackage
	for _, p := range res.Packages {
		writeRow(&b, p.Package, p, strings.Join(p.Scenarios, ", "))
		tot.Total += p.Total
		tot.Sampled += p.Sampled
		tot.NotViable += p.NotViable
		tot.Equivalent += p.Equivalent
		tot.KilledByUnit += p.KilledByUnit
		tot.KilledByChecker += p.KilledByChecker
		tot.KilledByCrash += p.KilledByCrash
		tot.Survived += p.Survived
	}
	writeRow(&b, "**total**", tot, "")
	if v, killed, byChecker := MappedRates(res); v > 0 {
		fmt.Fprintf(&b, "\nOf these, in code that implements a guarantee (mapped in mutation/guarantees.yaml, or found breaking one by a run): %d viable, kill rate %s, checker kill rate %s.\n",
			v, pct(killed, v), pct(byChecker, v))
	}
	var secs float64
	runs := 0
	for _, m := range res.Mutants {
		if m.Status != report.MutantEquivalent {
			secs += m.Seconds
			runs++
		}
	}
	if runs > 0 {
		fmt.Fprintf(&b, "\n%d mutants in %.0f s (%.0f s each on average); the whole run took %.0f s.\n", runs, secs, secs/float64(runs), res.Elapsed)
	}

	b.WriteString("\n## Survivors\n\n")
	n := 0
	for _, m := range res.Mutants {
		if m.Status != report.MutantSurvived {
			continue
		}
		n++
		fmt.Fprintf(&b, "- `%s:%d:%d` %s %s `%s`→`%s` in `%s` — `%s` (counts against %s)\n", m.File, m.Line, m.Column, orDash(m.Func), m.Mutator, m.Original, m.Replacement, m.Source, runsText(m.Runs), orNone(m.Guarantees))
	}
	if n == 0 {
		b.WriteString("None.\n")
	}

	b.WriteString("\n## Kill rate per guarantee\n\nAttributed: mutants of the code mapped to the guarantee (mutation/guarantees.yaml) or that a run found breaking it; killed by a run: a checker said Illegal.\n\n")
	b.WriteString("| guarantee | attributed | killed by a run | survived | kill rate |\n|---|---|---|---|---|\n")
	for _, g := range res.ByID {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %s |\n", g.ID, g.Attributed, g.KilledByRun, g.Survived, pct(g.KilledByRun, g.Attributed))
	}

	var eq []report.MutantResult
	for _, m := range res.Mutants {
		if m.Status == report.MutantEquivalent {
			eq = append(eq, m)
		}
	}
	if len(eq) > 0 {
		b.WriteString("\n## Equivalent mutants (left out of the rates)\n\n")
		for _, m := range eq {
			fmt.Fprintf(&b, "- `%s:%d:%d` %s %s `%s` — %s\n", m.File, m.Line, m.Column, orDash(m.Func), m.Mutator, m.Source, m.Reason)
		}
	}
	if len(res.Baselines) > 0 {
		b.WriteString("\n## Baseline runs (no mutant)\n\n")
		for _, r := range res.Baselines {
			fmt.Fprintf(&b, "- %s: %s in %.0f s\n", r.Scenario, r.Verdict, r.Seconds)
		}
	}
	if len(res.Warnings) > 0 {
		b.WriteString("\n## Warnings\n\n")
		for _, w := range res.Warnings {
			fmt.Fprintf(&b, "- %s\n", strings.SplitN(w, "\n", 2)[0])
		}
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing mutation table: %w", err)
	}
	return nil
}

func writeRow(b *strings.Builder, name string, p report.MutationPackage, scen string) {
	v := p.Viable()
	fmt.Fprintf(b, "| %s | %d/%d | %d | %d | %d | %d | %d | %d | %s | %s | %s |\n", name, p.Sampled, p.Total, p.NotViable, p.Equivalent,
		p.KilledByUnit, p.KilledByChecker, p.KilledByCrash, p.Survived, pct(v-p.Survived, v), pct(p.KilledByChecker, v), scen)
}

func runsText(runs []report.MutantRun) string {
	if len(runs) == 0 {
		return "no run"
	}
	parts := make([]string, len(runs))
	for i, r := range runs {
		parts[i] = r.Scenario + " " + r.Verdict
	}
	return strings.Join(parts, ", ")
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

func orNone(ids []string) string {
	if len(ids) == 0 {
		return "no guarantee"
	}
	return strings.Join(ids, ", ")
}

func sortedUnique(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

// Rates are the percentages of viable sampled mutants killed by anything
// and killed by a checker over a run; 100 when no mutant was viable.
func Rates(res *report.MutationResults) (kill, checker float64) {
	viable, survived, byChecker := 0, 0, 0
	for _, p := range res.Packages {
		viable += p.Viable()
		survived += p.Survived
		byChecker += p.KilledByChecker
	}
	if viable == 0 {
		return 100, 100
	}
	return 100 * float64(viable-survived) / float64(viable), 100 * float64(byChecker) / float64(viable)
}

// MappedRates counts the viable sampled mutants that count against a
// guarantee (their code is mapped to one, or a run found one broken): how
// many, how many anything killed, and how many a checker killed over a run.
// Code that implements no guarantee (tables, OpenAPI, decoding) can only be
// judged by unit tests; these are the mutants a run could catch.
func MappedRates(res *report.MutationResults) (viable, killed, byChecker int) {
	for _, m := range res.Mutants {
		switch m.Status {
		case report.MutantEquivalent, report.MutantNotViable, report.MutantNotRun:
			continue
		}
		if len(m.Guarantees) == 0 {
			continue
		}
		viable++
		if m.Killed() {
			killed++
		}
		if m.Status == report.MutantKilledByChecker {
			byChecker++
		}
	}
	return viable, killed, byChecker
}
