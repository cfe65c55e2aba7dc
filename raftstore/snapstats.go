package raftstore

import (
	"sync"
	"sync/atomic"
)

// SnapshotKind says what happened to a member's state with a snapshot.
type SnapshotKind string

// The kinds of snapshot event.
const (
	// SnapshotTaken: the member persisted a snapshot of its own state
	// (raft's threshold was crossed, or Store.Snapshot asked), after which
	// raft compacts its log down to TrailingLogs entries.
	SnapshotTaken SnapshotKind = "taken"
	// SnapshotInstalled: the member's state was replaced by a snapshot the
	// leader sent it, because the entries it lacked were no longer in the
	// leader's log (it lagged by more than TrailingLogs while partitioned,
	// killed or slow).
	SnapshotInstalled SnapshotKind = "installed"
	// SnapshotRestored: the member restored its own latest snapshot from
	// disk as it started (a durable member being restarted).
	SnapshotRestored SnapshotKind = "restored"
)

// SnapshotEvent is one snapshot taken, installed or restored by a member.
type SnapshotEvent struct {
	Kind SnapshotKind
	// Index is the raft index the snapshot covers: the highest
	// resourceVersion its state reflects.
	Index uint64
	// Objects is the number of objects in the snapshot.
	Objects int
}

// SnapshotStats counts a member's snapshots since it was opened.
type SnapshotStats struct {
	Taken     uint64 `json:"taken"`
	Installed uint64 `json:"installed"`
	Restored  uint64 `json:"restored"`
}

// SnapshotStats returns how many snapshots this member has taken, installed
// from the leader and restored on start since it was opened. Safe for
// concurrent use.
func (s *Store) SnapshotStats() SnapshotStats { return s.fsm.snaps.stats() }

// snapCounters counts an fsm's snapshots and passes each on to the store's
// OnSnapshot. raft restores a member's own snapshot inside raft.NewRaft, on
// the goroutine that opens the store, before it starts the goroutines that
// receive the leader's snapshots: so a restore before start is the member's
// own, and every one after it is an install. (Open calls start as soon as
// NewRaft returns; an install counted as a restore would need the leader's
// whole snapshot to arrive and be restored in between.)
type snapCounters struct {
	taken, installed, restored atomic.Uint64

	mu      sync.Mutex
	started bool
	hook    func(SnapshotEvent)
	early   []SnapshotEvent // restores before start, passed to hook by start
}

// start marks raft started and sets the hook, passing it the restores that
// happened while raft started.
func (c *snapCounters) start(hook func(SnapshotEvent)) {
	c.mu.Lock()
	c.started, c.hook = true, hook
	early := c.early
	c.early = nil
	c.mu.Unlock()
	if hook != nil {
		for _, e := range early {
			hook(e)
		}
	}
}

// restoredSnapshot counts a restore as an install or as the member's own.
func (c *snapCounters) restoredSnapshot(index uint64, objects int) {
	c.mu.Lock()
	e := SnapshotEvent{Kind: SnapshotRestored, Index: index, Objects: objects}
	if c.started {
		e.Kind = SnapshotInstalled
		c.installed.Add(1)
	} else {
		c.restored.Add(1)
		c.early = append(c.early, e)
	}
	hook := c.hook
	c.mu.Unlock()
	if hook != nil {
		hook(e)
	}
}

// tookSnapshot counts a snapshot persisted.
func (c *snapCounters) tookSnapshot(index uint64, objects int) {
	c.taken.Add(1)
	c.mu.Lock()
	hook := c.hook
	c.mu.Unlock()
	if hook != nil {
		hook(SnapshotEvent{Kind: SnapshotTaken, Index: index, Objects: objects})
	}
}

// snapshotTaken counts a snapshot f persisted, and snapshotRestored one it
// restored, unless f's store has stopped: a crashed member's abandoned raft
// instance (Store.Crash) may still finish one, into storage nobody reads.
func (f *fsm) snapshotTaken(index uint64, objects int) {
	if !f.stopped() {
		f.snaps.tookSnapshot(index, objects)
	}
}

func (f *fsm) snapshotRestored(index uint64, objects int) {
	if !f.stopped() {
		f.snaps.restoredSnapshot(index, objects)
	}
}

// stopped reports whether f's store was closed or crashed (its hub is).
func (f *fsm) stopped() bool {
	f.hub.mu.Lock()
	defer f.hub.mu.Unlock()
	return f.hub.closed
}

func (c *snapCounters) stats() SnapshotStats {
	return SnapshotStats{Taken: c.taken.Load(), Installed: c.installed.Load(), Restored: c.restored.Load()}
}
