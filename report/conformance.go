package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/podsafe/podsafe/checker"
)

// The status of a guarantee over a set of runs.
const (
	StatusFailed     = "failed"
	StatusPassed     = "passed"
	StatusUnknown    = "unknown"
	StatusNotCovered = "not covered"
)

// ConformanceRun is one run of a conformance report.
type ConformanceRun struct {
	Dir      string `json:"dir"`
	Scenario string `json:"scenario"`
	// Target is the system the run was made on (embedded or kube): from
	// results.json, else scenario.json, else embedded.
	Target   string          `json:"target"`
	Seed     uint64          `json:"seed"`
	Verdict  checker.Verdict `json:"verdict"`
	Started  time.Time       `json:"started,omitzero"`
	Workload string          `json:"workload,omitempty"`
	Nemesis  []string        `json:"nemesis,omitempty"`
	Error    string          `json:"error,omitempty"`
	// Snapshots counts the run's raft snapshots (Results.Snapshots).
	Snapshots *SnapshotCounts `json:"snapshots,omitempty"`
}

// RunRef names a run that judged a guarantee and the checkers that did.
type RunRef struct {
	Dir      string          `json:"dir"`
	Scenario string          `json:"scenario"`
	Seed     uint64          `json:"seed"`
	Verdict  checker.Verdict `json:"verdict"`
	Checkers []string        `json:"checkers"`
	// Summary is the summary of the deciding checker, for failures.
	Summary string `json:"summary,omitempty"`
}

// ConformanceRow is one guarantee over a set of runs.
type ConformanceRow struct {
	Guarantee
	// Covered reports that at least one run judged the guarantee.
	Covered bool `json:"covered"`
	// Status is failed when a run found it Illegal, else passed when a
	// run found it Ok, else unknown when runs judged it without deciding,
	// else not covered.
	Status string `json:"status"`
	Known  bool   `json:"known"`
	// Specs are the scenario names of the runs that judged it.
	Specs    []string `json:"specs,omitempty"`
	Checkers []string `json:"checkers,omitempty"`
	Failed   []RunRef `json:"failed,omitempty"`
	Passed   []RunRef `json:"passed,omitempty"`
	Unknown  []RunRef `json:"unknown,omitempty"`
	// SpecsPassed and SpecsFailed name the suite's specs labelled with the
	// guarantee that passed or failed (see AddSpecs).
	SpecsPassed []string `json:"specs_passed,omitempty"`
	SpecsFailed []string `json:"specs_failed,omitempty"`
	// SpecFailures are the failed specs' messages, "name: message"; and
	// SpecsSkipped the skipped specs that said why, "name: reason" (such
	// as a guarantee not covered on the suite's target). Skipped specs
	// cover nothing.
	SpecFailures []string `json:"spec_failures,omitempty"`
	SpecsSkipped []string `json:"specs_skipped,omitempty"`
	// Mutation is the guarantee's mutation kill rate (see AddMutation);
	// nil is not measured. A guarantee whose attributed mutants all
	// survived is not covered, whatever its runs and specs say.
	Mutation *MutationGuarantee `json:"mutation,omitempty"`
}

// ConformanceProblem is a directory that could not be read as a run.
type ConformanceProblem struct {
	Dir   string `json:"dir"`
	Error string `json:"error"`
}

// ConformanceReport is the conformance of a set of runs: for every
// guarantee of the catalogue, whether it was covered and whether it passed.
type ConformanceReport struct {
	Generated time.Time            `json:"generated"`
	Runs      []ConformanceRun     `json:"runs"`
	Rows      []ConformanceRow     `json:"guarantees"`
	Problems  []ConformanceProblem `json:"problems,omitempty"`
	Totals    ConformanceTotals    `json:"totals"`
	// MutationSource is the mutation.json the kill rates come from; empty
	// when none was found (every rate is then not measured).
	MutationSource string `json:"mutation_source,omitempty"`
}

// ConformanceTotals counts the rows of a conformance report by status.
type ConformanceTotals struct {
	Guarantees int `json:"guarantees"`
	Covered    int `json:"covered"`
	Passed     int `json:"passed"`
	Failed     int `json:"failed"`
	Unknown    int `json:"unknown"`
	NotCovered int `json:"not_covered"`
	Runs       int `json:"runs"`
	RunsFailed int `json:"runs_failed"`
}

// ErrNoRuns means a conformance report was asked of no readable run.
var ErrNoRuns = errors.New("no run directory with a results.json")

