package raftstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/podsafe/podsafe/internal/dirlock"
)

// Store is one member of a raft-replicated object store. Every method is safe
// for concurrent use. Writes and reads go to the leader (forwarded by
// followers); watches are served by every member from its own event window.
type Store struct {
	cfg    Config
	log    *slog.Logger
	raft   *raft.Raft
	fsm    *fsm
	hub    *hub
	trans  *raft.NetworkTransport
	stream *streamLayer
	disk   *disk         // nil in memory
	lock   *dirlock.Lock // the data directory's; nil in memory

	fwdServer *http.Server
	fwdClient *forwardClient

	// barrierTerm is the leader term in which this member last committed a
	// barrier; reads served by the leader need one per term (see readIndex).
	barrierTerm atomic.Uint64
	// processed is an index up to which the state machine is known to have
	// consumed every entry, commands or not (see waitApplied).
	processed atomic.Uint64
	// logs is raft's log, read to tell commands from raft's own entries.
	logs raft.LogStore

	// staleReads is the planted stale-read bug, switchable at run time so a
	// cluster can start correctly and then misbehave (see Config.StaleReads).
	staleReads atomic.Bool

	observer   *raft.Observer
	leaderMu   sync.Mutex
	leaderWake chan struct{} // closed and replaced on every leader change

	closing   chan struct{}
	life      context.Context // cancelled by Close, ending calls in flight
	endLife   context.CancelFunc
	closeOnce sync.Once
	closeErr  error
	wg        sync.WaitGroup
	// reaped is closed once a crashed member's abandoned raft instance has
	// stopped (at once by Close).
	reaped chan struct{}
}

// Open starts a member as configured. With Bootstrap it also bootstraps the
// cluster from Members unless this member already has raft state. Open does
// not wait for a leader; see WaitLeader.
//
// Open owns both listeners from the start: Close closes them, and so does
// Open when it fails.
func Open(cfg Config) (*Store, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		closeListeners(cfg)
		return nil, err
	}
	self, _ := cfg.member(cfg.ID)
	log := cfg.Logger.With("member", cfg.ID)
	hlog := newRaftLogger(log, "raft")

	h := newHub(cfg.WatchWindow, cfg.Indexes)
	s := &Store{
		cfg:        cfg,
		log:        log,
		hub:        h,
		fsm:        newFSM(h, log),
		leaderWake: make(chan struct{}),
		closing:    make(chan struct{}),
		reaped:     make(chan struct{}),
	}
	s.life, s.endLife = context.WithCancel(context.Background())

	opened := false
	defer func() {
		if !opened {
			closeListeners(cfg)
			if s.lock != nil {
				s.lock.Release()
			}
		}
	}()

	var (
		logs   raft.LogStore
		stable raft.StableStore
		snaps  raft.SnapshotStore
	)
	if cfg.Durable {
		if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
			return nil, fmt.Errorf("opening data dir: %w", err)
		}
		// Our own lock before bolt's: bolt's waits out its timeout and
		// then says only "timeout"; ours says at once who holds it.
		lock, err := dirlock.Acquire(cfg.DataDir)
		if err != nil {
			return nil, fmt.Errorf("opening data dir: %w", err)
		}
		s.lock = lock
		bolt, err := raftboltdb.New(raftboltdb.Options{
			Path:        filepath.Join(cfg.DataDir, "raft.db"),
			BoltOptions: &bbolt.Options{Timeout: time.Second},
		})
		if err != nil {
			return nil, fmt.Errorf("opening raft log in %s: %w", cfg.DataDir, err)
		}
		fss, err := raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, 2, hlog)
		if err != nil {
			bolt.Close()
			return nil, fmt.Errorf("opening snapshot store in %s: %w", cfg.DataDir, err)
		}
		s.disk = newDisk(bolt, fss, log)
		cache, err := raft.NewLogCache(512, s.disk)
		if err != nil {
			s.disk.close()
			return nil, fmt.Errorf("creating log cache: %w", err)
		}
		logs, stable, snaps = cache, s.disk, s.disk
	} else {
		mem := raft.NewInmemStore()
		logs, stable, snaps = mem, mem, raft.NewInmemSnapshotStore()
	}

	s.stream = newStreamLayer(cfg.RaftListener, self.RaftAddr, cfg.Dial)
	s.trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  s.stream,
		MaxPool: 3,
		Timeout: cfg.TransportTimeout,
		Logger:  hlog,
	})
	fail := func(err error) (*Store, error) {
		s.endLife()
		s.stream.shutdown()
		s.trans.Close()
		if s.disk != nil {
			s.disk.close()
		}
		return nil, err
	}

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.CommitTimeout = cfg.CommitTimeout
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.TrailingLogs = cfg.TrailingLogs
	rc.BatchApplyCh = true
	rc.Logger = hlog
	if err := raft.ValidateConfig(rc); err != nil {
		return fail(fmt.Errorf("raft config: %w", err))
	}

	if cfg.Bootstrap {
		existing, err := raft.HasExistingState(logs, stable, snaps)
		if err != nil {
			return fail(fmt.Errorf("checking for existing raft state: %w", err))
		}
		if existing && cfg.Durable {
			if err := checkMembers(cfg.DataDir, cfg.Members); err != nil {
				return fail(err)
			}
		}
		if !existing && cfg.Durable {
			if err := recordMembers(cfg.DataDir, cfg.Members); err != nil {
				return fail(err)
			}
		}
		if !existing {
			var conf raft.Configuration
			for _, m := range cfg.Members {
				conf.Servers = append(conf.Servers, raft.Server{
					Suffrage: raft.Voter, ID: raft.ServerID(m.ID), Address: raft.ServerAddress(m.RaftAddr),
				})
			}
			if err := raft.BootstrapCluster(rc, logs, stable, snaps, transport{s.trans}, conf); err != nil {
				return fail(fmt.Errorf("bootstrapping cluster: %w", err))
			}
			log.Info("bootstrapped cluster", "members", len(cfg.Members))
		}
	}

	s.logs = logs
	s.nameFailpoints()
	r, err := raft.NewRaft(rc, s.fsm, logs, stable, snaps, transport{s.trans})
	if err != nil {
		return fail(fmt.Errorf("starting raft: %w", err))
	}
	s.raft = r
	s.fsm.snaps.start(cfg.OnSnapshot) // restores from here on are the leader's snapshots

	obsCh := make(chan raft.Observation, 16)
	s.observer = raft.NewObserver(obsCh, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	r.RegisterObserver(s.observer)
	s.wg.Add(1)
	go s.watchLeader(obsCh)

	s.fwdClient = newForwardClient(cfg)
	s.fwdServer = &http.Server{
		Handler:           s.forwardHandler(),
		ReadHeaderTimeout: cfg.ForwardTimeout,
		IdleTimeout:       time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.fwdServer.Serve(cfg.ForwardListener); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("forward server stopped", "err", err)
		}
	}()
	opened = true
	s.staleReads.Store(cfg.StaleReads)
	log.Info("opened store", "durable", cfg.Durable, "stale_reads", cfg.StaleReads)
	return s, nil
}

