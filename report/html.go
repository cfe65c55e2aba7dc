package report

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/podsafe/podsafe/checker"
	"github.com/podsafe/podsafe/history"
	"github.com/podsafe/podsafe/internal/atomicfile"
)

var (
	//go:embed assets/report.html.tmpl
	runTemplateText string
	//go:embed assets/style.css
	styleCSS string
	//go:embed assets/report.js
	reportJS string
)

// maxEvidenceRows bounds each evidence table of report.html.
const maxEvidenceRows = 200

var funcs = template.FuncMap{
	"verdictClass": verdictClass,
	"css":          func() template.CSS { return template.CSS(styleCSS) },
	"js":           func() template.JS { return template.JS(reportJS) },
	"f1":           func(f float64) string { return trimFloat(f) },
	"join":         strings.Join,
	"ids":          func(ids []uint64) string { return joinIDs(ids) },
}

var runTemplate = template.Must(template.New("report").Funcs(funcs).Parse(runTemplateText))

func verdictClass(v any) string {
	switch fmt.Sprint(v) {
	case string(checker.Ok), "passed", "covered":
		return "v-ok"
	case string(checker.Illegal), "failed":
		return "v-illegal"
	case string(checker.Unknown), "unknown":
		return "v-unknown"
	}
	return "v-none"
}

func joinIDs(ids []uint64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ", ")
}

// countRow is a name and a number, for the summary.
type countRow struct {
	Name  string
	Count int
}

// opRow, ledgerRow and apiRow are evidence table rows, already formatted.
type opRow struct {
	ID                                                      uint64
	Process                                                 int
	Func, Key, Value, Expect, Status, Output, Error, Invoke string
	Return                                                  string
	// Blocked marks an operation none of whose orders is legal next.
	Blocked bool
}

type ledgerRow struct {
	T, Scaled, Node, Pod, UID, Container, Action, Detail string
}

type apiRow struct {
	Invoke, Return, Identity, Verb, Object, Grace, Code, Outcome, UID, Error string
}

type evidenceView struct {
	Key, Description string
	Expected         bool
	Ops              []opRow
	Ledger           []ledgerRow
	API              []apiRow
	Linearized       string
	Blocked          string
	State            string
	Capped           []string
}

type checkView struct {
	checker.Result
	Duration string
	Evidence []evidenceView
	Expected int
}

// runPage is what report.html shows.
type runPage struct {
	R           *Results
	Verdict     string
	Started     string
	Duration    string
	HistoryEnd  string
	OpsByFunc   []countRow
	APIOutcomes []countRow
	APITotal    int
	Ledger      []countRow
	Faults      []countRow
	Table       []GuaranteeRow
	Judged      int
	Timeline    timeline
	Gantt       gantt
	Checks      []checkView
	LinLink     string
	Capped      []string
	Generated   string
	HistoryNote string
	EndNS       int64
}

