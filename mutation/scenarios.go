package mutation

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/podsafe/podsafe/specs"
)

// PackageScenarios are, per system-under-test package (its directory), the
// runs a mutant of the package gets, in order. Two kinds: the bug zoo's
// scenarios able to expose a planted bug of the same package (a zoo bug's
// name), run without the bug and with the authority rules enforced, as a
// user's run would; and the conformance suite's runs whose guarantees the
// package implements ("conformance-" and the run's name in
// specs.ConformanceRuns), each the same seeded scenario the suite runs.
// The zoo's scenarios come first: they are the shortest and the most
// pointed, and a mutant's runs stop at the first Illegal.
var PackageScenarios = map[string][]string{
	"raftstore":       {"stale-read", "read-skips-apply-wait", "conformance-store"},
	"apiserver":       {"api-lengthens-grace", "node-controller-force-deletes", "conformance-lifecycle", "conformance-replicas"},
	"kubelet":         {"kubelet-uses-spec-grace", "kubelet-restart-forgets-grace", "kubelet-probes-before-startup", "conformance-lifecycle", "conformance-replicas"},
	"scheduler":       {"scheduler-preempts-equal-priority", "scheduler-counts-other-namespaces", "conformance-priority", "conformance-spread"},
	"controller":      {"pet-controller-replaces-early", "conformance-pets", "conformance-replicas", "conformance-deployments"},
	"fencing":         {"fencing-deletes-before-fence", "conformance-fencing"},
	"cluster/storage": {"storage-accepts-fenced-writes", "conformance-fencing"},
	// The scheduler's plugins are packages of their own; the spread and
	// preemption guarantees live there.
	"scheduler/plugins/podtopologyspread": {"scheduler-counts-other-namespaces", "scheduler-ignores-missing-topology-key", "conformance-spread"},
	"scheduler/plugins/defaultpreemption": {"scheduler-preempts-equal-priority", "conformance-priority"},
}

// conformancePrefix marks a PackageScenarios entry that names a run of the
// conformance suite rather than a zoo bug.
const conformancePrefix = "conformance-"

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

// Scenario is the run a mutant of a package gets for name: a zoo bug's
// scenario with no bug planted, the authority rules enforced and a name of
// its own, or the conformance run "conformance-<run>" on the embedded
// target.
func Scenario(name string) (specs.Scenario, error) {
	var s specs.Scenario
	if run, ok := strings.CutPrefix(name, conformancePrefix); ok {
		c, err := specs.ConformanceScenario(specs.TargetEmbedded, run)
		if err != nil {
			return specs.Scenario{}, fmt.Errorf("mutation scenario %q: %w", name, err)
		}
		s = c
	} else {
		b, ok := specs.LookupBug(name)
		if !ok {
			return specs.Scenario{}, fmt.Errorf("mutation scenario: %q is neither a bug of the zoo nor %s<a conformance run>", name, conformancePrefix)
		}
		s = b.Scenario
	}
	s.Bugs = nil
	s.BypassAuthority = false
	s.Name = "mutation-" + name
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