func closeListeners(cfg Config) {
	for _, ln := range []net.Listener{cfg.RaftListener, cfg.ForwardListener} {
		if ln != nil {
			_ = ln.Close()
		}
	}
}

// watchLeader logs leader changes and wakes WaitLeader callers.
func (s *Store) watchLeader(ch <-chan raft.Observation) {
	defer s.wg.Done()
	for {
		select {
		case <-s.closing:
			return
		case o := <-ch:
			lo := o.Data.(raft.LeaderObservation)
			s.log.Info("leader changed", "leader", string(lo.LeaderID), "term", s.raft.CurrentTerm())
			s.wakeLeaderWaiters()
		}
	}
}

func (s *Store) wakeLeaderWaiters() {
	s.leaderMu.Lock()
	close(s.leaderWake)
	s.leaderWake = make(chan struct{})
	s.leaderMu.Unlock()
}

// leaderChanged returns a channel closed at the next leader change.
func (s *Store) leaderChanged() <-chan struct{} {
	s.leaderMu.Lock()
	defer s.leaderMu.Unlock()
	return s.leaderWake
}

// Close stops the member cleanly: raft shuts down and everything it wrote
// is synced before the data directory is released. It does not transfer
// leadership or leave the membership. Open watches are closed; calls in
// flight fail. Close closes both listeners. After Crash it does nothing.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		defer close(s.reaped)
		close(s.closing)
		s.endLife()
		var errs []error
		s.raft.DeregisterObserver(s.observer)
		// Break raft's conns first so that no goroutine waits out a
		// TransportTimeout on a black-holed link before shutdown completes.
		s.stream.shutdown()
		if err := s.raft.Shutdown().Error(); err != nil {
			errs = append(errs, fmt.Errorf("shutting down raft: %w", err))
		}
		if err := s.trans.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing raft transport: %w", err))
		}
		if err := s.fwdServer.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing forward server: %w", err))
		}
		s.fwdClient.close()
		s.hub.close()
		if s.disk != nil {
			if err := s.disk.close(); err != nil {
				errs = append(errs, fmt.Errorf("closing raft log: %w", err))
			}
		}
		s.wg.Wait()
		if s.lock != nil {
			// Last: the directory is free once nothing of this store
			// touches it.
			if err := s.lock.Release(); err != nil {
				errs = append(errs, fmt.Errorf("unlocking data dir: %w", err))
			}
		}
		s.closeErr = errors.Join(errs...)
		s.log.Info("closed store")
	})
	return s.closeErr
}

