package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/podsafe/podsafe/raftstore"
)

// RaftParams are the raft timings and snapshot sizes every member of a
// cluster runs with. A zero field means raftstore's default (see
// raftstore.Config). A run draws the ones its scenario leaves zero from its
// seed (Draw), as etcd's robustness scenarios draw their snapshot count and
// timing, so that runs explore snapshots and compaction rather than always
// running the defaults (8192 entries before a snapshot: a run of seconds
// would never take one).
type RaftParams struct {
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
	// SnapshotThreshold is how many new log entries make a member snapshot;
	// SnapshotInterval how often it checks (each wait drawn by raft from
	// [SnapshotInterval, 2·SnapshotInterval)); TrailingLogs how many entries
	// it keeps after a snapshot. A member lagging further behind than the
	// leader's log reaches is sent the leader's snapshot.
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	TrailingLogs      uint64

	_ struct{}
}

// The ranges Draw draws from. The timings are never below raftstore's
// defaults: shorter ones made the leader flap on a busy 2-CPU machine (see
// raftstore.DefaultHeartbeatTimeout), and a harness whose control plane
// flaps because the machine is busy injects faults it did not choose. They
// go up to half as long again, which still fails over within a few seconds.
// The snapshot sizes are drawn low, log-uniformly (half the thresholds
// below 45 entries, half the trailing logs below 23), so that a run of a
// few seconds takes snapshots even at podsafe test's 200 operations per
// second, and a member partitioned or killed for a second or two falls
// behind the leader's log and is sent one; the interval is
// drawn no lower than 100 ms, so that snapshots of a large state (every pod
// of a workload, encoded) do not take the machine.
const (
	MinDrawnTimeout       = raftstore.DefaultHeartbeatTimeout
	MaxDrawnTimeout       = raftstore.DefaultHeartbeatTimeout * 3 / 2
	MinDrawnCommitTimeout = raftstore.DefaultCommitTimeout
	MaxDrawnCommitTimeout = 25 * time.Millisecond
	MinDrawnThreshold     = 8
	MaxDrawnThreshold     = 256
	MinDrawnTrailingLogs  = 4
	MaxDrawnTrailingLogs  = 128
	MinDrawnInterval      = 100 * time.Millisecond
	MaxDrawnInterval      = time.Second
)

// Draw returns p with every zero field drawn from rng within its range
// (MinDrawn…, MaxDrawn…), consistent with the fields p sets: an election
// timeout is drawn no shorter than the heartbeat timeout, a leader lease no
// longer. It draws every field in a fixed order whatever p sets, so a field
// fixed by a scenario does not change the others a seed draws.
func (p RaftParams) Draw(rng *rand.Rand) RaftParams {
	ms := func(lo, hi time.Duration) time.Duration {
		lo, hi = lo.Round(time.Millisecond), hi.Round(time.Millisecond)
		if hi <= lo {
			return lo
		}
		return lo + time.Duration(rng.Int64N(int64((hi-lo)/time.Millisecond)+1))*time.Millisecond
	}
	logUniform := func(lo, hi float64) float64 {
		return math.Exp(math.Log(lo) + rng.Float64()*(math.Log(hi)-math.Log(lo)))
	}
	heartbeat := ms(MinDrawnTimeout, MaxDrawnTimeout)
	election := ms(MinDrawnTimeout, MaxDrawnTimeout)
	lease := ms(MinDrawnTimeout, MaxDrawnTimeout)
	commit := ms(MinDrawnCommitTimeout, MaxDrawnCommitTimeout)
	threshold := uint64(math.Round(logUniform(MinDrawnThreshold, MaxDrawnThreshold)))
	trailing := uint64(math.Round(logUniform(MinDrawnTrailingLogs, MaxDrawnTrailingLogs)))
	interval := time.Duration(logUniform(float64(MinDrawnInterval), float64(MaxDrawnInterval))).Round(time.Millisecond)

	set := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	// lease <= heartbeat <= election, whichever were given: a drawn one
	// moves to fit the given ones.
	if p.HeartbeatTimeout == 0 {
		heartbeat = max(heartbeat, p.LeaderLeaseTimeout)
		if p.ElectionTimeout != 0 {
			heartbeat = min(heartbeat, p.ElectionTimeout)
		}
		p.HeartbeatTimeout = heartbeat
	}
	if p.ElectionTimeout == 0 {
		p.ElectionTimeout = max(election, p.HeartbeatTimeout)
	}
	if p.LeaderLeaseTimeout == 0 {
		p.LeaderLeaseTimeout = min(lease, p.HeartbeatTimeout)
	}
	set(&p.CommitTimeout, commit)
	set(&p.SnapshotInterval, interval)
	if p.SnapshotThreshold == 0 {
		p.SnapshotThreshold = threshold
	}
	if p.TrailingLogs == 0 {
		p.TrailingLogs = trailing
	}
	return p
}

