package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/podsafe/podsafe/report"
)

func newReportCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "report DIR...",
		Short: "write report.html and junit.xml of a run, or the conformance report of a store",
		Long: `report regenerates the files people and CI read from what a run saved.

A run directory (one holding results.json and history.jsonl) gets report.html
and junit.xml rewritten. A store directory (one holding runs beneath it) gets
conformance.json, conformance.html and conformance-junit.xml: for every
guarantee, whether the runs covered it and whether it passed.`,
		Example: `  podsafe report store/latest
  podsafe report store`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			var errs []error
			for _, dir := range args {
				st, err := os.Stat(dir)
				if err != nil {
					errs = append(errs, fmt.Errorf("report %s: %w", dir, err))
					continue
				}
				if !st.IsDir() {
					errs = append(errs, fmt.Errorf("report %s: not a directory", dir))
					continue
				}
				if report.IsRunDir(dir) {
					if err := report.RenderDir(dir); err != nil {
						errs = append(errs, fmt.Errorf("report %s: %w", dir, err))
						continue
					}
					fmt.Fprintf(out, "wrote %s and %s\n", filepath.Join(dir, report.ReportFile), filepath.Join(dir, report.JUnitFile))
					continue
				}
				rep, err := report.ConformanceDir(dir)
				if err != nil {
					if errors.Is(err, report.ErrNoRuns) {
						err = fmt.Errorf("%s holds no run (no results.json or history.jsonl beneath it)", dir)
					}
					errs = append(errs, fmt.Errorf("report %s: %w", dir, err))
					continue
				}
				for _, p := range rep.Problems {
					fmt.Fprintf(out, "skipped %s: %s\n", p.Dir, p.Error)
				}
				t := rep.Totals
				fmt.Fprintf(out, "%d runs: %d of %d guarantees covered, %d passed, %d failed, %d undecided\n",
					t.Runs, t.Covered, t.Guarantees, t.Passed, t.Failed, t.Unknown)
				fmt.Fprintf(out, "wrote %s\n", filepath.Join(dir, report.ConformanceHTMLFile))
			}
			if len(errs) > 0 {
				return &exitError{code: exitUsage, err: errors.Join(errs...)}
			}
			return nil
		},
	}
}
