package raftstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"k8s.io/utils/clock"
)

// Member is one voting member of the static bootstrap membership.
type Member struct {
	// ID is the raft server ID; unique within the membership.
	ID string `json:"id"`
	// RaftAddr is the address other members dial (through Config.Dial) to reach
	// this member's RaftListener.
	RaftAddr string `json:"raftAddr"`
	// ForwardAddr is the address other members dial to reach this member's
	// ForwardListener when it is the leader.
	ForwardAddr string `json:"forwardAddr"`
}

// Config configures one member of a store. Zero durations and sizes mean the
// default from DefaultConfig; Open fills them in before validating.
type Config struct {
	// ID is this member's ID; it must appear in Members.
	ID string
	// Members is the static membership the cluster is bootstrapped with: usually
	// 1, 3 or 5 members. Every member must be given the same list.
	Members []Member
	// Bootstrap bootstraps the cluster from Members when this member has no
	// existing raft state. A member that already has state (a durable member
	// being restarted) is never bootstrapped again, so passing true on every
	// start is safe.
	Bootstrap bool

	// Durable keeps the raft log, the stable store and snapshots in DataDir
	// (bbolt plus file snapshots, fsynced on every write). Otherwise everything
	// lives in memory and is lost on Close.
	Durable bool
	// DataDir holds durable state; required when Durable. Open locks it
	// (another Open fails with ErrDataDirInUse naming the holder's pid) and
	// records the bootstrap membership in it (MembersFile): reopening it
	// with other Members fails with a *MembershipError.
	DataDir string

	// RaftListener accepts raft traffic from other members. Open takes
	// ownership: Close closes it.
	RaftListener net.Listener
	// ForwardListener accepts requests forwarded by followers. Open takes
	// ownership: Close closes it.
	ForwardListener net.Listener
	// Dial opens a connection to another member's RaftAddr or ForwardAddr. All
	// traffic between members goes through RaftListener, ForwardListener and
	// Dial, so whoever provides them can partition the cluster. The returned
	// conns must honour deadlines: that is how a black-holed link is noticed.
	Dial func(ctx context.Context, addr string) (net.Conn, error)

	// HeartbeatTimeout, ElectionTimeout, LeaderLeaseTimeout and CommitTimeout
	// are raft's timings; they must satisfy
	// 5ms <= LeaderLeaseTimeout <= HeartbeatTimeout <= ElectionTimeout.
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
	// TransportTimeout bounds every raft RPC's I/O (and each dial), so a
	// black-holed link costs at most this long before raft retries.
	TransportTimeout time.Duration

	// ForwardTimeout bounds one forwarded request (dial, send, wait for the
	// reply) on top of the caller's context.
	ForwardTimeout time.Duration
	// ForwardDialTimeout bounds dialing the leader's ForwardAddr. A dial that
	// fails is a request that was definitely not sent.
	ForwardDialTimeout time.Duration
	// LeaderWait is how long a request waits for a reachable leader before it
	// gives up with ErrUnavailable.
	LeaderWait time.Duration

	// SnapshotThreshold is the number of log entries after which raft takes a
	// snapshot; SnapshotInterval is how often it checks; TrailingLogs is how
	// many entries it keeps after a snapshot (a follower further behind than
	// that is sent the snapshot).
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	TrailingLogs      uint64
	// OnSnapshot, if set, is told of every snapshot this member takes,
	// installs from the leader or restores from its own disk as it starts
	// (the counts are in Store.SnapshotStats). It is called from raft's
	// goroutines, possibly concurrently, and must not block.
	OnSnapshot func(SnapshotEvent)

	// WatchWindow is the number of most recent events (of all resources) kept
	// for resuming watches. A watcher that falls more than WatchWindow events
	// behind is closed.
	WatchWindow int
	// Indexes names, per resource, the index its watches and lists can be
	// narrowed by (ByIndex), as kube-apiserver's watch cache indexes pods by
	// spec.nodeName: with it, an event is queued only for the watchers of its
	// object's old and new index values, not for every watcher of the
	// resource. Every member must be given the same functions.
	Indexes map[string]IndexFunc

	// Clock provides creationTimestamp for created objects; nil means the real
	// clock.
	Clock clock.PassiveClock
	// NewUID returns the metadata.uid of a created object; nil means a random
	// UUID. It is called concurrently.
	NewUID func() string
	// Logger receives the store's logs; nil discards them. Raft's own log lines
	// are passed on at debug level, because partitions make raft log an error
	// for every failed heartbeat.
	Logger *slog.Logger

	// StaleReads is a PLANTED BUG for the bug zoo, off by default: Get and
	// List on this member are served from its local state, without forwarding
	// to the leader and without any barrier or leadership check, so a follower
	// (or a deposed leader) cut off from the majority serves stale reads and
	// the linearizability checker must catch it.
	StaleReads bool
}

// Defaults. The raft timings decide how long a failover takes and whether a
// busy machine makes the leader flap, and a harness's control plane must not
// flap because the machine is busy, or its faults are not the only faults.
// With 2 CPUs saturated by writers (with or without -race) a 50 ms lease
// made the leader step down in most 5 s runs and 100 ms in some. With twice
// as many CPU-bound goroutines as CPUs besides the writers
// (BenchmarkLeaderStability), 200 ms held a term through only 2 of 7 runs
// of 10 s (up to 4 elections and 110 failed writes in one); 500 ms held
// through all 7, with 2 more processes spinning on the machine too. A
// failover (BenchmarkFailover: the leader isolated until the other two
// elect one) takes about three heartbeat timeouts, since a follower refuses
// to pre-vote while it still knows a leader: 1.5 s on average (2.1 s at
// worst), against 0.6 s with 200 ms; etcd's defaults (1 s election timeout)
// take longer still. Heartbeats go out every tenth of the heartbeat timeout.
const (
	DefaultHeartbeatTimeout   = 500 * time.Millisecond
	DefaultElectionTimeout    = 500 * time.Millisecond
	DefaultLeaderLeaseTimeout = 500 * time.Millisecond
	DefaultCommitTimeout      = 5 * time.Millisecond
	DefaultTransportTimeout   = time.Second
	DefaultForwardTimeout     = 5 * time.Second
	DefaultForwardDialTimeout = 500 * time.Millisecond
	DefaultLeaderWait         = 2 * time.Second
	DefaultSnapshotThreshold  = 8192
	DefaultSnapshotInterval   = 30 * time.Second
	DefaultTrailingLogs       = 10240
	DefaultWatchWindow        = 10000
)

