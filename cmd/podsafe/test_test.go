package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/podsafe/podsafe/workload"
)

// Nodes and zones not given on the command line are what the workload
// needs: `podsafe test --workload spread` runs on two zones, while an
// explicit --zones is the user's to choose (and is then validated).
func TestScenarioFromFlagsMeetsWorkloadNeeds(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		wantZones int
		wantNodes int
	}{
		{[]string{"--workload", "spread"}, 2, 3},
		{[]string{"--workload", "spread", "--zones", "3"}, 3, 3},
		{[]string{"--workload", "spread", "--zones", "3", "--nodes", "6"}, 3, 6},
		{[]string{"--workload", "pets"}, 1, 3},
	} {
		cmd, f := newTestCommand()
		if err := cmd.Flags().Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		s, err := scenarioFromFlags(cmd, f)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if got := zones(s.Topology); got != tc.wantZones || len(s.Topology.Nodes) != tc.wantNodes {
			t.Errorf("%v: %d nodes in %d zones, want %d in %d", tc.args, len(s.Topology.Nodes), got, tc.wantNodes, tc.wantZones)
		}
	}
}

// A scenario file's generated nodes (scenario nodes, zones) stand unless
// --nodes or --zones replaces them; --members alone keeps them.
func TestScenarioFileGeneratedNodes(t *testing.T) {
	path := writeScenario(t, t.TempDir(), "gen", "workload: spread\nnodes: 9\nzones: 3\n")
	for _, tc := range []struct {
		args         []string
		nodes, zones int
		members      int
	}{
		{[]string{"--scenario", path}, 9, 3, 3},
		{[]string{"--scenario", path, "--members", "1"}, 9, 3, 1},
		{[]string{"--scenario", path, "--nodes", "4"}, 4, 2, 3},
	} {
		cmd, f := newTestCommand()
		if err := cmd.Flags().Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		s, err := scenarioFromFlags(cmd, f)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		s.Defaults()
		if len(s.Topology.Nodes) != tc.nodes || zones(s.Topology) != tc.zones || s.Topology.Members != tc.members {
			t.Errorf("%v: %d nodes in %d zones, %d members; want %d in %d, %d members", tc.args,
				len(s.Topology.Nodes), zones(s.Topology), s.Topology.Members, tc.nodes, tc.zones, tc.members)
		}
	}
}

// --knob sets a workload knob over a scenario file's, the value read as
// YAML; a malformed one is one error naming it.
func TestKnobFlags(t *testing.T) {
	path := writeScenario(t, t.TempDir(), "tuned", "workload: spread\nknobs: {spread: {sets: 5, pods: 2}}\n")
	s, err := fromFlags(t, "--scenario", path, "--knob", "spread.sets=4", "--knob", "spread.interval=3s", "--knob", "spread.setWeights=[0,1,1,1,1]")
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.TunedWorkload()
	if err != nil {
		t.Fatal(err)
	}
	sp := w.(*workload.Spread)
	if sp.Sets != 4 || sp.Pods != 2 || sp.Interval != 3*time.Second || sp.SetWeights != [5]int{0, 1, 1, 1, 1} {
		t.Errorf("spread %d sets, %d pods, interval %s, weights %v", sp.Sets, sp.Pods, sp.Interval, sp.SetWeights)
	}
	// The rerun command gives the knobs back.
	rerun := rerunCommand(s, "store")
	for _, want := range []string{" --knob spread.interval=3s", " --knob spread.pods=2", " --knob spread.sets=4", " --knob 'spread.setWeights=[0,1,1,1,1]'"} {
		if !strings.Contains(rerun, want) {
			t.Errorf("rerun %q lacks %q", rerun, want)
		}
	}
	args := strings.Fields(strings.ReplaceAll(rerun, "'", ""))[2:]
	again, err := fromFlags(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(again.Knobs, s.Knobs) {
		t.Errorf("knobs of the rerun %v, want %v", again.Knobs, s.Knobs)
	}
	for _, bad := range []string{"sets=4", "spread.=4", "spread.sets", ".sets=4", "spread.sets=[1,"} {
		cmd, f := newTestCommand()
		if err := cmd.Flags().Parse([]string{"--workload", "spread", "--knob", bad}); err != nil {
			t.Fatal(err)
		}
		if _, err := scenarioFromFlags(cmd, f); err == nil || !strings.Contains(err.Error(), "--knob") {
			t.Errorf("--knob %s: %v", bad, err)
		}
	}
}

// --policy switches on control-plane policies; the rerun gives them back.
func TestPolicyFlag(t *testing.T) {
	s, err := fromFlags(t, "--workload", "pets", "--policy", "failPodsOnLostNode=true,terminatedPodThreshold=3")
	if err != nil {
		t.Fatal(err)
	}
	if !s.Policies.FailPodsOnLostNode || s.Policies.TerminatedPodThreshold != 3 {
		t.Fatalf("policies %+v", s.Policies)
	}
	rerun := rerunCommand(s, "store")
	if !strings.Contains(rerun, " --policy failPodsOnLostNode=true,terminatedPodThreshold=3") {
		t.Errorf("rerun %q", rerun)
	}
	again, err := fromFlags(t, strings.Fields(rerun)[2:]...)
	if err != nil || again.Policies != s.Policies {
		t.Errorf("rerun's policies %+v (%v), want %+v", again.Policies, err, s.Policies)
	}
	if _, err := fromFlags(t, "--workload", "pets", "--policy", "failPodsOnLostNod=true"); err == nil || !strings.Contains(err.Error(), "--policy failPodsOnLostNod") {
		t.Errorf("an unknown policy: %v", err)
	}
	if _, err := fromFlags(t, "--workload", "pets", "--target", "kube", "--policy", "failPodsOnLostNode=true"); err == nil || !strings.Contains(err.Error(), "embedded target's") {
		t.Errorf("an embedded policy on kube: %v", err)
	}
}