// scenarioFile is the part of scenario.json a conformance report reads.
type scenarioFile struct {
	Name     string   `json:"name"`
	Workload string   `json:"workload"`
	Nemesis  []string `json:"nemesis"`
	// A composed nemesis: its parts, each "faults@interval" in the run's
	// list (the part's interval, else NemesisInterval).
	NemesisCompose []struct {
		Faults   []string `json:"faults"`
		Interval string   `json:"interval"`
	} `json:"nemesisCompose"`
	NemesisInterval string `json:"nemesisInterval"`
	Target          string `json:"target"`
}

// nemesis lists the run's faults: the names, or the composed parts.
func (s *scenarioFile) nemesis() []string {
	if len(s.NemesisCompose) == 0 {
		return s.Nemesis
	}
	var out []string
	for _, p := range s.NemesisCompose {
		every := p.Interval
		if every == "" || every == "0s" {
			every = s.NemesisInterval
		}
		out = append(out, strings.Join(p.Faults, ",")+"@"+every)
	}
	return out
}

// Conformance reads the results.json (and scenario.json, when present) of
// every run directory in dirs and aggregates them per guarantee. A directory
// whose results cannot be read is listed in Problems; the error is
// ErrNoRuns when no directory could be read.
func Conformance(dirs []string) (*ConformanceReport, error) {
	rep := &ConformanceReport{Generated: time.Now().UTC()}
	var results []*Results
	for _, dir := range dirs {
		r, err := ReadResults(dir)
		if err != nil {
			rep.Problems = append(rep.Problems, ConformanceProblem{Dir: dir, Error: err.Error()})
			continue
		}
		run := ConformanceRun{Dir: dir, Scenario: r.Scenario, Target: r.Target, Seed: r.Seed, Verdict: r.Verdict, Started: r.Started, Error: r.Error, Snapshots: r.Snapshots}
		if b, err := os.ReadFile(filepath.Join(dir, ScenarioFile)); err == nil {
			var s scenarioFile
			if json.Unmarshal(b, &s) == nil {
				run.Workload, run.Nemesis = s.Workload, s.nemesis()
				if run.Scenario == "" {
					run.Scenario = s.Name
				}
				if run.Target == "" {
					// Results rewritten by an older podsafe check, or
					// written before results named their target.
					run.Target = s.Target
				}
			}
		}
		if run.Target == "" {
			run.Target = TargetEmbedded
		}
		r.Dir = dir
		results = append(results, r)
		rep.Runs = append(rep.Runs, run)
	}
	if len(results) == 0 {
		return rep, ErrNoRuns
	}
	type acc struct {
		row      *ConformanceRow
		specs    map[string]bool
		checkers map[string]bool
	}
	accs := map[string]*acc{}
	var order []string
	get := func(g Guarantee, known bool) *acc {
		a := accs[g.ID]
		if a == nil {
			a = &acc{row: &ConformanceRow{Guarantee: g, Known: known}, specs: map[string]bool{}, checkers: map[string]bool{}}
			accs[g.ID] = a
			order = append(order, g.ID)
		}
		return a
	}
	for _, g := range catalogue {
		get(g, true)
	}
	for i, r := range results {
		run := rep.Runs[i]
		for _, gr := range JudgedRows(GuaranteeTable(r)) {
			a := get(gr.Guarantee, gr.Known)
			a.specs[run.Scenario] = true
			for _, c := range gr.Checkers {
				a.checkers[c] = true
			}
			ref := RunRef{Dir: run.Dir, Scenario: run.Scenario, Seed: run.Seed, Verdict: gr.Verdict, Checkers: gr.Checkers}
			switch gr.Verdict {
			case checker.Illegal:
				ref.Summary = strings.Join(gr.Summaries, "; ")
				a.row.Failed = append(a.row.Failed, ref)
			case checker.Ok:
				a.row.Passed = append(a.row.Passed, ref)
			default:
				ref.Summary = strings.Join(gr.Summaries, "; ")
				a.row.Unknown = append(a.row.Unknown, ref)
			}
		}
	}
	sortIDs(order)
	for _, id := range order {
		a := accs[id]
		row := a.row
		row.Specs = sortedKeys(a.specs)
		row.Checkers = sortedKeys(a.checkers)
		rep.Rows = append(rep.Rows, *row)
	}
	rep.count()
	sort.SliceStable(rep.Runs, func(i, j int) bool { return rep.Runs[i].Started.After(rep.Runs[j].Started) })
	return rep, nil
}

