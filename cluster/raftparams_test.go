package cluster

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/podsafe/podsafe/raftstore"
)

func TestRaftParamsDraw(t *testing.T) {
	seen := map[uint64]bool{}
	for seed := range uint64(500) {
		p := RaftParams{}.Draw(rand.New(rand.NewPCG(seed, 3)))
		if err := p.Validate(); err != nil {
			t.Fatalf("seed %d drew %+v: %v", seed, p, err)
		}
		for _, d := range []time.Duration{p.HeartbeatTimeout, p.ElectionTimeout, p.LeaderLeaseTimeout} {
			if d < MinDrawnTimeout || d > MaxDrawnTimeout {
				t.Errorf("seed %d drew a timeout of %v, outside [%v, %v]", seed, d, MinDrawnTimeout, MaxDrawnTimeout)
			}
		}
		if d := p.CommitTimeout; d < MinDrawnCommitTimeout || d > MaxDrawnCommitTimeout {
			t.Errorf("seed %d drew commitTimeout %v", seed, d)
		}
		if n := p.SnapshotThreshold; n < MinDrawnThreshold || n > MaxDrawnThreshold {
			t.Errorf("seed %d drew snapshotThreshold %d", seed, n)
		}
		if n := p.TrailingLogs; n < MinDrawnTrailingLogs || n > MaxDrawnTrailingLogs {
			t.Errorf("seed %d drew trailingLogs %d", seed, n)
		}
		if d := p.SnapshotInterval; d < MinDrawnInterval || d > MaxDrawnInterval {
			t.Errorf("seed %d drew snapshotInterval %v", seed, d)
		}
		seen[p.SnapshotThreshold] = true
		if again := (RaftParams{}).Draw(rand.New(rand.NewPCG(seed, 3))); again != p {
			t.Errorf("seed %d drew %+v, then %+v", seed, p, again)
		}
	}
	if len(seen) < 100 {
		t.Errorf("500 seeds drew only %d snapshot thresholds", len(seen))
	}
}

func TestRaftParamsDrawKeepsGiven(t *testing.T) {
	for seed := range uint64(200) {
		drawn := RaftParams{}.Draw(rand.New(rand.NewPCG(seed, 3)))
		// A long heartbeat timeout given: the drawn election timeout
		// cannot be shorter, the lease no longer.
		given := RaftParams{HeartbeatTimeout: 2 * time.Second, TrailingLogs: 3}
		p := given.Draw(rand.New(rand.NewPCG(seed, 3)))
		if p.HeartbeatTimeout != 2*time.Second || p.TrailingLogs != 3 {
			t.Fatalf("seed %d: given fields changed: %+v", seed, p)
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("seed %d: %+v: %v", seed, p, err)
		}
		for _, given := range []RaftParams{{LeaderLeaseTimeout: 740 * time.Millisecond}, {ElectionTimeout: 510 * time.Millisecond}} {
			if p := given.Draw(rand.New(rand.NewPCG(seed, 3))); p.Validate() != nil {
				t.Fatalf("seed %d: %+v drew %+v: %v", seed, given, p, p.Validate())
			}
		}
		// Fixing some fields leaves the others as the seed draws them.
		if p.SnapshotThreshold != drawn.SnapshotThreshold || p.SnapshotInterval != drawn.SnapshotInterval || p.CommitTimeout != drawn.CommitTimeout {
			t.Errorf("seed %d: fixing two fields changed the others: %+v, alone %+v", seed, p, drawn)
		}
	}
}

