package specs

import (
	"time"

	"github.com/podsafe/podsafe/checker"
)

func init() {
	registerBug(Bug{
		Name:        "kubelet-kills-early",
		Description: "kubelets send KILL half a second after TERM whatever the grace period (breaks PS-4, GP-2; needs a failpoint build)",
		Failpoint:   "github.com/podsafe/podsafe/kubelet/killEarly",
		Guarantees:  []string{"PS-4", "GP-2", "GP-3"},
		Checker:     checker.GraceChecker,
		Scenario:    Scenario{Workload: "replicas", Duration: Duration(8 * time.Second), Seed: 5},
	})
}