// RenderRun renders the report.html of one run and returns it; linLink is the
// href of the porcupine visualization, or "" when there is none.
// h is the run's history; it may be nil when the history is lost, and then
// the page shows the results only.
func RenderRun(h *history.History, r *Results, linLink string) ([]byte, error) {
	if h == nil {
		h = &history.History{}
	}
	p := runPage{R: r, Verdict: string(r.Verdict), LinLink: linLink, Generated: time.Now().UTC().Format(time.RFC3339)}
	if p.Verdict == "" {
		p.Verdict = string(checker.Unknown)
	}
	start := r.Started
	if start.IsZero() {
		start = h.Meta.Start
	}
	if !start.IsZero() {
		p.Started = start.UTC().Format("2006-01-02 15:04:05 MST")
	}
	p.Duration = fmtDur(runDuration(r))
	p.HistoryEnd = fmtT(h.End)
	p.EndNS = h.End
	switch {
	case h.Truncated:
		p.HistoryNote = fmt.Sprintf("the history ends mid-line (line %d): the run crashed; this is what was complete", h.TruncatedLine)
	case r.Incomplete:
		p.HistoryNote = IncompleteLabel + ": the history has no closing record (the run was killed before it finished); the checkers judged what it recorded"
	}
	if r.Interrupted {
		p.HistoryNote = strings.TrimPrefix(p.HistoryNote+"; ", "; ") + "the run was interrupted (Ctrl-C): the workload and the faults stopped early, and the checkers judged what ran"
	}
	p.OpsByFunc = countBy(len(h.Ops), func(i int) string { return h.Ops[i].Func + " " + string(h.Ops[i].Status) })
	p.APITotal = len(h.API)
	p.APIOutcomes = countBy(len(h.API), func(i int) string { return string(h.API[i].Outcome) })
	p.Ledger = countBy(len(h.Ledger), func(i int) string { return string(h.Ledger[i].Action) })
	p.Faults = countBy(len(h.Nemesis), func(i int) string { return h.Nemesis[i].Name })
	p.Table = GuaranteeTable(r)
	p.Judged = len(JudgedRows(p.Table))
	p.Timeline = buildTimeline(h, r)
	p.Gantt = buildGantt(h, r)
	p.Capped = append(p.Capped, p.Timeline.Capped...)
	if p.Gantt.Capped != "" {
		p.Capped = append(p.Capped, p.Gantt.Capped)
	}
	for i := range r.Checks {
		p.Checks = append(p.Checks, viewCheck(&r.Checks[i], h.Meta.Start))
	}
	var buf bytes.Buffer
	if err := runTemplate.Execute(&buf, p); err != nil {
		return nil, fmt.Errorf("rendering report: %w", err)
	}
	return buf.Bytes(), nil
}