func TestRaftParamsValidate(t *testing.T) {
	for _, tt := range []struct {
		p    RaftParams
		want string
	}{
		{RaftParams{}, ""},
		{RaftParams{SnapshotThreshold: 1, TrailingLogs: 1, SnapshotInterval: 5 * time.Millisecond}, ""},
		// The election timeout stays at its 500ms default, below the heartbeat.
		{RaftParams{HeartbeatTimeout: time.Second}, "heartbeatTimeout (1s) <= electionTimeout (500ms)"},
		{RaftParams{HeartbeatTimeout: time.Second, ElectionTimeout: time.Second}, ""},
		{RaftParams{HeartbeatTimeout: 2 * time.Second, ElectionTimeout: time.Second}, "leaderLeaseTimeout (500ms) <= heartbeatTimeout (2s) <= electionTimeout (1s)"},
		{RaftParams{LeaderLeaseTimeout: time.Millisecond, HeartbeatTimeout: time.Millisecond, ElectionTimeout: time.Millisecond}, "at least 5ms"},
		{RaftParams{SnapshotInterval: time.Millisecond}, "snapshotInterval must be at least 5ms"},
		{RaftParams{CommitTimeout: -time.Second}, "commitTimeout"},
	} {
		err := tt.p.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%+v: %v", tt.p, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%+v: err = %v, want one saying %q", tt.p, err, tt.want)
		}
	}
	if _, err := New(Config{Topology: DefaultTopology(1, 0, 1), Raft: RaftParams{SnapshotInterval: time.Millisecond}}); err == nil {
		t.Error("New accepted a snapshot interval raft refuses")
	}
}

func TestRaftParamsJSON(t *testing.T) {
	p := RaftParams{}.Draw(rand.New(rand.NewPCG(7, 3)))
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"heartbeatTimeout":"`+p.HeartbeatTimeout.String()+`"`) {
		t.Errorf("durations are not written as strings: %s", b)
	}
	var back RaftParams
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back != p {
		t.Errorf("round trip: %+v, want %+v", back, p)
	}
	if b, _ := json.Marshal(RaftParams{}); string(b) != "{}" {
		t.Errorf("zero params marshal to %s, want {}", b)
	}
	for _, bad := range []string{`{"heartbeat":"1s"}`, `{"heartbeatTimeout":500}`, `{"snapshotInterval":"soon"}`} {
		if err := json.Unmarshal([]byte(bad), &back); err == nil {
			t.Errorf("Unmarshal(%s) succeeded", bad)
		}
	}
	want := map[string]string{"snapshotThreshold": "64", "electionTimeout": "700ms"}
	if diff := cmp.Diff(want, (RaftParams{SnapshotThreshold: 64, ElectionTimeout: 700 * time.Millisecond}).Attrs()); diff != "" {
		t.Errorf("Attrs (-want +got):\n%s", diff)
	}
}

func TestConfigureRaft(t *testing.T) {
	var got []string
	c := &Cluster{cfg: Config{
		Raft:       RaftParams{SnapshotThreshold: 32, HeartbeatTimeout: 600 * time.Millisecond},
		OnSnapshot: func(member string, e raftstore.SnapshotEvent) { got = append(got, member+" "+string(e.Kind)) },
	}}
	scfg := raftstore.Config{TrailingLogs: 9}
	c.configureRaft(&scfg, "cp-1")
	if scfg.SnapshotThreshold != 32 || scfg.HeartbeatTimeout != 600*time.Millisecond || scfg.TrailingLogs != 9 {
		t.Errorf("store config %+v: want the params set and the rest kept", scfg)
	}
	scfg.OnSnapshot(raftstore.SnapshotEvent{Kind: raftstore.SnapshotInstalled})
	if diff := cmp.Diff([]string{"cp-1 installed"}, got); diff != "" {
		t.Errorf("snapshot events (-want +got):\n%s", diff)
	}
}

func TestParseRaftParams(t *testing.T) {
	p, err := ParseRaftParams(map[string]string{"snapshotThreshold": "64", "heartbeatTimeout": "700ms"})
	if err != nil {
		t.Fatal(err)
	}
	if want := (RaftParams{SnapshotThreshold: 64, HeartbeatTimeout: 700 * time.Millisecond}); p != want {
		t.Errorf("parsed %+v, want %+v", p, want)
	}
	for _, bad := range []map[string]string{{"snapshots": "1"}, {"trailingLogs": "many"}, {"commitTimeout": "5"}} {
		if _, err := ParseRaftParams(bad); err == nil {
			t.Errorf("ParseRaftParams(%v) succeeded", bad)
		}
	}
	base := RaftParams{SnapshotThreshold: 9, TrailingLogs: 3, CommitTimeout: time.Millisecond}
	if got, want := base.With(p), (RaftParams{SnapshotThreshold: 64, TrailingLogs: 3, CommitTimeout: time.Millisecond, HeartbeatTimeout: 700 * time.Millisecond}); got != want {
		t.Errorf("With: %+v, want %+v", got, want)
	}
}
