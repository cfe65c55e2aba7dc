package report

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/podsafe/podsafe/checker"
)

// ReproEntry is one upstream bug of the reproduction catalog
// (repro/catalog.yaml): the facts about it, and the scenarios that
// reproduce it or, when none can run here, why not.
type ReproEntry struct {
	// Issue is "kubernetes/kubernetes#N" or "etcd-io/etcd#N".
	Issue      string   `json:"issue"`
	Title      string   `json:"title"`
	Component  string   `json:"component"`
	Guarantees []string `json:"guarantees"`
	// Affected and Fixed name releases, as read from their sources.
	Affected string `json:"affected"`
	Fixed    string `json:"fixed"`
	// Scenarios reproduce the bug (repro/NAME.yaml), each on its releases.
	Scenarios []ReproScenario `json:"scenarios,omitempty"`
	// NotReproducible says why no scenario runs here.
	NotReproducible string `json:"notReproducible,omitempty"`
}

// ReproScenario is one scenario of an entry and the releases it runs on.
type ReproScenario struct {
	Name     string   `json:"name"`
	Versions []string `json:"versions"`
	Note     string   `json:"note,omitempty"`
}

// ErrInvalidCatalog: the reproduction catalog is malformed.
var ErrInvalidCatalog = errors.New("invalid reproduction catalog")

// LoadReproCatalog reads a catalog strictly (an unknown field is an error)
// and checks each entry: an issue named as the scenarios name it, a
// scenario whose name is that issue's and whose file is beside the
// catalog, or the reason none runs.
func LoadReproCatalog(path string) ([]ReproEntry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var cat []ReproEntry
	if err := yaml.UnmarshalStrict(b, &cat); err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrInvalidCatalog, path, err)
	}
	seen := map[string]bool{}
	for i, e := range cat {
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w %s: entry %d (%s): %s", ErrInvalidCatalog, path, i+1, e.Issue, fmt.Sprintf(format, args...))
		}
		repo, n, ok := strings.Cut(e.Issue, "#")
		if !ok || (repo != "kubernetes/kubernetes" && repo != "etcd-io/etcd") || n == "" || strings.Trim(n, "0123456789") != "" {
			return nil, bad("issue must be kubernetes/kubernetes#N or etcd-io/etcd#N")
		}
		if seen[e.Issue] {
			return nil, bad("listed twice")
		}
		seen[e.Issue] = true
		switch {
		case e.Title == "" || e.Component == "" || len(e.Guarantees) == 0 || e.Affected == "" || e.Fixed == "":
			return nil, bad("needs title, component, guarantees, affected and fixed")
		case len(e.Scenarios) == 0 && e.NotReproducible == "":
			return nil, bad("needs scenarios or notReproducible")
		case len(e.Scenarios) > 0 && e.NotReproducible != "":
			return nil, bad("has scenarios and notReproducible")
		}
		for _, s := range e.Scenarios {
			if issue, _ := issueOf(s.Name); issue != e.Issue {
				return nil, bad("scenario %q is not named after the issue", s.Name)
			}
			if len(s.Versions) == 0 {
				return nil, bad("scenario %q runs on no release", s.Name)
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(path), s.Name+".yaml")); err != nil {
				return nil, bad("scenario %q: %v", s.Name, err)
			}
		}
	}
	return cat, nil
}

// ReproSummaryMarkdown renders the catalog with the runs' verdicts: one
// row per issue, its facts, and per scenario and release what the newest
// run said (or that none ran), or why nothing runs here.
func ReproSummaryMarkdown(cat []ReproEntry, rows []ReproRow) string {
	var b strings.Builder
	b.WriteString("| issue | component | guarantees | affected | fixed | podsafe's verdict |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	esc := func(s string) string { return strings.ReplaceAll(s, "|", "\\|") }
	for _, e := range cat {
		var verdicts []string
		for _, s := range e.Scenarios {
			var per []string
			for _, v := range scenarioVersions(s, rows) {
				per = append(per, v+": "+scenarioVerdict(rows, s.Name, v))
			}
			line := "`" + s.Name + "`: " + strings.Join(per, "; ")
			if s.Note != "" {
				line += " (" + s.Note + ")"
			}
			verdicts = append(verdicts, line)
		}
		if e.NotReproducible != "" {
			verdicts = append(verdicts, "not reproducible here: "+e.NotReproducible)
		}
		fmt.Fprintf(&b, "| %s: %s | %s | %s | %s | %s | %s |\n", e.Issue, esc(e.Title), esc(e.Component), strings.Join(e.Guarantees, ", "),
			esc(e.Affected), esc(e.Fixed), esc(strings.Join(verdicts, "<br>")))
	}
	return b.String()
}

// scenarioVerdict says what the newest runs of scenario on version said:
// each pod list mode's verdict, "reproduced" with the checker and the
// time to detect, or "not run".
func scenarioVerdict(rows []ReproRow, scenario, version string) string {
	latest := map[string]ReproRow{}
	for _, r := range rows {
		if r.Scenario == scenario && r.Kubernetes == version {
			latest[r.PodList] = r
		}
	}
	if len(latest) == 0 {
		return "not run"
	}
	modes := slices.Sorted(func(yield func(string) bool) {
		for m := range latest {
			if !yield(m) {
				return
			}
		}
	})
	var out []string
	for _, m := range modes {
		r := latest[m]
		v := "not reproduced (" + string(r.Verdict) + ")"
		if r.Verdict == checker.Ok {
			v = "valid"
		}
		if r.Reproduced {
			v = fmt.Sprintf("**reproduced** (%s Illegal", r.Checker)
			if r.Detected > 0 {
				v += ", after " + r.Detected.String()
			}
			v += ")"
		}
		if len(latest) > 1 {
			v = m + " " + v
		}
		out = append(out, v)
	}
	return strings.Join(out, ", ")
}

// scenarioVersions are the releases the catalog names for s and those its
// runs were made on, in release order.
func scenarioVersions(s ReproScenario, rows []ReproRow) []string {
	vs := slices.Clone(s.Versions)
	for _, r := range rows {
		if r.Scenario == s.Name && r.Kubernetes != "" && !slices.Contains(vs, r.Kubernetes) {
			vs = append(vs, r.Kubernetes)
		}
	}
	slices.SortFunc(vs, compareReleases)
	return vs
}

// compareReleases orders "v1.34.4" before "v1.37.2" and "v1.34.10" after
// "v1.34.4".
func compareReleases(a, b string) int {
	pa, pb := strings.Split(strings.TrimPrefix(a, "v"), "."), strings.Split(strings.TrimPrefix(b, "v"), ".")
	for i := 0; i < len(pa) && i < len(pb); i++ {
		x, errX := strconv.Atoi(pa[i])
		y, errY := strconv.Atoi(pb[i])
		if errX != nil || errY != nil {
			if c := strings.Compare(pa[i], pb[i]); c != 0 {
				return c
			}
			continue
		}
		if x != y {
			return x - y
		}
	}
	return len(pa) - len(pb)
}
