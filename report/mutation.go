package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// MutationFile is the name of a mutation run's results (make mutation,
// podsafe mutation).
const MutationFile = "mutation.json"

// MutationEnv names a mutation.json (or a directory holding one) for the
// conformance report; unset, the report looks for the newest mutation run
// beside the runs (see FindMutation).
const MutationEnv = "PODSAFE_MUTATION"

// The outcomes of a mutant (MutantResult.Status).
const (
	// MutantKilledByChecker: a run over the mutated system said Illegal.
	MutantKilledByChecker = "killed by checker"
	// MutantKilledByCrash: no run said Illegal, but a run crashed, timed
	// out or could not be judged (Unknown) while the unmutated system's
	// run of the same scenario was judged; not a checker's catch.
	MutantKilledByCrash = "killed by crash"
	// MutantKilledByUnit: only the package's unit tests failed.
	MutantKilledByUnit = "killed by unit tests"
	// MutantSurvived: nothing noticed the mutant.
	MutantSurvived = "survived"
	// MutantNotViable: the mutated package does not compile.
	MutantNotViable = "not viable"
	// MutantNotRun: its build timed out; it is left out of the rates.
	MutantNotRun = "not run"
	// MutantEquivalent: listed as equivalent (the mutated program behaves
	// as the original); never run, not counted in the rates.
	MutantEquivalent = "equivalent"
)

// MutationResults is what one mutation run found: every sampled mutant of
// the system-under-test packages, what killed it, and the kill rate per
// guarantee. It is the format of mutation.json.
type MutationResults struct {
	Generated time.Time `json:"generated"`
	// Tool is the mutant enumerator and its version ("gremlins v0.6.0").
	Tool string `json:"tool"`
	// Seed, PerPackage and PerGuarantee drew the sample (see the mutation
	// package): PerPackage mutants of each package, then more until each
	// guarantee has PerGuarantee (0: no top-up).
	Seed         uint64 `json:"seed"`
	PerPackage   int    `json:"per_package"`
	PerGuarantee int    `json:"per_guarantee,omitempty"`
	// Commit is the commit measured; empty: the working tree.
	Commit string `json:"commit,omitempty"`
	// Mutators are the mutator types enumerated.
	Mutators []string            `json:"mutators"`
	Packages []MutationPackage   `json:"packages"`
	Mutants  []MutantResult      `json:"mutants"`
	ByID     []MutationGuarantee `json:"guarantees"`
	// Baselines are the unmutated system's runs of each scenario used; a
	// scenario whose baseline was not Ok is not used (Warnings say so).
	Baselines []MutantRun `json:"baselines,omitempty"`
	Warnings  []string    `json:"warnings,omitempty"`
	Elapsed   float64     `json:"elapsed_seconds"`
}

// MutationPackage counts one package's mutants. Total is every mutant the
// tool found in the package; the other counts are of the sample (Sampled)
// and of the listed equivalent mutants.
type MutationPackage struct {
	Package   string `json:"package"`
	Total     int    `json:"total"`
	Sampled   int    `json:"sampled"`
	NotViable int    `json:"not_viable"`
	// NotRun counts sampled mutants whose build timed out.
	NotRun int `json:"not_run,omitempty"`
	// Equivalent counts the listed equivalent mutants among Total; they
	// are not sampled.
	Equivalent int `json:"equivalent"`
	// KilledByUnit counts mutants the unit tests killed, whether or not a
	// run killed them too; KilledByChecker those a run said Illegal of;
	// KilledByCrash those only a crashed or timed-out run noticed.
	KilledByUnit    int `json:"killed_by_unit"`
	KilledByChecker int `json:"killed_by_checker"`
	KilledByCrash   int `json:"killed_by_crash"`
	Survived        int `json:"survived"`
	// Scenarios are the runs each mutant of the package gets.
	Scenarios []string `json:"scenarios"`
}

// Viable is the number of sampled mutants that compiled and were run.
func (p MutationPackage) Viable() int { return p.Sampled - p.NotViable - p.NotRun }

// MutantResult is one mutant and what became of it.
type MutantResult struct {
	// ID is stable for a tree: package-relative file:line:column:mutator.
	ID      string `json:"id"`
	Package string `json:"package"`
	// File is relative to the module root.
	File   string `json:"file"`
	Line   int    `json:"line"`
	Column int    `json:"column"`
	// Func is the enclosing function ("Server.Write", "attach"), or "" at
	// package level.
	Func        string `json:"func,omitempty"`
	Mutator     string `json:"mutator"`
	Original    string `json:"original"`
	Replacement string `json:"replacement"`
	// Source is the original line, trimmed.
	Source string `json:"source"`
	// CoveredByUnit is the tool's verdict on whether the package's unit
	// tests execute the line.
	CoveredByUnit bool   `json:"covered_by_unit"`
	Status        string `json:"status"`
	KilledByUnit  bool   `json:"killed_by_unit,omitempty"`
	// Guarantees are the IDs the mutant counts against: those its code is
	// mapped to and those a run found broken.
	Guarantees []string `json:"guarantees,omitempty"`
	// Broke are the IDs of the checkers that said Illegal.
	Broke []string    `json:"broke,omitempty"`
	Runs  []MutantRun `json:"runs,omitempty"`
	// Reason is why a mutant is equivalent, or the compiler's complaint
	// about a mutant that is not viable.
	Reason  string  `json:"reason,omitempty"`
	Seconds float64 `json:"seconds,omitempty"`
}

// Killed reports that something killed the mutant.
func (m MutantResult) Killed() bool {
	switch m.Status {
	case MutantKilledByChecker, MutantKilledByCrash, MutantKilledByUnit:
		return true
	}
	return false
}

