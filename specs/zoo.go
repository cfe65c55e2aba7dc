package specs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/podsafe/podsafe/checker"
	"github.com/podsafe/podsafe/internal/atomicfile"
	"github.com/podsafe/podsafe/nemesis"
)

// ZooOptions tune RunZoo.
type ZooOptions struct {
	// StoreDir is where the runs are written (default "store/bugzoo").
	StoreDir string
	// Bugs restricts the zoo to these bugs (default: every bug of Zoo).
	Bugs []string
	// Attempts is how many seeds a bug gets before it counts as missed
	// (default 3): a bug whose window is a race may need a second schedule.
	// The first attempt uses the bug's scenario seed, the next ones the
	// following seeds.
	Attempts int
	// Budget bounds the wall time spent on one bug, all attempts together
	// (default 3 minutes); when it is spent the bug counts as missed.
	Budget time.Duration
	// CleanSeeds is how many seeds each distinct zoo scenario runs without
	// any bug; every one of them must find no violation. Zero runs no clean
	// matrix.
	CleanSeeds int
	// Progress receives one line per run (nil: none).
	Progress io.Writer
}

// ZooCatch is the outcome of hunting one planted bug.
type ZooCatch struct {
	Bug        string   `json:"bug"`
	Guarantees []string `json:"guarantees"`
	// Checker is the checker that must catch the bug.
	Checker string `json:"checker"`
	// Caught reports that Checker said Illegal in one of the attempts.
	Caught bool `json:"caught"`
	// CaughtBy lists every checker that said Illegal in the catching run
	// (or the last run when missed).
	CaughtBy []string `json:"caught_by,omitempty"`
	// Attempts is the number of runs made.
	Attempts int    `json:"attempts"`
	Seed     uint64 `json:"seed"`
	// TimeToDetect is the wall time from the start of the first attempt to
	// the verdict that caught the bug (runs, checks and retries included).
	TimeToDetect time.Duration `json:"time_to_detect_ns"`
	// RunTime is the wall time of the catching run alone.
	RunTime time.Duration `json:"run_time_ns"`
	// Dir is the catching (or last) run's directory.
	Dir   string `json:"dir"`
	Error string `json:"error,omitempty"`
}

// ZooClean is one run of a zoo scenario with no bug planted.
type ZooClean struct {
	Scenario string          `json:"scenario"`
	Seed     uint64          `json:"seed"`
	Verdict  checker.Verdict `json:"verdict"`
	// Illegal lists the checkers that said Illegal: each is a false
	// positive (or a real bug of podsafe's system).
	Illegal []string      `json:"illegal,omitempty"`
	Dir     string        `json:"dir"`
	RunTime time.Duration `json:"run_time_ns"`
	Error   string        `json:"error,omitempty"`
}

// ZooReport is what RunZoo found.
type ZooReport struct {
	Catches []ZooCatch `json:"catches"`
	Clean   []ZooClean `json:"clean,omitempty"`
	// Missed counts bugs not caught by their checker; FalsePositives
	// counts clean runs with an Illegal verdict.
	Missed         int `json:"missed"`
	FalsePositives int `json:"false_positives"`
}

// Ok reports that every bug was caught and no clean run found a violation.
func (r *ZooReport) Ok() bool { return r.Missed == 0 && r.FalsePositives == 0 }

// RunZoo plants each bug of the zoo in turn, runs its scenario and reports
// whether its checker caught it and how long that took; then it runs the
// zoo's scenarios with no bug for opts.CleanSeeds seeds each, every one of
// which must be valid. Failpoint bugs need a failpoint build; in an ordinary
// build RunZoo refuses them with an error before running anything.
func RunZoo(ctx context.Context, opts ZooOptions) (*ZooReport, error) {
	if opts.StoreDir == "" {
		opts.StoreDir = filepath.Join("store", "bugzoo")
	}
	if opts.Attempts <= 0 {
		opts.Attempts = 3
	}
	if opts.Budget <= 0 {
		opts.Budget = 3 * time.Minute
	}
	bugs := Zoo()
	if len(opts.Bugs) > 0 {
		bugs = bugs[:0:0]
		for _, name := range opts.Bugs {
			b, ok := LookupBug(name)
			if !ok {
				return nil, fmt.Errorf("%w: bug %q is not in the zoo; choose one of %s", ErrInvalidScenario, name, keys(Bugs))
			}
			bugs = append(bugs, b)
		}
	}
	for _, b := range bugs {
		if b.Failpoint != "" && !nemesis.FailpointsCompiled() {
			return nil, fmt.Errorf("bug %s is a failpoint and this build's failpoints are inert: run it with make bugzoo (or bin/podsafe-failpoints from make build-failpoints)", b.Name)
		}
	}
	rep := &ZooReport{}
	for _, b := range bugs {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		c := huntBug(ctx, b, opts)
		if !c.Caught {
			rep.Missed++
		}
		rep.Catches = append(rep.Catches, c)
	}
	if opts.CleanSeeds > 0 {
		for _, s := range cleanScenarios(bugs) {
			for i := range opts.CleanSeeds {
				if err := ctx.Err(); err != nil {
					return rep, err
				}
				s.Seed = uint64(1000 + i)
				cl := runClean(ctx, s, opts)
				if len(cl.Illegal) > 0 {
					rep.FalsePositives++
				}
				rep.Clean = append(rep.Clean, cl)
			}
		}
	}
	return rep, nil
}

