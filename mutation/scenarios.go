package mutation

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/podsafe/podsafe/specs"
)

// PackageScenarios are, per system-under-test package (its directory), the
// bug-zoo bugs whose scenarios a mutant of the package runs under, in
// order: the scenarios the zoo found able to expose a planted bug of the
// same package. The runs use the zoo's scenario without the bug and with
// the authority rules enforced, as a user's run would.
var PackageScenarios = map[string][]string{
	"raftstore":       {"stale-read", "read-skips-apply-wait"},
	"apiserver":       {"api-lengthens-grace", "node-controller-force-deletes"},
	"kubelet":         {"kubelet-uses-spec-grace", "kubelet-restart-forgets-grace", "kubelet-probes-before-startup"},
	"scheduler":       {"scheduler-preempts-equal-priority", "scheduler-counts-other-namespaces"},
	"controller":      {"pet-controller-replaces-early"},
	"fencing":         {"fencing-deletes-before-fence"},
	"cluster/storage": {"storage-accepts-fenced-writes"},
	// The scheduler's plugins are packages of their own; the spread and
	// preemption guarantees live there.
	"scheduler/plugins/podtopologyspread": {"scheduler-counts-other-namespaces", "scheduler-ignores-missing-topology-key"},
	"scheduler/plugins/defaultpreemption": {"scheduler-preempts-equal-priority"},
}

// DefaultPackages are the system-under-test packages a mutation run
// covers by default.
var DefaultPackages = []string{"raftstore", "apiserver", "kubelet", "scheduler", "controller", "fencing", "cluster/storage"}

// NormalizePackage turns a package as people write it ("./cluster/storage/",
// "github.com/podsafe/podsafe/kubelet") into its directory and checks that
// mutation runs know scenarios for it.
func NormalizePackage(p string) (string, error) {
	p = strings.TrimPrefix(strings.TrimSpace(p), "github.com/podsafe/podsafe/")
	p = strings.TrimSuffix(strings.TrimPrefix(p, "./"), "/")
	if _, ok := PackageScenarios[p]; !ok {
		known := make([]string, 0, len(PackageScenarios))
		for k := range PackageScenarios {
			known = append(known, "./"+k)
		}
		sort.Strings(known)
		return "", fmt.Errorf("package %q has no mutation scenarios; choose among %s", p, strings.Join(known, ", "))
	}
	return p, nil
}

// Scenario is the run a mutant of a package gets for zoo bug name: the
// bug's scenario with no bug planted, the authority rules enforced and a
// name of its own.
func Scenario(bug string) (specs.Scenario, error) {
	b, ok := specs.LookupBug(bug)
	if !ok {
		return specs.Scenario{}, fmt.Errorf("mutation scenario: %q is not a bug of the zoo", bug)
	}
	s := b.Scenario
	s.Bugs = nil
	s.BypassAuthority = false
	s.Name = "mutation-" + bug
	// As specs.Run would: a scenario file states every field, since podsafe
	// test refuses a field given as zero rather than defaulting it.
	s.Defaults()
	return s, nil
}

// scenariosOf lists the distinct zoo bugs whose scenarios pkgs run.
func scenariosOf(pkgs []string) []string {
	var out []string
	for _, p := range pkgs {
		for _, b := range PackageScenarios[p] {
			if !slices.Contains(out, b) {
				out = append(out, b)
			}
		}
	}
	return out
}
