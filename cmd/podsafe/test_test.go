package main

import (
	"testing"
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