// count sets every row's Covered and Status from its runs and specs, and
// the totals.
func (rep *ConformanceReport) count() {
	t := ConformanceTotals{Guarantees: len(rep.Rows), Runs: len(rep.Runs)}
	for i := range rep.Rows {
		row := &rep.Rows[i]
		row.Covered = len(row.Failed)+len(row.Passed)+len(row.Unknown)+len(row.SpecsFailed)+len(row.SpecsPassed) > 0
		failed := len(row.Failed) > 0 || len(row.SpecsFailed) > 0
		if m := row.Mutation; m != nil && m.Attributed > 0 && m.Survived == m.Attributed && !failed {
			// Nothing caught any mutant that breaks it: not covered.
			row.Covered = false
		}
		switch {
		case failed:
			row.Status = StatusFailed
			t.Failed++
		case !row.Covered:
			row.Status = StatusNotCovered
			t.NotCovered++
		case len(row.Passed) > 0 || len(row.SpecsPassed) > 0:
			row.Status = StatusPassed
			t.Passed++
		case len(row.Unknown) > 0:
			row.Status = StatusUnknown
			t.Unknown++
		default:
			row.Status = StatusNotCovered
			t.NotCovered++
		}
		if row.Covered {
			t.Covered++
		}
	}
	for _, r := range rep.Runs {
		if r.Verdict != checker.Ok || r.Error != "" {
			t.RunsFailed++
		}
	}
	rep.Totals = t
}

// SpecResult is the outcome of one spec of a conformance suite (a ginkgo
// It) and the guarantee IDs it is labelled with: the live probes and
// history assertions that no run's checker reports.
type SpecResult struct {
	Name string `json:"name"`
	// IDs are the guarantee IDs among the spec's labels.
	IDs []string `json:"ids"`
	// State is passed, failed or skipped.
	State   string `json:"state"`
	Failure string `json:"failure,omitempty"`
	// Reason is why a skipped spec was skipped, when it said (such as a
	// guarantee not covered on the suite's target).
	Reason string `json:"reason,omitempty"`
}

// SpecsFile holds a suite's spec results in a store (see AddSpecs).
const SpecsFile = "specs.json"

// AddSpecs counts spec results in: a passed spec labelled with an ID covers
// it, a failed one fails it; skipped specs cover nothing, but their reasons
// are kept (SpecsSkipped). Spec names join the row's Specs as
// "spec: <name>".
func (rep *ConformanceReport) AddSpecs(specs []SpecResult) {
	idx := map[string]int{}
	for i, r := range rep.Rows {
		idx[r.ID] = i
	}
	for _, sp := range specs {
		for _, id := range sp.IDs {
			i, ok := idx[id]
			if !ok {
				continue
			}
			row := &rep.Rows[i]
			switch sp.State {
			case StatusPassed:
				row.SpecsPassed = append(row.SpecsPassed, sp.Name)
			case StatusFailed:
				row.SpecsFailed = append(row.SpecsFailed, sp.Name)
				row.SpecFailures = append(row.SpecFailures, sp.Name+": "+firstLine(sp.Failure))
			default:
				if sp.Reason != "" {
					row.SpecsSkipped = append(row.SpecsSkipped, sp.Name+": "+firstLine(sp.Reason))
				}
				continue
			}
			row.Specs = append(row.Specs, "spec: "+sp.Name)
		}
	}
	rep.count()
}

// firstLine is s up to its first line break, trimmed.
func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(s)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// FindRuns returns every run directory beneath root: each directory that
// holds a results.json or a history (history.jsonl or history.jsonl.gz). It does not follow symbolic links,
// so store/latest is not counted twice. A run directory is not searched for
// runs inside it.
func FindRuns(root string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if isRunDir(path) {
			dirs = append(dirs, path)
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("finding runs in %s: %w", root, err)
	}
	sort.Strings(dirs)
	return dirs, nil
}

// isRunDir reports whether dir holds a run: a results.json or a
// history, plain or compressed.
func isRunDir(dir string) bool {
	for _, f := range []string{ResultsFile, HistoryFile, CompressedHistoryFile} {
		if st, err := os.Stat(filepath.Join(dir, f)); err == nil && st.Mode().IsRegular() {
			return true
		}
	}
	return false
}

// IsRunDir reports whether dir is a run directory (it holds a results.json
// or a history, plain or compressed) rather than a store of runs.
func IsRunDir(dir string) bool { return isRunDir(dir) }

