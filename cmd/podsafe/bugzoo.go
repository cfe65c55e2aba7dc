package main

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/podsafe/podsafe/specs"
)

func newBugzooCmd() *cobra.Command {
	var (
		bugs       []string
		attempts   int
		budget     time.Duration
		cleanSeeds int
		storeDir   string
	)
	cmd := &cobra.Command{
		Use:   "bugzoo",
		Short: "plant each known bug in turn and report whether its checker caught it (needs a failpoint build: make bugzoo)",
		Long: `bugzoo runs, for every planted bug of the zoo (podsafe list shows them), a
scenario that can expose it with the bug switched on, and reports whether the
checker named for it said Illegal, after how many attempts and how much wall
time. Then it runs every zoo scenario with no bug for --clean-seeds seeds: each
must be valid. The report is printed as a table and written to
<store>/bugzoo/bugzoo.json. Exit 0 when every bug was caught and no clean run
found a violation, 1 otherwise.

Most bugs are failpoints (github.com/pingcap/failpoint): run them through
make bugzoo, which rewrites the markers into live code and restores the
sources afterwards.`,
		Example: `  make bugzoo
  podsafe bugzoo --bug stale-read --clean-seeds 0`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			dir := filepath.Join(storeDir, "bugzoo")
			rep, err := specs.RunZoo(cmd.Context(), specs.ZooOptions{
				StoreDir: dir, Bugs: bugs, Attempts: attempts, Budget: budget,
				CleanSeeds: cleanSeeds, Progress: cmd.ErrOrStderr(),
			})
			if rep == nil {
				return &exitError{code: exitUsage, err: err}
			}
			fmt.Fprintln(out)
			if werr := rep.WriteTable(out); werr != nil {
				return &exitError{code: exitCrashed, err: werr}
			}
			if werr := rep.WriteJSON(filepath.Join(dir, "bugzoo.json")); werr != nil {
				return &exitError{code: exitCrashed, err: werr}
			}
			fmt.Fprintf(out, "report: %s\n", filepath.Join(dir, "bugzoo.json"))
			if err != nil {
				return &exitError{code: exitCrashed, err: err}
			}
			if !rep.Ok() {
				return &exitError{code: exitInvalid, err: specs.ErrZooFailed}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&bugs, "bug", nil, "only these bugs (default: the whole zoo)")
	fl.IntVar(&attempts, "attempts", 3, "seeds a bug gets before it counts as missed")
	fl.DurationVar(&budget, "budget", 3*time.Minute, "wall-time budget of one bug, all attempts together")
	fl.IntVar(&cleanSeeds, "clean-seeds", 3, "seeds each zoo scenario runs with no bug (every run must be valid)")
	fl.StringVar(&storeDir, "store", "store", "directory for results (the zoo writes under <store>/bugzoo)")
	return cmd
}