// Validate reports every problem with p, naming the field: the timings must
// be what raft accepts (with raftstore's defaults for the zero ones).
func (p RaftParams) Validate() error {
	d := raftstore.DefaultConfig()
	p.apply(&d)
	var errs []error
	if d.LeaderLeaseTimeout < 5*time.Millisecond || d.HeartbeatTimeout < 5*time.Millisecond || d.ElectionTimeout < 5*time.Millisecond {
		errs = append(errs, fmt.Errorf("raft timeouts must be at least 5ms"))
	}
	if d.LeaderLeaseTimeout > d.HeartbeatTimeout || d.HeartbeatTimeout > d.ElectionTimeout {
		errs = append(errs, fmt.Errorf("raft timeouts must satisfy leaderLeaseTimeout (%v) <= heartbeatTimeout (%v) <= electionTimeout (%v)",
			d.LeaderLeaseTimeout, d.HeartbeatTimeout, d.ElectionTimeout))
	}
	if d.CommitTimeout < time.Millisecond {
		errs = append(errs, fmt.Errorf("raft commitTimeout must be at least 1ms, got %v", d.CommitTimeout))
	}
	if d.SnapshotInterval < 5*time.Millisecond {
		errs = append(errs, fmt.Errorf("raft snapshotInterval must be at least 5ms, got %v", d.SnapshotInterval))
	}
	for _, v := range []struct {
		name string
		d    time.Duration
	}{{"heartbeatTimeout", p.HeartbeatTimeout}, {"electionTimeout", p.ElectionTimeout}, {"leaderLeaseTimeout", p.LeaderLeaseTimeout},
		{"commitTimeout", p.CommitTimeout}, {"snapshotInterval", p.SnapshotInterval}} {
		if v.d < 0 {
			errs = append(errs, fmt.Errorf("raft %s is negative: %v", v.name, v.d))
		}
	}
	return errors.Join(errs...)
}

// apply sets the fields p sets in cfg.
func (p RaftParams) apply(cfg *raftstore.Config) {
	setDur := func(v *time.Duration, d time.Duration) {
		if d != 0 {
			*v = d
		}
	}
	setDur(&cfg.HeartbeatTimeout, p.HeartbeatTimeout)
	setDur(&cfg.ElectionTimeout, p.ElectionTimeout)
	setDur(&cfg.LeaderLeaseTimeout, p.LeaderLeaseTimeout)
	setDur(&cfg.CommitTimeout, p.CommitTimeout)
	setDur(&cfg.SnapshotInterval, p.SnapshotInterval)
	if p.SnapshotThreshold != 0 {
		cfg.SnapshotThreshold = p.SnapshotThreshold
	}
	if p.TrailingLogs != 0 {
		cfg.TrailingLogs = p.TrailingLogs
	}
}

// configureRaft gives member host's store config the cluster's raft
// params and snapshot observer.
func (c *Cluster) configureRaft(scfg *raftstore.Config, host string) {
	c.cfg.Raft.apply(scfg)
	scfg.WatchWindow = c.cfg.WatchWindow
	if f := c.cfg.OnSnapshot; f != nil {
		scfg.OnSnapshot = func(e raftstore.SnapshotEvent) { f(host, e) }
	}
}

// IsZero reports whether p sets nothing (every member runs raftstore's
// defaults).
func (p RaftParams) IsZero() bool { return p.Attrs() == nil }

// Attrs are the fields p sets, by their JSON names, as a history log
// line's attributes; nil when it sets none.
func (p RaftParams) Attrs() map[string]string {
	var out map[string]string
	for _, f := range p.fields() {
		if f.set {
			if out == nil {
				out = map[string]string{}
			}
			out[f.name] = f.text
		}
	}
	return out
}

type raftField struct {
	name, text string
	set        bool
}

