package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/podsafe/podsafe/internal/atomicfile"
	"github.com/podsafe/podsafe/report"
)

func newReportCmd() *cobra.Command {
	var (
		compare bool
		repro   bool
		catalog string
		outDir  string
		names   []string
	)
	cmd := &cobra.Command{
		Use:   "report DIR... | report --compare STORE_A STORE_B [--out DIR]",
		Short: "write report.html and junit.xml of a run, the conformance report of a store, or two stores side by side",
		Long: `report regenerates the files people and CI read from what a run saved.

A run directory (one holding results.json and history.jsonl, or
history.jsonl.gz) gets report.html and junit.xml rewritten. A store directory (one holding runs beneath it) gets
conformance.json, conformance.html and conformance-junit.xml: for every
guarantee, whether the runs covered it and whether it passed.

With --compare, report reads two stores (typically the embedded target's
conformance runs and the kube target's: make conformance, make
conformance-kube) without writing into them, and writes one side-by-side
report, conformance-compare.html and conformance-compare.json, into --out (the
current directory by default): per guarantee, its status on each side (passed,
failed, unknown when judged but undecided, not covered) with one line of
evidence, a mark where the two differ, and the number of differences at the
top. The sides are named after the target their runs were made on (each run
says: results.json or scenario.json, embedded when neither does), else after
their stores; --names renames them. The exit status is 0 whether or not they
differ.

With --repro, report reads a store of reproductions of upstream bugs (make
test-kube-issues, repro/*.yaml) and writes repro.md and repro.json into it:
per issue, Kubernetes release and kubelet pod list mode (the newest run of
each), whether a checker caught the bug, its evidence and how long into the
run the violation came. With --catalog (default repro/catalog.yaml when it
exists) it first writes the summary: per upstream issue its component, the
guarantees it breaks, the affected and fixed releases, and per scenario and
release the newest run's verdict, or why the bug cannot be reproduced here.
It prints both tables.`,
		Example: `  podsafe report store/latest
  podsafe report store
  podsafe report --compare store/conformance store/conformance-kube --out store/compare
  podsafe report --repro store/repro`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			if compare {
				return compareStores(cmd, args, outDir, names)
			}
			if repro {
				return reproTable(cmd, args, catalog)
			}
			if cmd.Flags().Changed("out") || cmd.Flags().Changed("names") {
				return &exitError{code: exitUsage, err: errors.New("--out and --names go with --compare (a run's or a store's report is written into it)")}
			}
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
	cmd.Flags().BoolVar(&compare, "compare", false, "compare the conformance of two stores side by side (exactly two directories)")
	cmd.Flags().BoolVar(&repro, "repro", false, "the table of a store of upstream bug reproductions (repro.md, repro.json)")
	cmd.Flags().StringVar(&catalog, "catalog", "", "with --repro: the reproduction catalog to summarize (default repro/catalog.yaml when it exists; \"none\" for the runs' table only)")
	cmd.Flags().StringVar(&outDir, "out", ".", "with --compare: the directory to write conformance-compare.html and .json into (created if missing)")
	cmd.Flags().StringSliceVar(&names, "names", nil, "with --compare: the two sides' names, as A,B (default: their runs' targets, else their stores)")
	return cmd
}

// compareStores is report --compare.
func compareStores(cmd *cobra.Command, args []string, outDir string, names []string) error {
	if len(args) != 2 {
		return &exitError{code: exitUsage, err: fmt.Errorf("--compare takes two stores, got %d (podsafe report --compare STORE_A STORE_B)", len(args))}
	}
	var n [2]string
	switch len(names) {
	case 0:
	case 2:
		n = [2]string{names[0], names[1]}
		if n[0] == "" || n[1] == "" || n[0] == n[1] {
			return &exitError{code: exitUsage, err: fmt.Errorf("--names %q: two different, non-empty names", strings.Join(names, ","))}
		}
	default:
		return &exitError{code: exitUsage, err: fmt.Errorf("--names takes two names, A,B; got %d", len(names))}
	}
	for _, dir := range args {
		st, err := os.Stat(dir)
		if err != nil {
			return &exitError{code: exitUsage, err: fmt.Errorf("report --compare %s: %w", dir, err)}
		}
		if !st.IsDir() {
			return &exitError{code: exitUsage, err: fmt.Errorf("report --compare %s: not a directory", dir)}
		}
	}
	c, err := report.CompareStores(args[0], args[1], n)
	if err != nil {
		if errors.Is(err, report.ErrNoRuns) {
			err = fmt.Errorf("%w (no results.json or history.jsonl beneath it)", err)
		}
		return &exitError{code: exitUsage, err: fmt.Errorf("report --compare: %w", err)}
	}
	if err := report.WriteComparison(outDir, c); err != nil {
		return &exitError{code: exitCrashed, err: err}
	}
	out := cmd.OutOrStdout()
	for _, s := range c.Sides {
		for _, p := range s.Problems {
			fmt.Fprintf(out, "skipped %s: %s\n", p.Dir, p.Error)
		}
		t := s.Totals
		fmt.Fprintf(out, "%s (%s, %d runs): %d of %d guarantees covered, %d passed, %d failed, %d undecided\n",
			s.Name, s.Store, t.Runs, t.Covered, t.Guarantees, t.Passed, t.Failed, t.Unknown)
	}
	fmt.Fprintf(out, "%d differences", c.Differences)
	if c.Differences > 0 {
		fmt.Fprintf(out, ": %s", strings.Join(c.Differing, ", "))
	}
	fmt.Fprintln(out)
	fmt.Fprintf(out, "wrote %s and %s\n", filepath.Join(outDir, report.CompareHTMLFile), filepath.Join(outDir, report.CompareJSONFile))
	return nil
}

// reproTable writes and prints the reproductions table of each store.
func reproTable(cmd *cobra.Command, stores []string, catalog string) error {
	var cat []report.ReproEntry
	switch catalog {
	case "none":
	case "":
		if _, err := os.Stat(filepath.Join("repro", "catalog.yaml")); err != nil {
			break
		}
		catalog = filepath.Join("repro", "catalog.yaml")
		fallthrough
	default:
		var err error
		if cat, err = report.LoadReproCatalog(catalog); err != nil {
			return &exitError{code: exitUsage, err: fmt.Errorf("report --repro --catalog %s: %w", catalog, err)}
		}
	}
	for _, store := range stores {
		rows, err := report.ReproRows(store)
		if err != nil {
			return &exitError{code: exitUsage, err: fmt.Errorf("report --repro %s: %w", store, err)}
		}
		if len(rows) == 0 {
			return &exitError{code: exitUsage, err: fmt.Errorf("report --repro %s: no reproduction run beneath it (make test-kube-issues)", store)}
		}
		md := report.ReproMarkdown(rows)
		if cat != nil {
			md = report.ReproSummaryMarkdown(cat, rows) + "\n" + md
		}
		b, err := json.MarshalIndent(struct {
			Catalog []report.ReproEntry `json:"catalog,omitempty"`
			Runs    []report.ReproRow   `json:"runs"`
		}{cat, rows}, "", "  ")
		if err != nil {
			return err
		}
		if err := atomicfile.WriteFile(filepath.Join(store, "repro.md"), []byte(md), 0o644); err != nil {
			return &exitError{code: exitCrashed, err: err}
		}
		if err := atomicfile.WriteFile(filepath.Join(store, "repro.json"), b, 0o644); err != nil {
			return &exitError{code: exitCrashed, err: err}
		}
		fmt.Fprint(cmd.OutOrStdout(), md)
	}
	return nil
}
