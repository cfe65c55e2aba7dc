package specs

// Checking a saved run directory: its history loaded and judged again.

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/podsafe/podsafe/checker"
	"github.com/podsafe/podsafe/history"
	"github.com/podsafe/podsafe/report"
)

// CheckDir loads the history in dir (complete or left by a crashed run), runs
// the checkers and writes linearizability.html there. It does not write
// results.json; `podsafe check` and Run do.
func CheckDir(ctx context.Context, dir string, timeout time.Duration) (*report.Results, error) {
	res, _, err := CheckDirHistory(ctx, dir, timeout)
	return res, err
}

// CheckDirHistory is CheckDir, also returning the loaded history, so that a
// caller writing the report does not load it again.
func CheckDirHistory(ctx context.Context, dir string, timeout time.Duration) (*report.Results, *history.History, error) {
	h, err := history.Load(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		return nil, nil, fmt.Errorf("loading history: %w", err)
	}
	results := checker.Check(ctx, h, checker.Options{
		Timeout:           timeout,
		VisualizationPath: filepath.Join(dir, "linearizability.html"),
		Workload:          h.Meta.Extra[history.ExtraWorkload],
		Checkers:          splitList(h.Meta.Extra[history.ExtraCheckers]),
	})
	verdict := checker.Merge(results)
	if len(results) == 0 || !h.Complete {
		// Nothing was checked, or the run was killed before it finished:
		// neither is evidence of validity. A violation found in what was
		// recorded still stands.
		verdict = checker.MergeVerdicts(verdict, checker.Unknown)
	}
	res := &report.Results{
		Snapshots:   report.CountSnapshots(h),
		Scenario:    h.Meta.Scenario,
		Seed:        h.Meta.Seed,
		Dir:         dir,
		Checks:      results,
		Verdict:     verdict,
		Truncated:   h.Truncated,
		Incomplete:  !h.Complete,
		Interrupted: h.Closing.Interrupted,
		Error:       h.Closing.Error,
	}
	// The counts come from the history, not from the run's memory, so a
	// re-check of a killed run counts what it did.
	for _, op := range h.Ops {
		switch op.Status {
		case history.StatusOK:
			res.Ops.OK++
		case history.StatusFail:
			res.Ops.Fail++
		default:
			res.Ops.Unknown++
		}
	}
	return res, h, nil
}
