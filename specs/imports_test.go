package specs_test

import (
	"os/exec"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// The one-way data flow of the architecture: the system under test never
// imports the testing side, and history, checker and report never reach back
// to a live cluster.
var _ = Describe("package imports", Label("arch"), func() {
	const mod = "github.com/podsafe/podsafe/"
	forbidden := map[string][]string{
		"raftstore": {"apiserver", "cluster", "nemesis", "workload", "history", "checker", "report", "specs"},
		"apiserver": {"cluster", "nemesis", "workload", "history", "checker", "report", "specs"},
		"cluster":   {"nemesis", "workload", "history", "checker", "report", "specs"},
		"history":   {"raftstore", "apiserver", "cluster", "nemesis", "workload", "checker", "report", "specs"},
		"checker":   {"raftstore", "apiserver", "cluster", "nemesis", "workload", "report", "specs"},
		"report":    {"raftstore", "apiserver", "cluster", "nemesis", "workload", "specs"},
		"workload":  {"cluster", "nemesis", "checker", "report", "specs"},
		// Components talk only through the API, never to each other.
		"kubelet":    {"scheduler", "raftstore", "apiserver", "cluster", "nemesis", "workload", "history", "checker", "report", "specs"},
		"controller": {"kubelet", "scheduler", "raftstore", "cluster", "nemesis", "workload", "history", "checker", "report", "specs"},
		"scheduler":  {"kubelet", "raftstore", "cluster", "nemesis", "workload", "history", "checker", "report", "specs"},
		"fencing":    {"kubelet", "scheduler", "controller", "raftstore", "cluster", "nemesis", "workload", "history", "checker", "report", "specs"},
	}
	for pkg, bad := range forbidden {
		It(pkg+" imports none of "+strings.Join(bad, ", "), func() {
			out, err := exec.Command("go", "list", "-deps", mod+pkg).CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), string(out))
			deps := map[string]bool{}
			for _, d := range strings.Fields(string(out)) {
				deps[d] = true
			}
			for _, b := range bad {
				Expect(deps).NotTo(HaveKey(mod+b), "%s must not import %s", pkg, b)
			}
		})
	}
})
