package main

import (
	"strings"
	"testing"
	"time"

	"github.com/podsafe/podsafe/cluster"
)

// --raft fixes raft parameters over a scenario file's, and the rerun line
// repeats what was fixed (the seed draws the rest again).
func TestRaftFlag(t *testing.T) {
	path := writeScenario(t, t.TempDir(), "raft", "workload: register\nraft:\n  snapshotThreshold: 9\n  trailingLogs: 3\n")
	cmd, f := newTestCommand()
	if err := cmd.Flags().Parse([]string{"--scenario", path, "--raft", "trailingLogs=5,heartbeatTimeout=700ms"}); err != nil {
		t.Fatal(err)
	}
	s, err := scenarioFromFlags(cmd, f)
	if err != nil {
		t.Fatal(err)
	}
	want := cluster.RaftParams{SnapshotThreshold: 9, TrailingLogs: 5, HeartbeatTimeout: 700 * time.Millisecond}
	if s.Raft != want {
		t.Errorf("raft %+v, want %+v", s.Raft, want)
	}
	s.Defaults()
	if line := rerunCommand(s, "store"); !strings.Contains(line, " --raft heartbeatTimeout=700ms,snapshotThreshold=9,trailingLogs=5") {
		t.Errorf("rerun line %q does not fix the raft parameters", line)
	}

	cmd, f = newTestCommand()
	if err := cmd.Flags().Parse([]string{"--raft", "snapshotCount=5"}); err != nil {
		t.Fatal(err)
	}
	if _, err := scenarioFromFlags(cmd, f); err == nil || !strings.Contains(err.Error(), `--raft: raft: json: unknown field "snapshotCount"`) {
		t.Errorf("an unknown --raft name: err = %v", err)
	}
}
