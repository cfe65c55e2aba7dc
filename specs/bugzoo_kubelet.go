package specs

import (
	"time"

	"github.com/podsafe/podsafe/checker"
	"github.com/podsafe/podsafe/workload"
)

// Planted bugs of the kubelet's grace periods. Each is a failpoint in the
// real code path (kubelet/grace.go, kubelet/terminate.go).
func init() {
	registerBug(Bug{
		Name:        "kubelet-kills-early",
		Description: "kubelets send KILL half a second after TERM whatever the grace period (breaks PS-4, GP-2; needs a failpoint build)",
		Failpoint:   "github.com/podsafe/podsafe/kubelet/killEarly",
		Guarantees:  []string{"PS-4", "GP-2", "GP-3"},
		Checker:     checker.GraceChecker,
		Scenario:    Scenario{Workload: "replicas", Duration: Duration(8 * time.Second), Seed: 5},
	})
	registerBug(Bug{
		Name:        "kubelet-ignores-shortened-grace",
		Description: "a termination under way keeps its first, longer deadline when a second deletion shortens the grace (breaks PS-3, GP-5; needs a failpoint build)",
		Failpoint:   "github.com/podsafe/podsafe/kubelet/ignoreShortenedGrace",
		Guarantees:  []string{"PS-3", "GP-5"},
		Checker:     checker.GraceChecker,
		// Pods that ignore TERM, deleted with up to 300 s and half of
		// them deleted again with another grace while terminating: a
		// shortening of a long grace shows as a KILL on the old deadline,
		// seconds of wall time past the shortened one.
		Scenario: Scenario{Workload: workload.GraceReplicasName, Duration: Duration(15 * time.Second), Seed: 1},
	})
	registerBug(Bug{
		Name:        "kubelet-uses-spec-grace",
		Description: "kubelets apply the pod's spec.terminationGracePeriodSeconds instead of the deletion's grace (breaks GP-1; needs a failpoint build)",
		Failpoint:   "github.com/podsafe/podsafe/kubelet/useSpecGrace",
		Guarantees:  []string{"GP-1"},
		Checker:     checker.GraceChecker,
		// The pods' own grace is 5..9 s; deletions ask for up to 300 s and
		// the containers ignore TERM, so the KILL on the spec's deadline is
		// early for the deletion's.
		Scenario: Scenario{Workload: workload.GraceReplicasName, Duration: Duration(10 * time.Second), Seed: 1},
	})
	registerBug(Bug{
		Name:        "kubelet-probes-before-startup",
		Description: "kubelets run liveness and readiness probes while the startup probe has not succeeded yet (breaks LC-9; needs a failpoint build)",
		Failpoint:   "github.com/podsafe/podsafe/kubelet/probesIgnoreStartup",
		Guarantees:  []string{"LC-9"},
		Checker:     checker.ProbeChecker,
		// Only the lifecycle pods with probes: a startup probe that
		// succeeds after 3 s, liveness and readiness behind it, a
		// readiness probe with an initial delay, a liveness failure that
		// kills, a startup probe that never succeeds.
		Scenario: Scenario{Workload: "lifecycle", Duration: Duration(15 * time.Second), Seed: 3,
			Knobs: workload.Knobs{"lifecycle": {"variants": []any{"probes", "startup-fail", "unready"}, "interval": "2s"}}},
	})
	registerBug(Bug{
		Name:        "kubelet-never-finishes-deletion",
		Description: "kubelets post a deleted pod's final status but never finish its deletion with grace 0: pods stay Terminating on Ready nodes (breaks PS-4, LC-11; needs a failpoint build)",
		Failpoint:   "github.com/podsafe/podsafe/kubelet/neverFinishDeletion",
		Guarantees:  []string{"PS-4", "LC-11"},
		Checker:     checker.ConvergenceChecker,
		// No fault: the run ends healed, waits for the cluster to settle
		// (5 minutes of cluster time, about 7 s at time scale 50, and
		// 10 s of wall time), and the pods the workload deleted are still
		// there.
		Scenario: Scenario{Workload: "replicas", Nemesis: []string{"none"}, Duration: Duration(8 * time.Second), Seed: 2},
	})
	registerBug(Bug{
		Name:        "kubelet-restart-forgets-grace",
		Description: "a restarted kubelet resumes a termination with what remained of the old deadline instead of the full grace (breaks PS-5, LC-12; needs a failpoint build)",
		Failpoint:   "github.com/podsafe/podsafe/kubelet/restartForgetsGrace",
		Guarantees:  []string{"PS-5", "LC-12"},
		Checker:     checker.GraceChecker,
		// Terminations of up to 300 s (6 s of wall time) of pods that
		// ignore TERM, and a kubelet crashed and restarted about every
		// 2 s: restarts land mid-termination.
		Scenario: Scenario{Workload: workload.GraceReplicasName, Nemesis: []string{"kill-kubelet"},
			NemesisInterval: Duration(time.Second), Duration: Duration(15 * time.Second), Seed: 1},
	})
}
