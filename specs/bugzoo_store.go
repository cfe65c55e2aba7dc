package specs

import (
	"time"

	"github.com/podsafe/podsafe/checker"
)

func init() {
	registerBug(Bug{
		Name:        "stale-read",
		Description: "every store member serves reads from its local state without asking the leader (breaks linearizability)",
		Guarantees:  []string{checker.GuaranteeStoreLin},
		Checker:     checker.RegisterChecker,
		// Followers cut off one at a time, often, with many clients: reads
		// served by an isolated follower miss writes acknowledged meanwhile.
		Scenario: Scenario{Workload: "register", Nemesis: []string{"isolate-one"},
			NemesisInterval: Duration(800 * time.Millisecond), Duration: Duration(10 * time.Second),
			Concurrency: 6, Seed: 2},
	})
}
