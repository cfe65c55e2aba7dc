package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/podsafe/podsafe/history"
	"github.com/podsafe/podsafe/report"
	"github.com/podsafe/podsafe/specs"
)

func newCheckCmd() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "check DIR",
		Short: "check a saved history again (a finished run or one left by a crash)",
		Long: `check loads DIR/history.jsonl, runs every checker on it again and rewrites
results.json, report.html and junit.xml in DIR. A finished run's history is
compressed, DIR/history.jsonl.gz, and is read as well; when both are there
(a compression cut short) the plain one is read. A history whose last line
was torn by a crash is checked up to that line.

Exit codes: 0 valid, 1 invalid, 2 unknown (as podsafe test); 3 the check
itself broke; 64 DIR holds no history; 65 the history is corrupt (a line that
is not an event, or that contradicts earlier lines, or a compressed history
that is truncated or damaged) or empty: the error names the file and the
line.`,
		Example: `  podsafe check store/latest
  podsafe check store/register-partition/20261122T101500.000Z-seed42`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			if _, err := os.Stat(history.Locate(filepath.Join(dir, report.HistoryFile))); err != nil {
				return &exitError{code: exitUsage, err: fmt.Errorf("%s holds no history.jsonl (nor history.jsonl.gz): %w", dir, err)}
			}
			res, h, err := specs.CheckDirHistory(cmd.Context(), dir, timeout)
			var corrupt *history.CorruptError
			switch {
			case errors.As(err, &corrupt), errors.Is(err, history.ErrEmpty):
				return &exitError{code: exitCorrupt, err: err}
			case err != nil:
				return &exitError{code: exitCrashed, err: err}
			}
			if prev, err := report.ReadResults(dir); err == nil {
				// The op counts stay the history's own: a killed run's
				// results.json, if any, counted less than the history holds.
				res.Started, res.Finished, res.Rerun, res.Target = prev.Started, prev.Finished, prev.Rerun, prev.Target
				if prev.Error != "" {
					res.Error = prev.Error
				}
			}
			if err := report.WriteResults(dir, *res); err != nil {
				return &exitError{code: exitCrashed, err: err}
			}
			if err := report.WriteRun(dir, h, res); err != nil {
				return &exitError{code: exitCrashed, err: fmt.Errorf("writing the report: %w", err)}
			}
			out := cmd.OutOrStdout()
			if res.Truncated {
				fmt.Fprintln(out, "the history ends mid-line (the run crashed); checked what was complete")
			}
			if res.Incomplete {
				fmt.Fprintln(out, "incomplete run: the history has no closing record (the run was killed before it finished); checked what it recorded, and the verdict is at best unknown")
			}
			for _, r := range res.Checks {
				fmt.Fprintf(out, "  %-9s %-28s %s\n", r.Verdict, r.Checker, r.Summary)
			}
			fmt.Fprintf(out, "ops: ok %d, fail %d, unknown %d (counted from the history)\n", res.Ops.OK, res.Ops.Fail, res.Ops.Unknown)
			if sn := res.Snapshots; sn != nil {
				fmt.Fprintf(out, "raft: %s\n", sn)
			}
			fmt.Fprintf(out, "verdict: %s (results.json, report.html and junit.xml rewritten in %s)\n", res.Label(), dir)
			if code := verdictCode(res.Verdict); code != exitValid {
				return &exitError{code: code}
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", time.Minute, "time budget of each checker; past it the verdict is unknown")
	return cmd
}
