package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/podsafe/podsafe/mutation"
	"github.com/podsafe/podsafe/report"
)

// errBelowThreshold means a mutation run's kill rates are under the floors
// asked for.
var errBelowThreshold = errors.New("mutation kill rate below the threshold")

type mutationFlags struct {
	packages      []string
	commit        string
	perPackage    int
	perGuarantee  int
	seed          uint64
	gremlins      string
	store         string
	unitTimeout   time.Duration
	runTimeout    time.Duration
	survivorsOnly bool
	minKill       float64
	minChecker    float64
}

func newMutationCmd() *cobra.Command {
	f := &mutationFlags{}
	cmd := &cobra.Command{
		Use:   "mutation",
		Short: "mutate the system under test and report which mutants podsafe's runs catch (make mutation)",
		Long: `mutation lists the mutants of the system-under-test packages with gremlins
(a dry run of the pinned release), draws --per-package of each package's
mutants with --seed, and for each: applies it through the go command's -overlay
(the tree is never written), runs the package's unit tests, builds podsafe with
it and runs the package's runs: the bug zoo's scenarios for the package (with
no bug planted), then the conformance suite's runs of its guarantees.
A run that says Illegal kills the mutant and names the guarantees it broke; a
run that crashes, times out or cannot be judged kills it "by crash". Equivalent
mutants (mutation/equivalent.yaml) are listed apart; survivors count against the
guarantees their code implements (mutation/guarantees.yaml).

It writes mutation.json and mutation.md into <store>/<timestamp>/ and points
<store>/latest at it; the conformance report (podsafe report) reads the latest
for its per-guarantee kill rate. Exit 1 when a rate is below --min-kill-rate or
--min-checker-rate.`,
		Example: `  make mutation
  podsafe mutation --gremlins ~/.cache/podsafe/gremlins-v0.6.0/gremlins --packages ./cluster/storage --per-package 6`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runMutation(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&f.packages, "packages", nil, "packages to mutate, comma separated (default: raftstore, apiserver, kubelet, scheduler, controller, fencing, cluster/storage)")
	fl.StringVar(&f.commit, "commit", "", "measure this commit's tree (HEAD, a hash) rather than the working tree; either way the run works on a copy, so later edits do not reach it")
	fl.IntVar(&f.perPackage, "per-package", 5, "mutants drawn from each package")
	fl.IntVar(&f.perGuarantee, "per-guarantee", 0, "then draw more mutants until each guarantee the packages' code implements has this many (0: none)")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of the draw")
	fl.StringVar(&f.gremlins, "gremlins", "", "the gremlins binary, release "+mutation.GremlinsVersion+" (make mutation installs it)")
	fl.StringVar(&f.store, "store", filepath.Join("store", "mutation"), "directory for the results")
	fl.DurationVar(&f.unitTimeout, "unit-timeout", 5*time.Minute, "bound on one run of a package's unit tests")
	fl.DurationVar(&f.runTimeout, "run-timeout", 4*time.Minute, "bound on one scenario run")
	fl.BoolVar(&f.survivorsOnly, "unit-survivors-only", false, "run the scenarios only for mutants the unit tests did not kill (faster; a checker's catch is then not measured for the others)")
	fl.Float64Var(&f.minKill, "min-kill-rate", 0, "fail (exit 1) when fewer than this percentage of viable sampled mutants are killed")
	fl.Float64Var(&f.minChecker, "min-checker-rate", 0, "fail (exit 1) when fewer than this percentage of viable sampled mutants are killed by a checker over a run")
	return cmd
}

func runMutation(cmd *cobra.Command, f *mutationFlags) error {
	if f.perPackage < 1 {
		return &exitError{code: exitUsage, err: fmt.Errorf("--per-package must be at least 1, got %d", f.perPackage)}
	}
	if f.perGuarantee < 0 {
		return &exitError{code: exitUsage, err: fmt.Errorf("--per-guarantee must be 0 (none) or more, got %d", f.perGuarantee)}
	}
	for _, r := range []struct {
		name string
		v    float64
	}{{"--min-kill-rate", f.minKill}, {"--min-checker-rate", f.minChecker}} {
		if r.v < 0 || r.v > 100 {
			return &exitError{code: exitUsage, err: fmt.Errorf("%s is a percentage from 0 to 100, got %g", r.name, r.v)}
		}
	}
	if f.gremlins == "" {
		return &exitError{code: exitUsage, err: fmt.Errorf("--gremlins is required: the gremlins %s binary (make mutation installs and passes it)", mutation.GremlinsVersion)}
	}
	// make passes MUTATION_PKGS as one argument, perhaps space separated.
	var pkgs []string
	for _, p := range f.packages {
		pkgs = append(pkgs, strings.Fields(p)...)
	}
	f.packages = pkgs
	for _, p := range f.packages {
		if _, err := mutation.NormalizePackage(p); err != nil {
			return &exitError{code: exitUsage, err: fmt.Errorf("--packages: %w", err)}
		}
	}
	res, dir, err := mutation.Run(cmd.Context(), mutation.Config{
		Packages: f.packages, Commit: f.commit, PerPackage: f.perPackage, PerGuarantee: f.perGuarantee, Seed: f.seed, Gremlins: f.gremlins, Store: f.store,
		UnitTimeout: f.unitTimeout, RunTimeout: f.runTimeout, UnitSurvivorsOnly: f.survivorsOnly,
		Progress: cmd.ErrOrStderr(),
	})
	if err != nil {
		code := exitCrashed
		if errors.Is(err, mutation.ErrConfig) {
			code = exitUsage
		}
		return &exitError{code: code, err: err}
	}
	out := cmd.OutOrStdout()
	if err := mutation.WriteMarkdown(out, res); err != nil {
		return &exitError{code: exitCrashed, err: err}
	}
	fmt.Fprintf(out, "\nwrote %s and %s\n", filepath.Join(dir, report.MutationFile), filepath.Join(dir, mutation.MarkdownFile))
	kill, checker := mutation.Rates(res)
	if kill < f.minKill || checker < f.minChecker {
		return &exitError{code: exitInvalid, err: fmt.Errorf("%w: killed %.0f%% (floor %.0f%%), by a checker %.0f%% (floor %.0f%%)", errBelowThreshold, kill, f.minKill, checker, f.minChecker)}
	}
	return nil
}
