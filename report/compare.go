package report

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// Comparison is two conformance reports side by side, typically one store
// of runs on the embedded target and one on the kube target: per guarantee,
// the status on each side, one line of evidence, and whether they differ.
type Comparison struct {
	Generated time.Time `json:"generated"`
	// Sides are the two stores, in the order given.
	Sides []ComparisonSide `json:"sides"`
	// Differences counts the guarantees whose status differs.
	Differences int `json:"differences"`
	// Differing names them, in catalogue order.
	Differing []string        `json:"differing"`
	Rows      []ComparisonRow `json:"guarantees"`
}

// ComparisonSide is one store of a comparison.
type ComparisonSide struct {
	// Name labels the side: the target its runs were made on, or its store
	// when that does not tell the sides apart (see CompareStores).
	Name  string `json:"name"`
	Store string `json:"store"`
	// Targets are the targets of its runs (embedded, kube), sorted.
	Targets  []string             `json:"targets"`
	Totals   ConformanceTotals    `json:"totals"`
	Runs     []ConformanceRun     `json:"runs"`
	Problems []ConformanceProblem `json:"problems,omitempty"`
}

// ComparisonCell is one guarantee on one side.
type ComparisonCell struct {
	Side string `json:"side"`
	// Status is the conformance report's: passed, failed, unknown (judged,
	// undecided) or not covered.
	Status string `json:"status"`
	// Evidence is one line saying why: the failing run and checker's
	// summary or the failed spec's message, the runs and checkers that
	// passed it, the undecided checker's summary, or why it is not
	// covered (a skipped spec's reason).
	Evidence string `json:"evidence"`
	// Dir is the run the evidence comes from, when it is one run's.
	Dir string `json:"dir,omitempty"`
}

// ComparisonRow is one guarantee on both sides.
type ComparisonRow struct {
	Guarantee
	Known bool `json:"known"`
	// Cells are the guarantee on each side, in the order of Sides.
	Cells  []ComparisonCell `json:"cells"`
	Differ bool             `json:"differ"`
}

// Compare puts the conformance reports a and b side by side under the names
// given. A guarantee only one of them lists (one outside the catalogue) is
// not covered on the other. It is pure.
func Compare(a, b *ConformanceReport, nameA, nameB, storeA, storeB string) *Comparison {
	c := &Comparison{Generated: time.Now().UTC(), Differing: []string{}}
	reps := []*ConformanceReport{a, b}
	for i, n := range []string{nameA, nameB} {
		c.Sides = append(c.Sides, ComparisonSide{Name: n, Store: []string{storeA, storeB}[i],
			Targets: reportTargets(reps[i]), Totals: reps[i].Totals, Runs: reps[i].Runs, Problems: reps[i].Problems})
	}
	rows := map[string][]*ConformanceRow{}
	var order []string
	for i, rep := range reps {
		for j := range rep.Rows {
			r := &rep.Rows[j]
			if rows[r.ID] == nil {
				rows[r.ID] = make([]*ConformanceRow, 2)
				order = append(order, r.ID)
			}
			rows[r.ID][i] = r
		}
	}
	sortIDs(order)
	for _, id := range order {
		pair := rows[id]
		row := ComparisonRow{}
		for i, r := range pair {
			if r != nil && row.ID == "" {
				row.Guarantee, row.Known = r.Guarantee, r.Known
			}
			row.Cells = append(row.Cells, comparisonCell(c.Sides[i].Name, r))
		}
		row.Differ = row.Cells[0].Status != row.Cells[1].Status
		if row.Differ {
			c.Differences++
			c.Differing = append(c.Differing, id)
		}
		c.Rows = append(c.Rows, row)
	}
	return c
}