// MutantRun is one scenario run over a mutated (or, for a baseline, the
// unmutated) system.
type MutantRun struct {
	Scenario string `json:"scenario"`
	// Verdict is the run's verdict, or "crashed" / "timed out".
	Verdict string `json:"verdict"`
	// Illegal names the checkers that said Illegal, Guarantees their IDs.
	Illegal    []string `json:"illegal,omitempty"`
	Guarantees []string `json:"guarantees,omitempty"`
	Error      string   `json:"error,omitempty"`
	Seconds    float64  `json:"seconds"`
}

// MutationGuarantee is the mutation kill rate of one guarantee: of the
// mutants attributed to it, how many a run caught.
type MutationGuarantee struct {
	ID         string `json:"id"`
	Attributed int    `json:"attributed"`
	// KilledByRun counts the attributed mutants a checker caught in a run;
	// Survived those nothing killed; the rest were killed by unit tests or
	// crashes only.
	KilledByRun int `json:"killed_by_run"`
	Survived    int `json:"survived"`
	// Mutants are the IDs of the attributed mutants.
	Mutants []string `json:"mutants,omitempty"`
}

// KillRate is KilledByRun over Attributed as a percentage; ok is false
// when no mutant is attributed (nothing measured).
func (g MutationGuarantee) KillRate() (pct float64, ok bool) {
	if g.Attributed == 0 {
		return 0, false
	}
	return 100 * float64(g.KilledByRun) / float64(g.Attributed), true
}

// MutationRate is how reports print a guarantee's kill rate: "3/4 (75%)",
// or "not measured" when g is nil or has no attributed mutant.
func MutationRate(g *MutationGuarantee) string {
	if g == nil {
		return "not measured"
	}
	pct, ok := g.KillRate()
	if !ok {
		return "not measured"
	}
	return fmt.Sprintf("%d/%d (%.0f%%)", g.KilledByRun, g.Attributed, pct)
}

// Guarantees computes ByID from Mutants: every mutant that was run (not
// equivalent, viable) counts against each of its Guarantees.
func (r *MutationResults) Guarantees() {
	by := map[string]*MutationGuarantee{}
	for _, m := range r.Mutants {
		if m.Status == MutantEquivalent || m.Status == MutantNotViable || m.Status == MutantNotRun {
			continue
		}
		for _, id := range m.Guarantees {
			g := by[id]
			if g == nil {
				g = &MutationGuarantee{ID: id}
				by[id] = g
			}
			g.Attributed++
			g.Mutants = append(g.Mutants, m.ID)
			switch m.Status {
			case MutantKilledByChecker:
				g.KilledByRun++
			case MutantSurvived:
				g.Survived++
			}
		}
	}
	r.ByID = r.ByID[:0]
	for _, g := range by {
		r.ByID = append(r.ByID, *g)
	}
	sort.Slice(r.ByID, func(i, j int) bool { return r.ByID[i].ID < r.ByID[j].ID })
}

// Guarantee returns the kill rate of id, or nil when no mutant counts
// against it.
func (r *MutationResults) Guarantee(id string) *MutationGuarantee {
	if r == nil {
		return nil
	}
	for i := range r.ByID {
		if r.ByID[i].ID == id {
			return &r.ByID[i]
		}
	}
	return nil
}

// ErrNoMutation means no mutation.json was found.
var ErrNoMutation = errors.New("no mutation.json")

// LoadMutation reads a mutation.json: path is the file, or a directory
// holding it (a mutation run's directory, or a mutation store whose latest
// link names one).
func LoadMutation(path string) (*MutationResults, string, error) {
	candidates := []string{path}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		candidates = []string{filepath.Join(path, MutationFile), filepath.Join(path, "latest", MutationFile)}
	}
	for _, c := range candidates {
		b, err := os.ReadFile(c)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, c, fmt.Errorf("reading mutation results: %w", err)
		}
		var r MutationResults
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, c, fmt.Errorf("%s is not a mutation.json: %w", c, err)
		}
		return &r, c, nil
	}
	return nil, "", fmt.Errorf("%w at %s", ErrNoMutation, path)
}

// FindMutation finds the mutation results a conformance report of store
// shows: the file or directory $PODSAFE_MUTATION names, else the newest
// mutation run in "mutation/latest" of store or of one of its three
// nearest parents (the runs' store holds the mutation store). It returns
// nil and no error when there is none.
func FindMutation(store string) (*MutationResults, string, error) {
	if p := os.Getenv(MutationEnv); p != "" {
		return LoadMutation(p)
	}
	dir, err := filepath.Abs(store)
	if err != nil {
		return nil, "", fmt.Errorf("finding mutation results: %w", err)
	}
	for range 4 {
		r, src, err := LoadMutation(filepath.Join(dir, "mutation"))
		if err == nil {
			return r, src, nil
		}
		if !errors.Is(err, ErrNoMutation) {
			return nil, src, err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return nil, "", nil
}

// AddMutation joins mutation results to the report: every row gets its
// guarantee's kill rate (nil, shown as "not measured", when no mutant
// counts against it). A nil m leaves every row unmeasured.
func (rep *ConformanceReport) AddMutation(m *MutationResults, source string) {
	rep.MutationSource = source
	for i := range rep.Rows {
		rep.Rows[i].Mutation = m.Guarantee(rep.Rows[i].ID)
	}
	rep.count()
}

// orNotMeasured is source, or "not measured" when there is none.
func orNotMeasured(source string) string {
	if source == "" {
		return "not measured"
	}
	return source
}