// Crash stops the member as a power failure would, at one instant and with
// no shutdown path. Its network dies first, so that nothing it does
// afterwards reaches another member or a client; then its disk freezes,
// keeping only what was synced (see disk), and the data directory is
// released: the member can be opened again at once, from exactly what was
// durable. Raft is not shut down but abandoned: it may run on for a moment,
// unreachable, against an in-memory copy of its storage, until it is reaped
// in the background (Reaped). Calls in flight fail and open watches end.
// Crash closes both listeners. After Close (or a Crash) it does nothing and
// returns what that returned.
func (s *Store) Crash() error {
	s.closeOnce.Do(func() {
		close(s.closing)
		s.endLife()
		// The network before the disk: an acknowledgement sent after the
		// disk froze would vouch for an entry the disk never kept.
		s.stream.shutdown()
		_ = s.fwdServer.Close() // the forward listener and its conns
		var (
			errs []error
			lost int
		)
		if s.disk != nil {
			var err error
			if lost, err = s.disk.crash(); err != nil {
				errs = append(errs, fmt.Errorf("freezing raft log: %w", err))
			}
		}
		if s.lock != nil {
			if err := s.lock.Release(); err != nil {
				errs = append(errs, fmt.Errorf("unlocking data dir: %w", err))
			}
		}
		s.fwdClient.close()
		s.hub.close()
		s.closeErr = errors.Join(errs...)
		s.log.Info("crashed store", "unsynced_entries_lost", lost)
		go s.reap()
	})
	return s.closeErr
}

// reap stops a crashed member's abandoned raft instance. Nothing it does can
// reach the disk or the network any more, so stopping it is only tidying up.
func (s *Store) reap() {
	defer close(s.reaped)
	s.raft.DeregisterObserver(s.observer)
	if err := s.raft.Shutdown().Error(); err != nil {
		s.log.Debug("reaping crashed raft", "err", err)
	}
	_ = s.trans.Close()
	s.wg.Wait()
}

// Reaped returns a channel closed once the member has stopped for good:
// after Close returns, or once Crash's abandoned raft instance is reaped.
func (s *Store) Reaped() <-chan struct{} { return s.reaped }

func (s *Store) closed() bool {
	select {
	case <-s.closing:
		return true
	default:
		return false
	}
}

// ID returns this member's ID.
func (s *Store) ID() string { return s.cfg.ID }

// LeaderID returns the ID of the leader as this member knows it, or "" if it
// knows none. A partitioned member may name a leader that has since lost
// leadership.
func (s *Store) LeaderID() string {
	_, id := s.raft.LeaderWithID()
	return string(id)
}

// IsLeader reports whether this member currently believes it is the leader.
func (s *Store) IsLeader() bool { return s.raft.State() == raft.Leader }

// AppliedIndex returns the raft index of the last change applied to this
// member's objects (the highest resourceVersion it can serve).
func (s *Store) AppliedIndex() uint64 { return s.fsm.appliedIndex() }

// WaitLeader blocks until this member knows a leader, ctx ends or the store
// closes.
func (s *Store) WaitLeader(ctx context.Context) error {
	for {
		changed := s.leaderChanged()
		if s.LeaderID() != "" {
			return nil
		}
		if s.closed() {
			return ErrClosed
		}
		// The observer can miss a change that happened before it was
		// registered; a short poll covers that.
		t := time.NewTimer(10 * time.Millisecond)
		select {
		case <-changed:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("waiting for a leader: %w", ctx.Err())
		case <-s.closing:
		}
		t.Stop()
	}
}

// Snapshot makes raft snapshot the state now and compact its log. A store with
// nothing new since the last snapshot is not an error.
func (s *Store) Snapshot() error {
	err := s.raft.Snapshot().Error()
	if err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return fmt.Errorf("snapshotting: %w", err)
	}
	return nil
}

// TransferLeadership asks this member, if it leads, to hand leadership to
// another member. It is for fault injection; ordinary writes never need it.
func (s *Store) TransferLeadership(ctx context.Context) error {
	if err := waitFuture(ctx, s.raft.LeadershipTransfer()); err != nil {
		return fmt.Errorf("transferring leadership: %w", err)
	}
	return nil
}

// Stats returns raft's statistics (state, term, commit_index, applied_index,
// last_snapshot_index, ...) plus the store's: member, leader,
// fsm_applied_index, objects, watch_floor (oldest resumable resourceVersion),
// watch_last, watchers, stale_reads.
func (s *Store) Stats() map[string]string {
	st := s.raft.Stats()
	floor, last, watchers := s.hub.stats()
	st["member"] = s.cfg.ID
	st["leader"] = s.LeaderID()
	st["fsm_applied_index"] = strconv.FormatUint(s.fsm.appliedIndex(), 10)
	st["objects"] = strconv.Itoa(s.fsm.count())
	st["watch_floor"] = strconv.FormatUint(floor, 10)
	st["watch_last"] = strconv.FormatUint(last, 10)
	st["watchers"] = strconv.Itoa(watchers)
	st["stale_reads"] = strconv.FormatBool(s.staleReads.Load())
	return st
}

// SetApplyDelay makes this member's state machine wait d before applying
// each committed command (0 switches it off): an injected fault, a member
// whose disk or CPU is slow, so that its state lags the others'. Safe for
// concurrent use.
func (s *Store) SetApplyDelay(d time.Duration) { s.fsm.delay.Store(int64(d)) }

// SetStaleReads switches the planted stale-read bug (Config.StaleReads) on or
// off while the member runs. Safe for concurrent use.
func (s *Store) SetStaleReads(on bool) { s.staleReads.Store(on) }
