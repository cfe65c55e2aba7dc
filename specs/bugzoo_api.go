package specs

import (
	"time"

	"github.com/podsafe/podsafe/workload"
)

// Planted bugs of the API servers. Each is a failpoint in the real code
// path (apiserver/delete.go).
func init() {
	registerBug(Bug{
		Name:        "api-lengthens-grace",
		Description: "a second deletion asking for a longer grace than the pod's deletionGracePeriodSeconds lengthens it (breaks PS-3; needs a failpoint build)",
		Failpoint:   "github.com/podsafe/podsafe/apiserver/lengthenGrace",
		Guarantees:  []string{"PS-3"},
		// The phases checker sees deletionGracePeriodSeconds grow for one
		// UID in the store's events.
		Checker: "phases",
		// Half the deletions are followed, while the pod terminates, by a
		// second one with another grace, about as often longer as shorter.
		Scenario: Scenario{Workload: workload.GraceReplicasName, Duration: Duration(10 * time.Second), Seed: 1},
	})
}
