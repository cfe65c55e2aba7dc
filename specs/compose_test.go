package specs_test

import (
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/podsafe/podsafe/checker"
	"github.com/podsafe/podsafe/history"
	"github.com/podsafe/podsafe/specs"
)

// A composed nemesis on the embedded cluster: partitions, slow members and
// crashes, each part on its own timer, overlap; the run stays valid, and
// its history holds every fault as a healed interval with its effect and
// parameters.
var _ = Describe("composed nemesis", Label("chaos"), func() {
	It("overlaps faults of different kinds and stays valid", func(ctx SpecContext) {
		out, err := specs.Run(ctx, specs.Scenario{
			Workload: "register", Durable: true, Seed: 21,
			NemesisCompose: []specs.NemesisPart{
				{Faults: []string{"isolate-one", "halves", "one-way-member"}, Interval: specs.Duration(600 * time.Millisecond)},
				{Faults: []string{"slow-member"}, Interval: specs.Duration(400 * time.Millisecond)},
				{Faults: []string{"kill-member"}, Interval: specs.Duration(700 * time.Millisecond)},
			},
			Duration: specs.Duration(5 * time.Second),
		}, specs.RunOptions{StoreDir: GinkgoT().TempDir(), Progress: GinkgoWriter})
		Expect(err).NotTo(HaveOccurred())
		for _, r := range out.Results.Checks {
			Expect(r.Verdict).NotTo(Equal(checker.Illegal), "%s: %s (run %s)", r.Checker, r.Summary, out.Dir)
		}
		path := filepath.Join(out.Dir, "history.jsonl")
		if _, err := os.Stat(path); err != nil {
			path += ".gz"
		}
		h, err := history.Load(path)
		Expect(err).NotTo(HaveOccurred())
		Expect(h.Nemesis).NotTo(BeEmpty())
		overlapping := false
		for i, a := range h.Nemesis {
			GinkgoWriter.Printf("%6.2fs-%6.2fs %-10s %-15s %s (%s)\n", float64(a.Start)/1e9, float64(a.End)/1e9, a.Effect, a.Name, a.Description, a.ParamString())
			Expect(a.Healed).To(BeTrue(), "%s (%s) never healed", a.Name, a.Description)
			Expect(a.Effect).NotTo(BeEmpty(), "%s records no effect", a.Name)
			Expect(a.Params).NotTo(BeEmpty(), "%s records no parameters", a.Name)
			for _, b := range h.Nemesis[i+1:] {
				if a.Effect != b.Effect && a.Start < b.End && b.Start < a.End {
					overlapping = true
				}
			}
		}
		Expect(overlapping).To(BeTrue(), "no two faults of different kinds overlapped: %v", h.Nemesis)
	}, SpecTimeout(3*time.Minute))
})