// comparisonCell is r's status on one side with one line of evidence; a nil
// r is a guarantee that side does not list.
func comparisonCell(side string, r *ConformanceRow) ComparisonCell {
	cell := ComparisonCell{Side: side, Status: StatusNotCovered}
	if r == nil {
		cell.Evidence = "not in this side's report"
		return cell
	}
	cell.Status = r.Status
	refLine := func(ref RunRef) string {
		line := fmt.Sprintf("%s seed %d: %s", ref.Scenario, ref.Seed, strings.Join(ref.Checkers, ", "))
		if ref.Summary != "" {
			line += ": " + firstLine(ref.Summary)
		}
		return line
	}
	more := func(n int, what string) string {
		if n <= 0 {
			return ""
		}
		return fmt.Sprintf(" (and %d more %s)", n, what)
	}
	switch r.Status {
	case StatusFailed:
		if len(r.Failed) > 0 {
			cell.Evidence = refLine(r.Failed[0]) + more(len(r.Failed)-1+len(r.SpecsFailed), "failures")
			cell.Dir = r.Failed[0].Dir
		} else if len(r.SpecFailures) > 0 {
			cell.Evidence = "spec " + r.SpecFailures[0] + more(len(r.SpecFailures)-1, "failed specs")
		} else {
			cell.Evidence = "spec " + strings.Join(r.SpecsFailed, "; ") + " failed"
		}
	case StatusPassed:
		var parts []string
		if n := len(r.Passed); n > 0 {
			var scen []string
			for _, p := range r.Passed {
				if !slices.Contains(scen, p.Scenario) {
					scen = append(scen, p.Scenario)
				}
			}
			parts = append(parts, fmt.Sprintf("Ok in %d %s (%s) by %s", n, plural(n, "run", "runs"), strings.Join(scen, ", "), strings.Join(r.Checkers, ", ")))
			if n == 1 {
				cell.Dir = r.Passed[0].Dir
			}
		}
		if len(r.SpecsPassed) > 0 {
			parts = append(parts, "spec passed: "+strings.Join(r.SpecsPassed, "; "))
		}
		if n := len(r.Unknown); n > 0 {
			parts = append(parts, fmt.Sprintf("undecided in %d %s", n, plural(n, "run", "runs")))
		}
		cell.Evidence = strings.Join(parts, "; ")
	case StatusUnknown:
		cell.Evidence = refLine(r.Unknown[0]) + more(len(r.Unknown)-1, "undecided runs")
		cell.Dir = r.Unknown[0].Dir
	default:
		switch {
		case len(r.SpecsSkipped) > 0:
			cell.Evidence = "skipped: " + r.SpecsSkipped[0] + more(len(r.SpecsSkipped)-1, "skipped specs")
		default:
			cell.Evidence = "no run or spec judged it"
		}
	}
	return cell
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// reportTargets are the distinct targets of rep's runs, sorted.
func reportTargets(rep *ConformanceReport) []string {
	var out []string
	for _, r := range rep.Runs {
		t := r.Target
		if t == "" {
			t = TargetEmbedded
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	sort.Strings(out)
	if out == nil {
		out = []string{}
	}
	return out
}

// CompareStores reads the conformance of the runs beneath storeA and storeB
// (and their specs.json) without writing into them, and compares them. The
// sides are named names[0] and names[1] when given, else after the target
// their runs were made on when each store's runs share one target and the
// two differ, else after the stores.
func CompareStores(storeA, storeB string, names [2]string) (*Comparison, error) {
	a, err := ConformanceStore(storeA)
	if err != nil {
		return nil, err
	}
	b, err := ConformanceStore(storeB)
	if err != nil {
		return nil, err
	}
	ta, tb := reportTargets(a), reportTargets(b)
	auto := [2]string{filepath.Clean(storeA), filepath.Clean(storeB)}
	if len(ta) == 1 && len(tb) == 1 && ta[0] != tb[0] {
		auto = [2]string{ta[0], tb[0]}
	}
	if auto[0] == auto[1] {
		auto = [2]string{"A: " + auto[0], "B: " + auto[1]}
	}
	for i := range names {
		if names[i] == "" {
			names[i] = auto[i]
		}
	}
	return Compare(a, b, names[0], names[1], storeA, storeB), nil
}

// The files of a comparison.
const (
	CompareJSONFile = "conformance-compare.json"
	CompareHTMLFile = "conformance-compare.html"
)

// WriteComparison writes conformance-compare.json and
// conformance-compare.html into dir, creating it; the page's links to runs
// are relative to dir.
func WriteComparison(dir string, c *Comparison) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("writing the comparison: %w", err)
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the comparison: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, CompareJSONFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing the comparison: %w", err)
	}
	page, err := RenderComparison(c, dir)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, CompareHTMLFile), page, 0o644); err != nil {
		return fmt.Errorf("writing the comparison: %w", err)
	}
	return nil
}

//go:embed assets/compare.html.tmpl
var compareTemplateText string

var compareTemplate = template.Must(template.New("compare").Funcs(funcs).Parse(compareTemplateText))

type cmpCell struct {
	ComparisonCell
	Link template.URL
}

type cmpRow struct {
	ComparisonRow
	Cells []cmpCell
}

type cmpRun struct {
	ConformanceRun
	Side, Started string
	Link          template.URL
}

type cmpPage struct {
	C       *Comparison
	A, B    ComparisonSide
	Rows    []cmpRow
	Runs    []cmpRun
	Verdict string
}

// RenderComparison renders conformance-compare.html; links to runs are
// relative to dir, where the page is written.
func RenderComparison(c *Comparison, dir string) ([]byte, error) {
	if len(c.Sides) != 2 {
		return nil, fmt.Errorf("rendering the comparison: %d sides, want 2", len(c.Sides))
	}
	link := func(runDir string) template.URL {
		if runDir == "" {
			return ""
		}
		return runLink(dir, runDir)
	}
	// Differences are not failures: the page is amber when there are some.
	p := cmpPage{C: c, A: c.Sides[0], B: c.Sides[1], Verdict: "passed"}
	if c.Differences > 0 {
		p.Verdict = "unknown"
	}
	for _, r := range c.Rows {
		row := cmpRow{ComparisonRow: r}
		for _, cell := range r.Cells {
			row.Cells = append(row.Cells, cmpCell{cell, link(cell.Dir)})
		}
		p.Rows = append(p.Rows, row)
	}
	for _, s := range c.Sides {
		for _, r := range s.Runs {
			cr := cmpRun{ConformanceRun: r, Side: s.Name, Link: link(r.Dir)}
			if !r.Started.IsZero() {
				cr.Started = r.Started.UTC().Format("2006-01-02 15:04:05")
			}
			p.Runs = append(p.Runs, cr)
		}
	}
	var buf bytes.Buffer
	if err := compareTemplate.Execute(&buf, p); err != nil {
		return nil, fmt.Errorf("rendering the comparison: %w", err)
	}
	return buf.Bytes(), nil
}

// runLink is the link from a page in dir to the report.html of runDir,
// relative (with ../ when runDir is not beneath dir), so that it survives
// html/template, which refuses file:// links, and moving the tree. Only
// when no relative path exists is it an absolute file URL.
func runLink(dir, runDir string) template.URL {
	target, err := filepath.Abs(filepath.Join(runDir, ReportFile))
	if err != nil {
		target = filepath.Join(runDir, ReportFile)
	}
	if from, err := filepath.Abs(dir); err == nil {
		if rel, err := filepath.Rel(from, target); err == nil {
			// URL.String escapes the path and puts ./ before a first
			// segment with a colon, so it never reads as a scheme.
			return template.URL((&url.URL{Path: filepath.ToSlash(rel)}).String())
		}
	}
	return template.URL((&url.URL{Scheme: "file", Path: filepath.ToSlash(target)}).String())
}
