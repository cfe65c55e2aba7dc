// Package kube_test is the kube target's smoke suite: real processes at
// time scale 1, mostly waiting, so it runs as a package of its own, beside
// the specs suite rather than after it.
package kube_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/podsafe/podsafe/checker"
	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/history"
	"github.com/podsafe/podsafe/specs"
	"github.com/podsafe/podsafe/target/kube/binaries"
)

// The kube target's smoke: real etcd, kube-apiserver, kube-scheduler and
// kube-controller-manager processes with podsafe's kubelets as nodes, under
// real faults, checked by the same checkers. Short, at time scale 1; the
// longer runs are in make chaos-kube.
var _ = Describe("kube target", Label("kube"), Ordered, func() {
	BeforeAll(func() {
		if _, err := binaries.Cached(binaries.Options{}); err != nil {
			if os.Getenv("PODSAFE_KUBE") == "1" {
				Fail("the kube binaries must be built for this suite (make kube-binaries): " + err.Error())
			}
			Skip("kube binaries not built (make kube-binaries): " + err.Error())
		}
	})

	run := func(ctx context.Context, s specs.Scenario) (*specs.Outcome, *history.History) {
		s.Target = specs.TargetKube
		out, err := specs.Run(ctx, s, specs.RunOptions{StoreDir: GinkgoT().TempDir(), Progress: GinkgoWriter})
		Expect(err).NotTo(HaveOccurred())
		GinkgoWriter.Printf("verdict %s ops %+v in %s\n", out.Results.Verdict, out.Results.Ops, out.Dir)
		h, err := history.Load(filepath.Join(out.Dir, "history.jsonl"))
		Expect(err).NotTo(HaveOccurred())
		return out, h
	}
	injected := func(h *history.History) map[string]int {
		n := map[string]int{}
		for _, iv := range h.Nemesis {
			n[iv.Name]++
		}
		return n
	}

	It("keeps the registers linearizable under an etcd partition and a kill -9 of an etcd member", Label("STORE-LIN"), func(ctx SpecContext) {
		out, h := run(ctx, specs.Scenario{
			Workload: "register", Nemesis: []string{"isolate-one,kill-member"},
			Topology:        cluster.DefaultTopology(3, 1, 1),
			NemesisInterval: specs.Duration(3 * time.Second), Duration: specs.Duration(24 * time.Second),
			Concurrency: 4, Seed: 2,
		})
		Expect(out.Results.Verdict).To(Equal(checker.Ok), "results: %+v", out.Results.Checks)
		Expect(out.Results.Ops.OK).To(BeNumerically(">", 100), "the workload must make progress")
		faults := injected(h)
		Expect(faults).To(HaveKey("kill-member"), "seed 2 kills an etcd member")
		if !containsNetworkWarning(out.Results.Warnings) {
			Expect(faults).To(HaveKey("isolate-one"), "seed 2 isolates an etcd member")
		}
		Expect(h.API).NotTo(BeEmpty(), "the audit log's calls must be in the history")
	}, SpecTimeout(4*time.Minute))

	It("runs each pet at most once under node partitions", Label("PS-11"), func(ctx SpecContext) {
		out, h := run(ctx, specs.Scenario{
			Workload: "pets", Nemesis: []string{"partition-node"},
			Topology:        cluster.DefaultTopology(1, 3, 1),
			NemesisInterval: specs.Duration(4 * time.Second), Duration: specs.Duration(30 * time.Second),
			Concurrency: 2, Seed: 1,
		})
		Expect(out.Results.Verdict).NotTo(Equal(checker.Illegal), "results: %+v", out.Results.Checks)
		var atMostOne *checker.Result
		for i := range out.Results.Checks {
			if out.Results.Checks[i].Checker == "at-most-one" {
				atMostOne = &out.Results.Checks[i]
			}
		}
		Expect(atMostOne).NotTo(BeNil(), "the at-most-one checker must judge the run")
		Expect(atMostOne.Verdict).To(Equal(checker.Ok), "at-most-one: %+v", atMostOne)
		Expect(h.Ledger).NotTo(BeEmpty(), "podsafe's kubelets must have run pets")
		if !containsNetworkWarning(out.Results.Warnings) {
			Expect(injected(h)).To(HaveKey("partition-node"))
		}
	}, SpecTimeout(4*time.Minute))
})

// containsNetworkWarning: the run said network faults are unavailable here
// (no root), so partitions were not injected.
func containsNetworkWarning(ws []string) bool {
	for _, w := range ws {
		if strings.HasPrefix(w, "network faults unavailable") {
			return true
		}
	}
	return false
}

func TestKube(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "podsafe kube target smoke")
}