// ConformanceJUnit is the JUnit form of a conformance report: one suite with
// a testcase per guarantee (failed, passed, or skipped when not covered or
// undecided), and one suite per run.
func ConformanceJUnit(rep *ConformanceReport) JUnitSuites {
	s := JUnitSuite{Name: "conformance", Properties: []JUnitProperty{
		{Name: "runs", Value: fmt.Sprint(rep.Totals.Runs)},
		{Name: "covered", Value: fmt.Sprintf("%d/%d", rep.Totals.Covered, rep.Totals.Guarantees)},
		{Name: "mutation", Value: orNotMeasured(rep.MutationSource)},
	}}
	for _, row := range rep.Rows {
		c := JUnitCase{ClassName: row.Family, Name: strings.TrimSpace(row.ID + " " + row.Title)}
		switch row.Status {
		case StatusFailed:
			var lines []string
			for _, f := range row.Failed {
				lines = append(lines, fmt.Sprintf("%s seed %d (%s): %s — %s", f.Scenario, f.Seed, f.Dir, strings.Join(f.Checkers, ", "), f.Summary))
			}
			c.Failure = &JUnitMessage{Message: fmt.Sprintf("%s violated in %d of %d runs", row.ID, len(row.Failed), len(row.Failed)+len(row.Passed)+len(row.Unknown)),
				Type: "Illegal", Text: strings.Join(lines, "\n")}
		case StatusNotCovered:
			c.Skipped = &JUnitMessage{Message: "not covered by any run"}
			if len(row.SpecsSkipped) > 0 {
				c.Skipped.Message = "not covered: skipped " + row.SpecsSkipped[0]
			}
		case StatusUnknown:
			c.Skipped = &JUnitMessage{Message: fmt.Sprintf("judged by %d runs, none decided", len(row.Unknown))}
		default:
			c.SystemOut = fmt.Sprintf("passed in %d runs of %s by %s", len(row.Passed), strings.Join(row.Specs, ", "), strings.Join(row.Checkers, ", "))
		}
		s.Cases = append(s.Cases, c)
	}
	for _, p := range rep.Problems {
		s.Cases = append(s.Cases, JUnitCase{ClassName: "run", Name: "read " + p.Dir, Error: &JUnitMessage{Message: p.Error, Type: "UnreadableRun"}})
	}
	s.count()
	return NewJUnit("podsafe conformance", s)
}

// WriteConformance writes conformance.json, conformance.html and
// conformance-junit.xml into dir.
func WriteConformance(dir string, rep *ConformanceReport) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding conformance: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ConformanceJSONFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing conformance: %w", err)
	}
	page, err := RenderConformance(rep, dir)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ConformanceHTMLFile), page, 0o644); err != nil {
		return fmt.Errorf("writing conformance: %w", err)
	}
	return WriteJUnit(filepath.Join(dir, ConformanceJUnitFile), ConformanceJUnit(rep))
}

// The files of a conformance report.
const (
	ConformanceJSONFile  = "conformance.json"
	ConformanceHTMLFile  = "conformance.html"
	ConformanceJUnitFile = "conformance-junit.xml"
)

// ConformanceDir finds every run beneath store, aggregates them, counts in
// the spec results of store/specs.json when a suite left one, and writes the
// conformance report into store.
func ConformanceDir(store string) (*ConformanceReport, error) {
	rep, err := ConformanceStore(store)
	if err != nil {
		return rep, err
	}
	return rep, WriteConformance(store, rep)
}

// ConformanceStore is ConformanceDir without writing anything: the
// conformance report of the runs beneath store and of store/specs.json.
func ConformanceStore(store string) (*ConformanceReport, error) {
	dirs, err := FindRuns(store)
	if err != nil {
		return nil, err
	}
	rep, err := Conformance(dirs)
	if err != nil {
		return rep, fmt.Errorf("%s: %w", store, err)
	}
	m, src, err := FindMutation(store)
	if err != nil {
		return rep, err
	}
	rep.AddMutation(m, src)
	if b, err := os.ReadFile(filepath.Join(store, SpecsFile)); err == nil {
		var specs []SpecResult
		if err := json.Unmarshal(b, &specs); err != nil {
			return rep, fmt.Errorf("%s is corrupt: %w", filepath.Join(store, SpecsFile), err)
		}
		rep.AddSpecs(specs)
	}
	return rep, nil
}
