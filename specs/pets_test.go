package specs_test

import (
	"context"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/podsafe/podsafe/checker"
	"github.com/podsafe/podsafe/history"
	"github.com/podsafe/podsafe/specs"
)

// A pets run under node partitions and kubelet crashes is valid, and its
// history holds everything the checkers judge from: the ledger (starts,
// storage writes), every component's API calls, and the store's committed
// changes from the cluster's start (the nodes' registration included).
var _ = Describe("pets workload", Label("PS", "chaos"), func() {
	It("is valid under partition-node and kill-kubelet and records ledger, API calls and store events", func(ctx SpecContext) {
		out, err := specs.Run(context.WithoutCancel(ctx), specs.Scenario{
			Workload:        "pets",
			Nemesis:         []string{"partition-node", "kill-kubelet"},
			NemesisInterval: specs.Duration(2 * time.Second),
			// Long enough for a pet deletion to finish on a loaded machine
			// (its DELETED store event is asserted below).
			Duration: specs.Duration(14 * time.Second),
			Seed:     3,
		}, specs.RunOptions{StoreDir: GinkgoT().TempDir(), Progress: GinkgoWriter})
		Expect(err).NotTo(HaveOccurred())
		Expect(out.Results.Verdict).To(Equal(checker.Ok), "results: %+v", out.Results.Checks)

		h, err := history.Load(filepath.Join(out.Dir, "history.jsonl"))
		Expect(err).NotTo(HaveOccurred())
		actions := map[history.LedgerAction]int{}
		for _, e := range h.Ledger {
			actions[e.Action]++
		}
		Expect(actions[history.LedgerStart]).To(BeNumerically(">", 0), "containers ran")
		Expect(actions[history.LedgerWrite]).To(BeNumerically(">", 0), "pets wrote their volumes")
		identities := map[string]bool{}
		for _, a := range h.API {
			identities[a.Identity] = true
		}
		for _, id := range []string{"workload", "scheduler", "pet-controller", "attachdetach-controller", "kubelet:node-0"} {
			Expect(identities).To(HaveKey(id), "API calls of %s are recorded", id)
		}
		seen := map[string]bool{}
		for _, e := range h.Store {
			seen[e.Resource+" "+string(e.Type)] = true
		}
		for _, k := range []string{"nodes ADDED", "pods ADDED", "pods DELETED", "statefulsets.apps ADDED", "volumeattachments.storage.k8s.io ADDED"} {
			Expect(seen).To(HaveKey(k), "store events %s are recorded", k)
		}
	}, SpecTimeout(2*time.Minute))
})
