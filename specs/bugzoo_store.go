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
		Scenario: Scenario{Workload: "register", Nemesis: []string{"partition"},
			Duration: Duration(15 * time.Second), NemesisInterval: Duration(3 * time.Second), Seed: 1},
	})
}