func countBy(n int, key func(int) string) []countRow {
	m := map[string]int{}
	for i := 0; i < n; i++ {
		m[key(i)]++
	}
	out := make([]countRow, 0, len(m))
	for k, v := range m {
		out = append(out, countRow{k, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func viewCheck(c *checker.Result, start time.Time) checkView {
	v := checkView{Result: *c, Duration: fmtDur(c.Stats.Duration)}
	for _, e := range c.Evidence {
		if e.Expected {
			v.Expected++
		}
		ev := evidenceView{Key: e.Key, Description: e.Description, Expected: e.Expected,
			Linearized: capIDs(e.Linearized), Blocked: capIDs(e.Blocked), State: e.State}
		blocked := map[uint64]bool{}
		for _, id := range e.Blocked {
			blocked[id] = true
		}
		for i, o := range e.Ops {
			if i == maxEvidenceRows {
				ev.Capped = append(ev.Capped, fmt.Sprintf("%d of %d operations shown", maxEvidenceRows, len(e.Ops)))
				break
			}
			ev.Ops = append(ev.Ops, opRow{ID: o.ID, Process: o.Process, Func: o.Func, Key: o.Key, Value: o.Value,
				Expect: o.Expect, Status: string(o.Status), Output: opOutput(o), Error: o.Error,
				Invoke: fmtT(o.Invoke), Return: fmtT(o.Return), Blocked: blocked[o.ID]})
		}
		for i, l := range e.Ledger {
			if i == maxEvidenceRows {
				ev.Capped = append(ev.Capped, fmt.Sprintf("%d of %d ledger entries shown", maxEvidenceRows, len(e.Ledger)))
				break
			}
			ev.Ledger = append(ev.Ledger, ledgerRow{T: fmtT(ledgerT(l, start)), Scaled: fmtClock(l.Scaled), Node: l.Node,
				Pod: l.Namespace + "/" + l.Pod, UID: l.UID, Container: l.Container, Action: string(l.Action), Detail: ledgerDetail(l)})
		}
		for i, a := range e.API {
			if i == maxEvidenceRows {
				ev.Capped = append(ev.Capped, fmt.Sprintf("%d of %d API calls shown", maxEvidenceRows, len(e.API)))
				break
			}
			ev.API = append(ev.API, apiRow{Invoke: fmtT(a.Invoke), Return: fmtT(a.Return), Identity: a.Identity, Verb: a.Verb,
				Object: apiObject(a), Grace: graceText(a.GracePeriodSeconds), Code: codeText(a.Code), Outcome: string(a.Outcome),
				UID: a.UID, Error: a.Error})
		}
		v.Evidence = append(v.Evidence, ev)
	}
	return v
}

// capIDs lists at most 50 operation IDs.
func capIDs(ids []uint64) string {
	const most = 50
	if len(ids) <= most {
		return joinIDs(ids)
	}
	return joinIDs(ids[:most]) + fmt.Sprintf(", … (%d in all)", len(ids))
}

func opOutput(o history.Op) string {
	if o.Output != "" {
		return o.Output
	}
	if o.Func == "get" || strings.HasSuffix(o.Func, ":get") {
		if o.Status == history.StatusOK && !o.Found {
			return "(absent)"
		}
	}
	return ""
}

func fmtClock(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("15:04:05.000")
}

func ledgerDetail(l history.LedgerEntry) string {
	var parts []string
	if l.Action == history.LedgerExit {
		parts = append(parts, fmt.Sprintf("exit %d", l.ExitCode))
	}
	if l.Grace != 0 {
		parts = append(parts, fmt.Sprintf("grace %ds", l.Grace))
	}
	if l.Volume != "" {
		parts = append(parts, fmt.Sprintf("volume %s token %d", l.Volume, l.Token))
	}
	if l.Probe != "" {
		parts = append(parts, fmt.Sprintf("%s probe: %s", l.Probe, l.Result))
	}
	if l.Reason != "" {
		parts = append(parts, "for "+l.Reason)
	}
	return strings.Join(parts, ", ")
}

func apiObject(a history.APICall) string {
	if a.Resource == "" {
		return a.Path
	}
	s := a.Resource
	if a.Group != "" {
		s += "." + a.Group
	}
	if a.Subresource != "" {
		s += "/" + a.Subresource
	}
	if a.Namespace != "" || a.Name != "" {
		s += " " + a.Namespace + "/" + a.Name
	}
	return s
}

func graceText(g *int64) string {
	if g == nil {
		return ""
	}
	return fmt.Sprintf("%ds", *g)
}

func codeText(c int) string {
	if c == 0 {
		return ""
	}
	return fmt.Sprint(c)
}

// Files a run directory holds.
const (
	ResultsFile         = "results.json"
	HistoryFile         = "history.jsonl"
	ScenarioFile        = "scenario.json"
	ReportFile          = "report.html"
	JUnitFile           = "junit.xml"
	LinearizabilityFile = "linearizability.html"
	LogFile             = "podsafe.log"
)

// CompressedHistoryFile is the history of a finished run once compressed
// (history.Compress); every reader of a run reads either form.
const CompressedHistoryFile = HistoryFile + history.CompressedExt

// WriteRun writes report.html and junit.xml into dir from the run's history
// (nil when it could not be loaded) and results. It links
// linearizability.html when dir holds one.
func WriteRun(dir string, h *history.History, r *Results) error {
	link := ""
	if _, err := os.Stat(filepath.Join(dir, LinearizabilityFile)); err == nil {
		link = LinearizabilityFile
	}
	page, err := RenderRun(h, r, link)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, ReportFile), page, 0o644); err != nil {
		return fmt.Errorf("writing report: %w", err)
	}
	return WriteJUnit(filepath.Join(dir, JUnitFile), NewJUnit("podsafe", RunJUnit(r)))
}

// RenderDir regenerates report.html and junit.xml of the run directory dir
// from its history (history.jsonl, or history.jsonl.gz when that is all
// there is) and results.json. Errors name the file that is missing or
// corrupt. A history that ends mid-line (a crash) is used as far
// as it is complete.
func RenderDir(dir string) error {
	r, err := ReadResults(dir)
	if err != nil {
		return err
	}
	h, err := history.Load(filepath.Join(dir, HistoryFile))
	if err != nil {
		return err
	}
	return WriteRun(dir, h, r)
}
