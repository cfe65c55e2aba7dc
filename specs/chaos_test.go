package specs_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/podsafe/podsafe/checker"
	"github.com/podsafe/podsafe/nemesis"
	"github.com/podsafe/podsafe/specs"
	"github.com/podsafe/podsafe/target/kube"
)

// chaosTime is how long each cell of the chaos matrix runs: short in
// make test, longer in make chaos (PODSAFE_CHAOS_TIME=2m).
func chaosTime() time.Duration {
	if v := os.Getenv("PODSAFE_CHAOS_TIME"); v != "" {
		d, err := time.ParseDuration(v)
		if err == nil && d > 0 {
			return d
		}
	}
	return 6 * time.Second
}

// The chaos suite: every workload under every kind of fault, each cell a
// seeded run whose checkers must find no violation.
var _ = Describe("chaos matrix", Label("chaos"), func() {
	entries := []TableEntry{}
	for i, e := range specs.ChaosMatrix {
		entries = append(entries, Entry(fmt.Sprintf("%s under %s", e.Workload, strings.Join(e.Nemesis, "+")), e, uint64(100+i), SpecTimeout(10*time.Minute)))
	}
	DescribeTable("stays valid", func(ctx SpecContext, e specs.ChaosEntry, seed uint64) {
		out, err := specs.Run(ctx, specs.Scenario{
			Workload: e.Workload, Nemesis: e.Nemesis, Seed: seed, Durable: e.Durable,
			NemesisInterval: specs.Duration(time.Second), Duration: specs.Duration(chaosTime()),
		}, specs.RunOptions{StoreDir: GinkgoT().TempDir(), Progress: GinkgoWriter})
		Expect(err).NotTo(HaveOccurred())
		// Each cell shows its raft snapshots: the installs a run with
		// drawn raft parameters made, judged like any other run.
		snaps := out.Results.Snapshots
		AddReportEntry("raft snapshots", snaps.String()+" — "+snaps.PerMember()+" — raft "+snaps.ParamsLine())
		for _, r := range out.Results.Checks {
			Expect(r.Verdict).NotTo(Equal(checker.Illegal), "%s: %s (run %s)", r.Checker, r.Summary, out.Dir)
			if r.Verdict == checker.Unknown {
				fmt.Fprintf(GinkgoWriter, "%s undecided: %s\n", r.Checker, r.Summary)
			}
		}
	}, entries)
})

var _ = Describe("conformance", Label("conformance"), func() {
	It("PS-T: the suites inject every kind of fault the guarantees name", Label("PS-T", "PS", onKube), func() {
		used := map[string]bool{}
		use := func(groups []string, offered func(nemesis.Fault) bool) {
			faults, err := nemesis.Lookup(groups...)
			Expect(err).NotTo(HaveOccurred())
			for _, f := range faults {
				if offered(f) {
					used[f.Name()] = true
				}
			}
		}
		if conformanceTarget == specs.TargetKube {
			// The kube suites: make chaos-kube's groups, with the faults
			// its target offers, and the kube forms of the conformance
			// runs.
			shape := specs.KubeChaosShape
			var nodes []string
			for i := range shape.Nodes {
				nodes = append(nodes, fmt.Sprintf("node-%d", i))
			}
			plan, err := kube.Plan(kube.Config{Etcd: shape.Members, APIServers: shape.APIServers, Network: kube.NetworkNamespaces}, nodes, false)
			Expect(err).NotTo(HaveOccurred())
			use(specs.KubeChaosNemesis, func(f nemesis.Fault) bool { return f.Available(plan) })
			for name := range specs.ConformanceRuns {
				s, err := specs.ConformanceScenario(specs.TargetKube, name)
				if errors.Is(err, specs.ErrNotOnTarget) {
					continue
				}
				Expect(err).NotTo(HaveOccurred())
				if len(s.Nemesis) == 1 && s.Nemesis[0] == "none" {
					continue
				}
				use(s.Nemesis, func(nemesis.Fault) bool { return true })
			}
		} else {
			for _, e := range specs.ChaosMatrix {
				use(e.Nemesis, func(nemesis.Fault) bool { return true })
			}
			for _, s := range specs.ConformanceRuns {
				if len(s.Nemesis) == 1 && s.Nemesis[0] == "none" {
					continue
				}
				use(s.Nemesis, func(nemesis.Fault) bool { return true })
			}
		}
		for kind, any := range map[string][]string{
			"control-plane↔node partitions":   {"partition-node", "one-way-node"},
			"node↔node partitions":            {"partition-node-node"},
			"API↔store partitions":            {"api-store"},
			"concurrent controller execution": {"pause-controller"},
			"kubelet failures":                {"kill-kubelet", "pause-kubelet"},
			"controller failures":             {"kill-controller", "kill-controllers"},
		} {
			covered := false
			for _, f := range any {
				covered = covered || used[f]
			}
			Expect(covered).To(BeTrue(), "no suite injects %s (%v)", kind, any)
		}
	})
})

// TestKubeChaosMakefile: make chaos-kube runs what the PS-T spec counts on
// the kube target.
func TestKubeChaosMakefile(t *testing.T) {
	b, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	want := "KUBE_CHAOS_NEMESIS  ?= " + strings.Join(specs.KubeChaosNemesis, ",")
	if !strings.Contains(string(b), want) {
		t.Errorf("the Makefile does not say %q: keep it and specs.KubeChaosNemesis the same", want)
	}
	shape := fmt.Sprintf("--members %d --apiservers %d", specs.KubeChaosShape.Members, specs.KubeChaosShape.APIServers)
	if !strings.Contains(string(b), shape) {
		t.Errorf("make chaos-kube does not run %s (specs.KubeChaosShape)", shape)
	}
}
