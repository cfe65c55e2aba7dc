package specs_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/podsafe/podsafe/checker"
	"github.com/podsafe/podsafe/history"
	"github.com/podsafe/podsafe/specs"
	"github.com/podsafe/podsafe/workload"
)

// The register suite: the store under partitions must stay linearizable (the
// bug zoo's stale-read entry shows the checker catches a store that is not).
var _ = Describe("register workload", Label("STORE", "chaos"), func() {
	run := func(ctx context.Context, s specs.Scenario) *specs.Outcome {
		dir := GinkgoT().TempDir()
		out, err := specs.Run(ctx, s, specs.RunOptions{StoreDir: dir, Progress: GinkgoWriter})
		Expect(err).NotTo(HaveOccurred())
		Expect(out).NotTo(BeNil())
		for _, f := range []string{"history.jsonl", "scenario.json", "results.json"} {
			Expect(filepath.Join(out.Dir, f)).To(BeAnExistingFile())
		}
		GinkgoWriter.Printf("verdict %s ops %+v in %s\n", out.Results.Verdict, out.Results.Ops, out.Dir)
		return out
	}

	It("stays linearizable on 3 members under random partitions and leader isolation", func(ctx SpecContext) {
		out := run(ctx, specs.Scenario{
			Workload:        "register",
			Nemesis:         []string{"partition"},
			NemesisInterval: specs.Duration(800 * time.Millisecond),
			Duration:        specs.Duration(10 * time.Second),
			Concurrency:     6,
			Seed:            1,
		})
		Expect(out.Results.Verdict).To(Equal(checker.Ok), "results: %+v", out.Results.Checks)
		// Progress relative to what the run could do: a tenth of the
		// operations it invoked completed. A machine so loaded that the
		// run invoked almost nothing says so and judges nothing here.
		ops := out.Results.Ops
		invoked := ops.OK + ops.Fail + ops.Unknown
		if invoked < 50 && out.Results.Load.Starved() {
			Skip(fmt.Sprintf("the machine starved the run: %d operations invoked (%s)", invoked, out.Results.Load))
		}
		Expect(invoked).To(BeNumerically(">=", 50), "the workload must make progress (%s)", out.Results.Load)
		Expect(ops.OK*10).To(BeNumerically(">=", invoked), "the workload must make progress: %+v (%s)", ops, out.Results.Load)

		h, err := history.Load(filepath.Join(out.Dir, "history.jsonl"))
		Expect(err).NotTo(HaveOccurred())
		Expect(h.Nemesis).NotTo(BeEmpty(), "the nemesis must have injected faults")
		Expect(out.Dir + "/linearizability.html").To(BeAnExistingFile())
	}, SpecTimeout(2*time.Minute))

	It("records watches and the Leases' committed history, and the watch checkers judge them", Label("STORE-WATCH-ORDER", "STORE-WATCH-VALUE", "STORE-READ-AFTER-WATCH", "STORE-LIST"), func(ctx SpecContext) {
		out := run(ctx, specs.Scenario{
			Workload: "register", Nemesis: []string{"none"},
			Duration: specs.Duration(4 * time.Second), Concurrency: 3, Seed: 4,
		})
		Expect(out.Results.Verdict).To(Equal(checker.Ok), "results: %+v", out.Results.Checks)
		h, err := history.Load(filepath.Join(out.Dir, "history.jsonl"))
		Expect(err).NotTo(HaveOccurred())

		watchers := map[string]bool{}
		events := 0
		for _, l := range h.Watch {
			watchers[l.Watcher] = true
			if l.Phase == history.WatchDeliver {
				events++
			}
		}
		Expect(watchers).To(HaveLen(3), "one watcher per member")
		Expect(events).To(BeNumerically(">", 20))
		leases := 0
		for _, e := range h.Store {
			if e.Resource == workload.LeaseResource {
				Expect(e.Namespace).To(Equal(workload.RegisterNamespace), "only the register's Leases are recorded")
				leases++
			}
		}
		Expect(leases).To(BeNumerically(">", 10))
		GinkgoWriter.Printf("%d watch events from %d watchers, %d committed Lease changes\n", events, len(watchers), leases)

		judged := map[string]checker.Verdict{}
		for _, r := range out.Results.Checks {
			judged[r.Checker] = r.Verdict
			GinkgoWriter.Printf("%s %s: %s\n", r.Checker, r.Verdict, r.Summary)
		}
		for _, name := range []string{checker.WatchOrderChecker, checker.WatchValueChecker, checker.ReadAfterWatchChecker, checker.ListChecker} {
			Expect(judged).To(HaveKeyWithValue(name, checker.Ok))
		}
	}, SpecTimeout(time.Minute))

	It("re-checks a saved history and a truncated one", func(ctx SpecContext) {
		out := run(ctx, specs.Scenario{
			Workload: "register", Nemesis: []string{"none"},
			Duration: specs.Duration(2 * time.Second), Concurrency: 3, Seed: 3,
		})
		again, err := specs.CheckDir(ctx, out.Dir, time.Minute)
		Expect(err).NotTo(HaveOccurred())
		Expect(again.Verdict).To(Equal(out.Results.Verdict))

		// A crash mid-write leaves a partial last line: still checkable.
		path := filepath.Join(out.Dir, "history.jsonl")
		b, err := os.ReadFile(path)
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(path, b[:len(b)-7], 0o644)).To(Succeed())
		cut, err := specs.CheckDir(ctx, out.Dir, time.Minute)
		Expect(err).NotTo(HaveOccurred())
		Expect(cut.Truncated).To(BeTrue())
		// The torn line was the closing record: the run did not finish as
		// far as the history can tell, so the verdict is at best Unknown,
		// while every checker still judged what was recorded.
		Expect(cut.Incomplete).To(BeTrue())
		Expect(cut.Verdict).To(Equal(checker.Unknown))
		for _, r := range cut.Checks {
			Expect(r.Verdict).To(Equal(checker.Ok), "%s: %s", r.Checker, r.Summary)
		}
		Expect(cut.Ops.OK).To(BeNumerically(">", 0))
	}, SpecTimeout(time.Minute))
})