// huntBug runs b's scenario with b planted until its checker says Illegal,
// the attempts run out or the budget is spent.
func huntBug(ctx context.Context, b Bug, opts ZooOptions) ZooCatch {
	c := ZooCatch{Bug: b.Name, Guarantees: b.Guarantees, Checker: b.Checker}
	start := time.Now()
	for attempt := range opts.Attempts {
		if attempt > 0 && time.Since(start) >= opts.Budget {
			break
		}
		s := b.Scenario
		s.Name = "bugzoo-" + b.Name
		s.Bugs = append(slices.Clone(s.Bugs), b.Name)
		if s.Seed == 0 {
			s.Seed = 1
		}
		s.Seed += uint64(attempt)
		runStart := time.Now()
		out, err := Run(ctx, s, RunOptions{StoreDir: opts.StoreDir})
		c.Attempts++
		c.Seed = s.Seed
		c.RunTime = time.Since(runStart)
		if out != nil {
			c.Dir = out.Dir
			c.CaughtBy = illegalCheckers(out.Results.Checks)
		}
		if err != nil {
			c.Error = err.Error()
		}
		c.Caught = slices.Contains(c.CaughtBy, b.Checker)
		zooProgress(opts.Progress, "bug %-40s seed %-4d %-7s %s", b.Name, s.Seed, caughtWord(c.Caught), strings.Join(c.CaughtBy, ","))
		if c.Caught {
			c.TimeToDetect = time.Since(start)
			c.Error = ""
			return c
		}
		if ctx.Err() != nil {
			break
		}
	}
	return c
}

func caughtWord(caught bool) string {
	if caught {
		return "CAUGHT"
	}
	return "missed"
}

// cleanScenarios returns the distinct scenarios of bugs with no bug
// planted, in zoo order.
func cleanScenarios(bugs []Bug) []Scenario {
	seen := map[string]bool{}
	var out []Scenario
	for _, b := range bugs {
		s := b.Scenario
		s.Bugs = nil
		s.Seed = 0
		s.Name = ""
		key, _ := json.Marshal(s)
		if seen[string(key)] {
			continue
		}
		seen[string(key)] = true
		s.Name = "bugzoo-clean-" + b.Name
		out = append(out, s)
	}
	return out
}

func runClean(ctx context.Context, s Scenario, opts ZooOptions) ZooClean {
	start := time.Now()
	out, err := Run(ctx, s, RunOptions{StoreDir: opts.StoreDir})
	cl := ZooClean{Scenario: s.Name, Seed: s.Seed, RunTime: time.Since(start)}
	if out != nil {
		cl.Dir = out.Dir
		cl.Verdict = out.Results.Verdict
		cl.Illegal = illegalCheckers(out.Results.Checks)
	}
	if err != nil {
		cl.Error = err.Error()
	}
	zooProgress(opts.Progress, "clean %-38s seed %-4d %s %s", s.Name, s.Seed, cl.Verdict, strings.Join(cl.Illegal, ","))
	return cl
}

func illegalCheckers(results []checker.Result) []string {
	var out []string
	for _, r := range results {
		if r.Verdict == checker.Illegal {
			out = append(out, r.Checker)
		}
	}
	sort.Strings(out)
	return out
}

func zooProgress(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
}

// WriteTable prints the zoo's report as a table: one row per bug (caught or
// missed, by which checker, attempts, time to detect), then the clean
// matrix's totals.
func (r *ZooReport) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BUG\tBREAKS\tMUST CATCH\tRESULT\tCAUGHT BY\tATTEMPTS\tTIME TO DETECT\tRUN")
	for _, c := range r.Catches {
		res := caughtWord(c.Caught)
		if c.Error != "" && !c.Caught {
			res += " (" + firstLine(c.Error) + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", c.Bug, strings.Join(c.Guarantees, ","), c.Checker, res,
			orDash(strings.Join(c.CaughtBy, ",")), c.Attempts, durationOrDash(c.Caught, c.TimeToDetect), c.RunTime.Round(100*time.Millisecond))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	caught := len(r.Catches) - r.Missed
	fmt.Fprintf(w, "\n%d of %d planted bugs caught", caught, len(r.Catches))
	if len(r.Clean) > 0 {
		fmt.Fprintf(w, "; %d clean runs, %d false positives", len(r.Clean), r.FalsePositives)
		for _, cl := range r.Clean {
			if len(cl.Illegal) > 0 {
				fmt.Fprintf(w, "\n  false positive: %s seed %d: %s (%s)", cl.Scenario, cl.Seed, strings.Join(cl.Illegal, ","), cl.Dir)
			}
		}
	}
	fmt.Fprintln(w)
	return nil
}

// WriteJSON writes the report to path as JSON.
func (r *ZooReport) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(b, '\n'), 0o644)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func durationOrDash(ok bool, d time.Duration) string {
	if !ok {
		return "-"
	}
	return d.Round(100 * time.Millisecond).String()
}

// ErrZooFailed is returned by callers that gate on the zoo (make bugzoo)
// when a bug was missed or a clean run found a violation.
var ErrZooFailed = errors.New("bug zoo failed")
