package report

import (
	"sort"

	"github.com/podsafe/podsafe/checker"
)

// NotJudged is the verdict text of a guarantee no check of a run judged.
const NotJudged = "not judged by this run"

// GuaranteeRow is one line of a run's guarantee table.
type GuaranteeRow struct {
	Guarantee
	// Judged reports that at least one check of the run lists the
	// guarantee. When false, Verdict is empty.
	Judged bool `json:"judged"`
	// Verdict merges the verdicts of the checks that judged the guarantee:
	// Illegal wins, then Unknown, then Ok.
	Verdict checker.Verdict `json:"verdict,omitempty"`
	// Checkers name the checks that judged it, in the order of the results.
	Checkers []string `json:"checkers,omitempty"`
	// Summaries are the summaries of the checks whose verdict is the row's
	// verdict (the ones that decided it).
	Summaries []string `json:"summaries,omitempty"`
	// Known is false for an ID a checker named that is not in the
	// catalogue.
	Known bool `json:"known"`
}

// VerdictText is the verdict as printed: the verdict, or NotJudged.
func (g GuaranteeRow) VerdictText() string {
	if !g.Judged {
		return NotJudged
	}
	return string(g.Verdict)
}

// GuaranteeTable is the per-run guarantee table of r: one row for every
// guarantee of the catalogue, in catalogue order, followed by one row for
// each ID a check named that the catalogue lacks.
func GuaranteeTable(r *Results) []GuaranteeRow {
	type acc struct {
		verdicts []checker.Verdict
		checks   []int
	}
	by := map[string]*acc{}
	for i, c := range r.Checks {
		seen := map[string]bool{}
		for _, id := range c.Guarantees {
			if seen[id] {
				continue
			}
			seen[id] = true
			a := by[id]
			if a == nil {
				a = &acc{}
				by[id] = a
			}
			a.verdicts = append(a.verdicts, c.Verdict)
			a.checks = append(a.checks, i)
		}
	}
	row := func(g Guarantee, known bool) GuaranteeRow {
		gr := GuaranteeRow{Guarantee: g, Known: known}
		a := by[g.ID]
		if a == nil {
			return gr
		}
		gr.Judged = true
		gr.Verdict = checker.MergeVerdicts(a.verdicts...)
		for _, i := range a.checks {
			c := r.Checks[i]
			gr.Checkers = append(gr.Checkers, c.Checker)
			if normVerdict(c.Verdict) == gr.Verdict && c.Summary != "" {
				gr.Summaries = append(gr.Summaries, c.Summary)
			}
		}
		return gr
	}
	rows := make([]GuaranteeRow, 0, len(catalogue)+len(by))
	for _, g := range catalogue {
		rows = append(rows, row(g, true))
	}
	var extra []string
	for id := range by {
		if _, ok := catalogueIndex[id]; !ok {
			extra = append(extra, id)
		}
	}
	sort.Strings(extra)
	sortIDs(extra)
	for _, id := range extra {
		g, _ := LookupGuarantee(id)
		rows = append(rows, row(g, false))
	}
	return rows
}

// normVerdict maps anything that is not Ok or Illegal to Unknown, as
// MergeVerdicts does.
func normVerdict(v checker.Verdict) checker.Verdict {
	switch v {
	case checker.Ok, checker.Illegal:
		return v
	}
	return checker.Unknown
}

// JudgedRows returns the rows of table that a check judged.
func JudgedRows(table []GuaranteeRow) []GuaranteeRow {
	var out []GuaranteeRow
	for _, r := range table {
		if r.Judged {
			out = append(out, r)
		}
	}
	return out
}
