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
