package specs_test

import (
	"encoding/json"
	"fmt"
	"maps"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/podsafe/podsafe/checker"
	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/history"
	"github.com/podsafe/podsafe/specs"
)

// Raft under pressure: a run draws its raft parameters from its seed, low
// enough that a short run snapshots and a member cut off for a second or
// two falls behind the leader's log and is sent the leader's snapshot; the
// checkers judge that run like any other, and the report counts the
// installs.
var _ = Describe("raft snapshots", Label("snapshots"), func() {
	It("a short run with drawn raft parameters installs a snapshot on a member that was cut off", func(ctx SpecContext) {
		// Seed 151 draws small snapshot sizes (a threshold of 10 entries,
		// 5 trailing, a check every 102 ms or so), so that a member cut off
		// for a second or two usually misses more than the leader keeps.
		const seed = 151
		drawn := cluster.RaftParams{}.Draw(mrand.New(mrand.NewPCG(seed, 3)))
		Expect(drawn.SnapshotThreshold+drawn.TrailingLogs).To(BeNumerically("<=", 20),
			"seed %d no longer draws small snapshot sizes (%+v): choose another", seed, drawn)
		// Whether a cut lasts long enough for the leader to compact past
		// the member depends on how many writes the machine let the
		// workload make meanwhile: a loaded machine makes fewer. The
		// same seed runs again (its timing differs from run to run) until
		// a cut member installs a snapshot, at most three times; every
		// run is judged, and none may be Illegal.
		var summaries []string
		for attempt := 1; attempt <= 3; attempt++ {
			installed, summary := snapshotRun(ctx, seed, drawn)
			summaries = append(summaries, summary)
			if installed > 0 {
				AddReportEntry("raft snapshot installs", fmt.Sprintf("attempt %d: %s", attempt, summary))
				return
			}
		}
		Fail("in three runs no member cut off installed a snapshot: " + strings.Join(summaries, "; "))
	}, SpecTimeout(10*time.Minute))
})

// snapshotRun runs the register workload with seed under isolate-one, checks
// it as the spec above does, and returns how many snapshots the members
// the nemesis cut off installed, with a summary.
func snapshotRun(ctx SpecContext, seed uint64, drawn cluster.RaftParams) (int, string) {
	out, err := specs.Run(ctx, specs.Scenario{
		Workload: "register", Nemesis: []string{"isolate-one"}, Seed: seed,
		NemesisInterval: specs.Duration(1500 * time.Millisecond), Duration: specs.Duration(8 * time.Second),
	}, specs.RunOptions{StoreDir: GinkgoT().TempDir(), Progress: GinkgoWriter})
	Expect(err).NotTo(HaveOccurred())
	for _, r := range out.Results.Checks {
		Expect(r.Verdict).NotTo(Equal(checker.Illegal), "%s: %s (run %s)", r.Checker, r.Summary, out.Dir)
	}
	snaps := out.Results.Snapshots
	Expect(snaps).NotTo(BeNil(), "the run recorded no raft parameters")
	AddReportEntry("raft snapshots", snaps.String()+": "+snaps.PerMember())

	// The parameters were drawn, all of them, and scenario.json holds
	// what the members ran with.
	b, err := os.ReadFile(filepath.Join(out.Dir, "scenario.json"))
	Expect(err).NotTo(HaveOccurred())
	var saved specs.Scenario
	Expect(json.Unmarshal(b, &saved)).To(Succeed())
	Expect(saved.Raft.Attrs()).To(HaveLen(7), "scenario.json raft: %+v", saved.Raft)
	Expect(saved.Raft.Attrs()).To(Equal(snaps.Params))
	Expect(saved.Raft).To(Equal(drawn))

	// At least one member that the nemesis cut off was sent a
	// snapshot.
	h, err := history.Load(filepath.Join(out.Dir, "history.jsonl"))
	Expect(err).NotTo(HaveOccurred())
	cut := map[string]bool{}
	for _, iv := range h.Nemesis {
		if i, err := strconv.Atoi(iv.Params["member"]); err == nil {
			cut[cluster.MemberHost(i)] = true
		}
	}
	Expect(cut).NotTo(BeEmpty(), "no member was cut off")
	installed := 0
	for _, m := range snaps.Members {
		if cut[m.Member] {
			installed += m.Installed
		}
	}
	Expect(snaps.Taken).To(BeNumerically(">", 0))
	return installed, fmt.Sprintf("cut %v: %s; %s (raft %s; %s)", slices.Sorted(maps.Keys(cut)), snaps, snaps.PerMember(), snaps.ParamsLine(), out.Results.Load)
}
