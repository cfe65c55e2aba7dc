package specs

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/podsafe/podsafe/cluster"
)

// A scenario's raft parameters are read strictly, must fit together, are
// for the embedded target only, and are left out of scenario.json when
// none are set.
func TestScenarioRaft(t *testing.T) {
	s, err := ParseScenario([]byte("workload: register\nraft:\n  heartbeatTimeout: 700ms\n  snapshotThreshold: 64\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (cluster.RaftParams{HeartbeatTimeout: 700 * time.Millisecond, SnapshotThreshold: 64}); s.Raft != want {
		t.Errorf("parsed raft %+v, want %+v", s.Raft, want)
	}
	s.Defaults()
	if err := s.Validate(); err != nil {
		t.Errorf("a heartbeat above the default election timeout is fine (the election timeout is drawn to fit): %v", err)
	}
	if _, err := ParseScenario([]byte("raft:\n  snapshots: 3\n")); err == nil {
		t.Error("an unknown raft field was accepted")
	}
	for _, tc := range []struct {
		mutate func(*Scenario)
		want   string
	}{
		{func(s *Scenario) {
			s.Raft = cluster.RaftParams{LeaderLeaseTimeout: time.Second, ElectionTimeout: 600 * time.Millisecond}
		}, "scenario raft: raft timeouts must satisfy"},
		{func(s *Scenario) { s.Raft = cluster.RaftParams{SnapshotInterval: time.Millisecond} }, "snapshotInterval must be at least 5ms"},
		{func(s *Scenario) {
			s.Raft = cluster.RaftParams{TrailingLogs: 4}
			s.Target, s.Kube = TargetKube, &KubeScenario{APIServers: 1}
		}, "the kube target runs its own etcd"},
	} {
		s := Scenario{Workload: "register"}
		s.Defaults()
		tc.mutate(&s)
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate: err = %v, want one saying %q", err, tc.want)
		}
	}
	b, err := json.Marshal(Scenario{Workload: "register"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), `"raft"`) {
		t.Errorf("a scenario without raft parameters writes them: %s", b)
	}
}
