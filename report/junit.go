package report

import (
	"encoding/xml"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/podsafe/podsafe/checker"
	"github.com/podsafe/podsafe/internal/atomicfile"
)

// JUnitSuites is the root element of a JUnit XML report, in the dialect
// GitLab, Jenkins and most CI tools read.
type JUnitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr,omitempty"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     float64      `xml:"time,attr"`
	Suites   []JUnitSuite `xml:"testsuite"`
}

// JUnitSuite is one testsuite: one run, or the conformance summary.
type JUnitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       float64         `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr,omitempty"`
	Properties []JUnitProperty `xml:"properties>property,omitempty"`
	Cases      []JUnitCase     `xml:"testcase"`
	SystemOut  string          `xml:"system-out,omitempty"`
}

// JUnitProperty is a name/value pair of a suite.
type JUnitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

// JUnitCase is one testcase. At most one of Failure, Error and Skipped is
// set.
type JUnitCase struct {
	ClassName string        `xml:"classname,attr"`
	Name      string        `xml:"name,attr"`
	Time      float64       `xml:"time,attr"`
	Failure   *JUnitMessage `xml:"failure,omitempty"`
	Error     *JUnitMessage `xml:"error,omitempty"`
	Skipped   *JUnitMessage `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

// JUnitMessage is the body of a failure, error or skipped element.
type JUnitMessage struct {
	Message string `xml:"message,attr,omitempty"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

// RunJUnit is the JUnit testsuite of one run: a testcase per guarantee the
// run judged (classname the family, name "ID title"), failed when Illegal
// with the evidence as text and skipped when Unknown; then a testcase per
// checker (classname "checker"); and an error testcase when the run broke.
func RunJUnit(r *Results) JUnitSuite {
	s := JUnitSuite{
		Name: suiteName(r),
		Properties: []JUnitProperty{
			{Name: "scenario", Value: r.Scenario},
			{Name: "seed", Value: fmt.Sprint(r.Seed)},
			{Name: "verdict", Value: string(r.Verdict)},
		},
	}
	if r.Rerun != "" {
		s.Properties = append(s.Properties, JUnitProperty{Name: "rerun", Value: r.Rerun})
	}
	if r.Dir != "" {
		s.Properties = append(s.Properties, JUnitProperty{Name: "dir", Value: r.Dir})
	}
	if !r.Started.IsZero() {
		s.Timestamp = r.Started.UTC().Format("2006-01-02T15:04:05")
	}
	if d := runDuration(r); d > 0 {
		s.Time = d.Seconds()
	}
	for _, row := range JudgedRows(GuaranteeTable(r)) {
		c := JUnitCase{ClassName: row.Family, Name: strings.TrimSpace(row.ID + " " + row.Title)}
		checkers := "judged by " + strings.Join(row.Checkers, ", ")
		switch row.Verdict {
		case checker.Illegal:
			c.Failure = &JUnitMessage{
				Message: row.ID + " violated: " + strings.Join(row.Summaries, "; "),
				Type:    "Illegal",
				Text:    checkers + "\n\n" + evidenceText(r, row.ID),
			}
		case checker.Unknown:
			c.Skipped = &JUnitMessage{Message: "Unknown: " + strings.Join(row.Summaries, "; ")}
		default:
			c.SystemOut = checkers
		}
		s.Cases = append(s.Cases, c)
	}
	for i := range r.Checks {
		ch := &r.Checks[i]
		c := JUnitCase{ClassName: "checker", Name: ch.Checker, Time: ch.Stats.Duration.Seconds()}
		switch normVerdict(ch.Verdict) {
		case checker.Illegal:
			c.Failure = &JUnitMessage{Message: ch.Summary, Type: "Illegal", Text: checkEvidenceText(ch)}
		case checker.Unknown:
			c.Skipped = &JUnitMessage{Message: "Unknown: " + ch.Summary}
		default:
			c.SystemOut = ch.Summary
		}
		s.Cases = append(s.Cases, c)
	}
	if r.Snapshots != nil {
		s.Properties = append(s.Properties, JUnitProperty{Name: "snapshot_installs", Value: fmt.Sprint(r.Snapshots.Installed)},
			JUnitProperty{Name: "snapshots_taken", Value: fmt.Sprint(r.Snapshots.Taken)})
	}
	if l := r.Load; l != nil {
		s.Properties = append(s.Properties, JUnitProperty{Name: "machine_load", Value: l.String()},
			JUnitProperty{Name: "machine_starved", Value: fmt.Sprint(l.Starved())})
	}
	if r.Incomplete {
		s.Properties = append(s.Properties, JUnitProperty{Name: "incomplete", Value: "true"})
	}
	if r.Interrupted {
		s.Properties = append(s.Properties, JUnitProperty{Name: "interrupted", Value: "true"})
	}
	switch {
	case r.Error != "":
		s.Cases = append(s.Cases, JUnitCase{ClassName: "run", Name: "run completed",
			Error: &JUnitMessage{Message: r.Error, Type: "RunError", Text: r.Error}})
	case r.Incomplete:
		msg := IncompleteLabel + ": the history has no closing record; the run was killed before it finished, and the checkers judged what it recorded"
		s.Cases = append(s.Cases, JUnitCase{ClassName: "run", Name: "run completed",
			Error: &JUnitMessage{Message: msg, Type: "IncompleteRun", Text: msg}})
	case r.Interrupted:
		s.Cases = append(s.Cases, JUnitCase{ClassName: "run", Name: "run completed",
			Skipped: &JUnitMessage{Message: "interrupted: the workload and the faults were stopped early (Ctrl-C); the checkers judged what ran"}})
	}
	if len(r.Warnings) > 0 {
		s.SystemOut = "warnings:\n" + strings.Join(r.Warnings, "\n")
	}
	s.count()
	return s
}

func suiteName(r *Results) string {
	name := r.Scenario
	if name == "" {
		name = "run"
	}
	if r.Dir != "" {
		name += "/" + filepath.Base(r.Dir)
	} else {
		name += fmt.Sprintf("/seed%d", r.Seed)
	}
	return name
}

func runDuration(r *Results) time.Duration {
	if r.Started.IsZero() || r.Finished.IsZero() || r.Finished.Before(r.Started) {
		return 0
	}
	return r.Finished.Sub(r.Started)
}

// count fills the suite's totals from its cases.
func (s *JUnitSuite) count() {
	s.Tests, s.Failures, s.Errors, s.Skipped = len(s.Cases), 0, 0, 0
	for _, c := range s.Cases {
		switch {
		case c.Failure != nil:
			s.Failures++
		case c.Error != nil:
			s.Errors++
		case c.Skipped != nil:
			s.Skipped++
		}
	}
}

// evidenceText is the evidence of the Illegal checks of r that judged id.
func evidenceText(r *Results, id string) string {
	var b strings.Builder
	for i := range r.Checks {
		c := &r.Checks[i]
		if c.Verdict != checker.Illegal || !contains(c.Guarantees, id) {
			continue
		}
		fmt.Fprintf(&b, "%s: %s\n%s", c.Checker, c.Summary, checkEvidenceText(c))
	}
	return b.String()
}

// checkEvidenceText renders the evidence of one check as plain text.
func checkEvidenceText(c *checker.Result) string {
	var b strings.Builder
	for _, e := range c.Evidence {
		if e.Expected {
			continue
		}
		b.WriteString("- ")
		if e.Key != "" {
			b.WriteString(e.Key + ": ")
		}
		b.WriteString(e.Description)
		fmt.Fprintf(&b, " (%d ops, %d ledger entries, %d API calls)\n", len(e.Ops), len(e.Ledger), len(e.API))
		for _, l := range e.Ledger {
			fmt.Fprintf(&b, "    ledger %s %s %s/%s uid=%s %s", l.Wall.UTC().Format("15:04:05.000"), l.Node, l.Namespace, l.Pod, l.UID, l.Action)
			if l.Container != "" {
				fmt.Fprintf(&b, " container=%s", l.Container)
			}
			if d := ledgerDetail(l); d != "" {
				b.WriteString(" (" + d + ")")
			}
			b.WriteString("\n")
		}
		for _, a := range e.API {
			fmt.Fprintf(&b, "    api %s %s %s %s %s/%s -> %d %s\n", fmtT(a.Invoke), a.Identity, a.Verb, a.Resource, a.Namespace, a.Name, a.Code, a.Outcome)
		}
		for _, o := range e.Ops {
			fmt.Fprintf(&b, "    op %d p%d %s %s %s %s\n", o.ID, o.Process, o.Func, o.Key, o.Value, o.Status)
		}
	}
	return b.String()
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// NewJUnit wraps suites in a testsuites root with the totals filled in.
func NewJUnit(name string, suites ...JUnitSuite) JUnitSuites {
	out := JUnitSuites{Name: name, Suites: suites}
	for _, s := range suites {
		out.Tests += s.Tests
		out.Failures += s.Failures
		out.Errors += s.Errors
		out.Skipped += s.Skipped
		out.Time += s.Time
	}
	return out
}

// WriteJUnit writes j to path as indented XML with a declaration.
func WriteJUnit(path string, j JUnitSuites) error {
	b, err := xml.MarshalIndent(j, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding junit: %w", err)
	}
	out := append([]byte(xml.Header), b...)
	if err := atomicfile.WriteFile(path, append(out, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing junit: %w", err)
	}
	return nil
}