func (p RaftParams) fields() []raftField {
	dur := func(name string, d time.Duration) raftField { return raftField{name, d.String(), d != 0} }
	num := func(name string, n uint64) raftField { return raftField{name, strconv.FormatUint(n, 10), n != 0} }
	return []raftField{
		dur("heartbeatTimeout", p.HeartbeatTimeout), dur("electionTimeout", p.ElectionTimeout),
		dur("leaderLeaseTimeout", p.LeaderLeaseTimeout), dur("commitTimeout", p.CommitTimeout),
		num("snapshotThreshold", p.SnapshotThreshold), dur("snapshotInterval", p.SnapshotInterval),
		num("trailingLogs", p.TrailingLogs),
	}
}

// With returns p with the fields q sets replaced by q's.
func (p RaftParams) With(q RaftParams) RaftParams {
	var cfg raftstore.Config
	p.apply(&cfg)
	q.apply(&cfg)
	return RaftParams{
		HeartbeatTimeout: cfg.HeartbeatTimeout, ElectionTimeout: cfg.ElectionTimeout,
		LeaderLeaseTimeout: cfg.LeaderLeaseTimeout, CommitTimeout: cfg.CommitTimeout,
		SnapshotThreshold: cfg.SnapshotThreshold, SnapshotInterval: cfg.SnapshotInterval, TrailingLogs: cfg.TrailingLogs,
	}
}

// ParseRaftParams reads raft parameters given as name=value pairs, the
// names and values as a scenario spells them (snapshotThreshold=64,
// heartbeatTimeout=700ms); an unknown name or a bad value is an error
// naming it.
func ParseRaftParams(kv map[string]string) (RaftParams, error) {
	obj := map[string]any{}
	for k, v := range kv {
		switch k {
		case "snapshotThreshold", "trailingLogs":
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return RaftParams{}, fmt.Errorf("raft %s: %q is not a count", k, v)
			}
			obj[k] = n
		default:
			obj[k] = v
		}
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return RaftParams{}, err
	}
	var p RaftParams
	if err := json.Unmarshal(b, &p); err != nil {
		return RaftParams{}, fmt.Errorf("%w (names: heartbeatTimeout, electionTimeout, leaderLeaseTimeout, commitTimeout, snapshotThreshold, snapshotInterval, trailingLogs)", err)
	}
	return p, nil
}

// raftParamsJSON is RaftParams as a scenario spells it: durations as
// strings ("650ms").
type raftParamsJSON struct {
	HeartbeatTimeout   string `json:"heartbeatTimeout,omitempty"`
	ElectionTimeout    string `json:"electionTimeout,omitempty"`
	LeaderLeaseTimeout string `json:"leaderLeaseTimeout,omitempty"`
	CommitTimeout      string `json:"commitTimeout,omitempty"`
	SnapshotThreshold  uint64 `json:"snapshotThreshold,omitempty"`
	SnapshotInterval   string `json:"snapshotInterval,omitempty"`
	TrailingLogs       uint64 `json:"trailingLogs,omitempty"`
}

// MarshalJSON writes the fields p sets, durations as strings such as
// "650ms".
func (p RaftParams) MarshalJSON() ([]byte, error) {
	d := func(v time.Duration) string {
		if v == 0 {
			return ""
		}
		return v.String()
	}
	return json.Marshal(raftParamsJSON{
		HeartbeatTimeout: d(p.HeartbeatTimeout), ElectionTimeout: d(p.ElectionTimeout),
		LeaderLeaseTimeout: d(p.LeaderLeaseTimeout), CommitTimeout: d(p.CommitTimeout),
		SnapshotThreshold: p.SnapshotThreshold, SnapshotInterval: d(p.SnapshotInterval), TrailingLogs: p.TrailingLogs,
	})
}

// UnmarshalJSON reads what MarshalJSON writes, strictly: an unknown field
// or a duration without a unit is an error naming it.
func (p *RaftParams) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var j raftParamsJSON
	if err := dec.Decode(&j); err != nil {
		return fmt.Errorf("raft: %w", err)
	}
	var errs []error
	d := func(name, s string) time.Duration {
		if s == "" {
			return 0
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("raft %s: %w", name, err))
		}
		return v
	}
	*p = RaftParams{
		HeartbeatTimeout: d("heartbeatTimeout", j.HeartbeatTimeout), ElectionTimeout: d("electionTimeout", j.ElectionTimeout),
		LeaderLeaseTimeout: d("leaderLeaseTimeout", j.LeaderLeaseTimeout), CommitTimeout: d("commitTimeout", j.CommitTimeout),
		SnapshotThreshold: j.SnapshotThreshold, SnapshotInterval: d("snapshotInterval", j.SnapshotInterval), TrailingLogs: j.TrailingLogs,
	}
	return errors.Join(errs...)
}
