package report

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
)

//go:embed assets/conformance.html.tmpl
var conformanceTemplateText string

var conformanceTemplate = template.Must(template.New("conformance").Funcs(funcs).Parse(conformanceTemplateText))

// mutationSectionTemplate is the per-guarantee mutation kill rate beside
// "covered", a section of its own placed before the page's end of main.
var mutationSectionTemplate = template.Must(template.New("mutation").Parse(`<section id="mutation">
<h2>Mutation kill rate</h2>
<p>{{if .R.MutationSource}}From {{.R.MutationSource}}: of the mutants of the system under test that count against a guarantee, how many a checker caught in a run. A guarantee whose mutants all survived is not covered.{{else}}Not measured: no mutation.json was found (make mutation).{{end}}</p>
<table class="grid small">
<thead><tr><th>guarantee</th><th>covered</th><th>mutation kill rate</th><th>survived</th></tr></thead>
<tbody>
{{range .Rows}}<tr><td class="id">{{.ID}}</td><td>{{if .Covered}}yes{{else}}no{{end}}</td><td>{{.KillRate}}</td><td>{{with .Mutation}}{{.Survived}}{{end}}</td></tr>
{{end}}</tbody>
</table>
</section>
`))

type confRef struct {
	RunRef
	Link template.URL
}

type confRow struct {
	ConformanceRow
	FailedRefs  []confRef
	UnknownRefs []confRef
	PassedRuns  int
	// KillRate is the guarantee's mutation kill rate as printed.
	KillRate string
}

type confRun struct {
	ConformanceRun
	Link    template.URL
	Started string
}

type confPage struct {
	R        *ConformanceReport
	Rows     []confRow
	Runs     []confRun
	Families []familyTotal
	Verdict  string
}

type familyTotal struct {
	Family, Name                            string
	Total, Covered, Passed, Failed, Unknown int
}

// RenderConformance renders conformance.html; links to runs are relative to
// dir, where the page is written.
func RenderConformance(rep *ConformanceReport, dir string) ([]byte, error) {
	link := func(runDir string) template.URL { return runLink(dir, runDir) }
	refs := func(in []RunRef) []confRef {
		out := make([]confRef, len(in))
		for i, r := range in {
			out[i] = confRef{r, link(r.Dir)}
		}
		return out
	}
	p := confPage{R: rep, Verdict: "passed"}
	fams := map[string]*familyTotal{}
	var famOrder []string
	for _, row := range rep.Rows {
		p.Rows = append(p.Rows, confRow{ConformanceRow: row, FailedRefs: refs(row.Failed), UnknownRefs: refs(row.Unknown), PassedRuns: len(row.Passed), KillRate: MutationRate(row.Mutation)})
		f := fams[row.Family]
		if f == nil {
			f = &familyTotal{Family: row.Family, Name: Families[row.Family]}
			fams[row.Family] = f
			famOrder = append(famOrder, row.Family)
		}
		f.Total++
		if row.Covered {
			f.Covered++
		}
		switch row.Status {
		case StatusPassed:
			f.Passed++
		case StatusFailed:
			f.Failed++
		case StatusUnknown:
			f.Unknown++
		}
	}
	for _, f := range famOrder {
		p.Families = append(p.Families, *fams[f])
	}
	if rep.Totals.Failed > 0 {
		p.Verdict = "failed"
	} else if rep.Totals.Unknown > 0 || len(rep.Problems) > 0 {
		p.Verdict = "unknown"
	}
	for _, r := range rep.Runs {
		cr := confRun{ConformanceRun: r, Link: link(r.Dir)}
		if !r.Started.IsZero() {
			cr.Started = r.Started.UTC().Format("2006-01-02 15:04:05")
		}
		p.Runs = append(p.Runs, cr)
	}
	var buf bytes.Buffer
	if err := conformanceTemplate.Execute(&buf, p); err != nil {
		return nil, fmt.Errorf("rendering conformance: %w", err)
	}
	var sec bytes.Buffer
	if err := mutationSectionTemplate.Execute(&sec, p); err != nil {
		return nil, fmt.Errorf("rendering conformance: %w", err)
	}
	page := buf.Bytes()
	if i := bytes.LastIndex(page, []byte("</main>")); i >= 0 {
		return append(page[:i:i], append(sec.Bytes(), page[i:]...)...), nil
	}
	return append(page, sec.Bytes()...), nil
}