// DefaultConfig returns a Config with every timing and size set to its default
// and nothing else set.
func DefaultConfig() Config {
	return Config{
		HeartbeatTimeout:   DefaultHeartbeatTimeout,
		ElectionTimeout:    DefaultElectionTimeout,
		LeaderLeaseTimeout: DefaultLeaderLeaseTimeout,
		CommitTimeout:      DefaultCommitTimeout,
		TransportTimeout:   DefaultTransportTimeout,
		ForwardTimeout:     DefaultForwardTimeout,
		ForwardDialTimeout: DefaultForwardDialTimeout,
		LeaderWait:         DefaultLeaderWait,
		SnapshotThreshold:  DefaultSnapshotThreshold,
		SnapshotInterval:   DefaultSnapshotInterval,
		TrailingLogs:       DefaultTrailingLogs,
		WatchWindow:        DefaultWatchWindow,
	}
}

// withDefaults returns c with zero timings and sizes replaced by defaults and
// nil seams replaced by the real ones.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	setDur := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	setDur(&c.HeartbeatTimeout, d.HeartbeatTimeout)
	setDur(&c.ElectionTimeout, d.ElectionTimeout)
	setDur(&c.LeaderLeaseTimeout, d.LeaderLeaseTimeout)
	setDur(&c.CommitTimeout, d.CommitTimeout)
	setDur(&c.TransportTimeout, d.TransportTimeout)
	setDur(&c.ForwardTimeout, d.ForwardTimeout)
	setDur(&c.ForwardDialTimeout, d.ForwardDialTimeout)
	setDur(&c.LeaderWait, d.LeaderWait)
	setDur(&c.SnapshotInterval, d.SnapshotInterval)
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = d.SnapshotThreshold
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = d.TrailingLogs
	}
	if c.WatchWindow == 0 {
		c.WatchWindow = d.WatchWindow
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.NewUID == nil {
		c.NewUID = newUUID
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports every problem with c (after defaults are applied), one per
// line, naming the field.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if c.ID == "" {
		bad("ID is empty: set it to this member's ID")
	}
	if len(c.Members) == 0 {
		bad("Members is empty: list the bootstrap membership (1, 3 or 5 members)")
	}
	ids := map[string]bool{}
	addrs := map[string]bool{}
	self := false
	for i, m := range c.Members {
		switch {
		case m.ID == "":
			bad("Members[%d].ID is empty", i)
		case ids[m.ID]:
			bad("Members[%d].ID %q is listed twice", i, m.ID)
		}
		ids[m.ID] = true
		self = self || m.ID == c.ID
		for _, a := range []struct{ field, addr string }{{"RaftAddr", m.RaftAddr}, {"ForwardAddr", m.ForwardAddr}} {
			switch {
			case a.addr == "":
				bad("Members[%d].%s is empty", i, a.field)
			case addrs[a.addr]:
				bad("Members[%d].%s %q is used twice", i, a.field, a.addr)
			}
			addrs[a.addr] = true
		}
	}
	if c.ID != "" && len(c.Members) > 0 && !self {
		bad("ID %q is not in Members: add this member to the membership", c.ID)
	}
	if c.Durable && c.DataDir == "" {
		bad("DataDir is empty: a durable member needs a directory")
	}
	if c.RaftListener == nil {
		bad("RaftListener is nil: pass a bound listener for raft traffic")
	}
	if c.ForwardListener == nil {
		bad("ForwardListener is nil: pass a bound listener for forwarded requests")
	}
	if c.Dial == nil {
		bad("Dial is nil: pass a dialer to reach other members")
	}
	const minTiming = 5 * time.Millisecond
	if c.LeaderLeaseTimeout < minTiming || c.CommitTimeout < time.Millisecond {
		bad("LeaderLeaseTimeout must be at least %v and CommitTimeout at least 1ms", minTiming)
	}
	if c.LeaderLeaseTimeout > c.HeartbeatTimeout || c.HeartbeatTimeout > c.ElectionTimeout {
		bad("timings must satisfy LeaderLeaseTimeout (%v) <= HeartbeatTimeout (%v) <= ElectionTimeout (%v)",
			c.LeaderLeaseTimeout, c.HeartbeatTimeout, c.ElectionTimeout)
	}
	if c.SnapshotInterval < minTiming {
		bad("SnapshotInterval must be at least %v", minTiming)
	}
	if c.WatchWindow < 1 {
		bad("WatchWindow must be positive")
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"TransportTimeout", c.TransportTimeout}, {"ForwardTimeout", c.ForwardTimeout},
		{"ForwardDialTimeout", c.ForwardDialTimeout}, {"LeaderWait", c.LeaderWait}} {
		if d.v < 0 {
			bad("%s is negative", d.field)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("raftstore config: %w", errors.Join(errs...))
}

// member returns the member with the given ID.
func (c Config) member(id string) (Member, bool) {
	for _, m := range c.Members {
		if m.ID == id {
			return m, true
		}
	}
	return Member{}, false
}
