package raftstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/pingcap/failpoint"

	"github.com/podsafe/podsafe/internal/fpctx"
)

// disk is a durable member's storage as raft sees it: its log and stable
// store (one bolt file) and its snapshot directory, modelled as a disk with a
// volatile write-back cache in front of it. What raft wrote becomes durable
// only once synced; a crash keeps the durable part and loses the rest, as a
// power failure does to a file system's page cache (etcd's robustness suite
// gets the same from LazyFS).
//
// The correct path syncs before it acknowledges: appended entries are
// written to the cache, then synced by a bolt commit (bolt fsyncs at every
// commit) before StoreLogs returns, so a crash in between loses only entries
// raft has not acknowledged; a snapshot is synced when its sink closes. The
// planted bug
// "ack-before-sync" (failpoint ackBeforeSync) acknowledges appended entries
// while they are still in the cache and writes them back later, which a
// crash then shows.
//
// crash freezes the disk at one instant. It waits for the calls in flight
// (a bolt transaction is atomic), drops what was not synced, cancels the
// snapshots not yet closed and closes the bolt file, so that the member can
// open its directory again at once and find exactly what was durable. The
// raft instance that used the disk is abandoned, not stopped: it goes on
// reading and writing an in-memory copy of what it saw, never the directory,
// and never gets an error, since raft panics on some storage errors (failing
// to save its term, to read an entry it committed).
//
// Every method is safe for concurrent use.
type disk struct {
	bolt  *raftboltdb.BoltStore
	snaps *raft.FileSnapshotStore
	log   *slog.Logger

	// mu is held for reading by every call that reaches the bolt file or
	// the snapshot directory, and for writing by crash and close, which
	// therefore wait for the calls in flight.
	mu sync.RWMutex
	// frozen is the abandoned instance's view once crashed (or the empty
	// store of a closed disk): nil while the disk is live, set once under mu.
	frozen      *raft.InmemStore
	frozenSnaps *raft.InmemSnapshotStore

	// keys are the stable-store keys raft has read or written, each noting
	// whether it holds a uint64 (raft's InmemStore keeps those apart), so
	// that a crash can copy them into the frozen view.
	keysMu sync.Mutex
	keys   map[string]bool

	// sinks are the snapshots being written, not yet closed.
	sinksMu sync.Mutex
	sinks   map[*diskSink]struct{}

	// cache holds appended entries written but not yet synced: for a moment
	// on the correct path, until the write-back under ackBeforeSync;
	// flushMu orders their syncs.
	cache       writeBackCache
	flushMu     sync.Mutex
	writeBack   time.Duration
	flusherOnce sync.Once
	stopFlusher chan struct{}
	ackUnsynced atomic.Bool     // test switch with the failpoint's effect
	beforeSync  func()          // test hook: runs between an append's write and its sync
	fp          context.Context // the member's identity for failpoint markers (fpctx)
}

// defaultWriteBack is how long an entry acknowledged before its sync waits
// in the cache: long enough that a power failure finds acknowledged entries
// there, as a lazy disk's write-back would.
const defaultWriteBack = time.Second

var (
	_ raft.LogStore      = (*disk)(nil)
	_ raft.StableStore   = (*disk)(nil)
	_ raft.SnapshotStore = (*disk)(nil)
)

func newDisk(bolt *raftboltdb.BoltStore, snaps *raft.FileSnapshotStore, log *slog.Logger) *disk {
	return &disk{
		bolt: bolt, snaps: snaps, log: log,
		keys:        map[string]bool{},
		sinks:       map[*diskSink]struct{}{},
		cache:       writeBackCache{logs: map[uint64]*raft.Log{}},
		writeBack:   defaultWriteBack,
		stopFlusher: make(chan struct{}),
		fp:          fpctx.For(fpctx.Unnamed),
	}
}

// live takes the read lock and reports whether the disk is live. When it is
// not, the lock is already released and the caller uses d.frozen.
func (d *disk) live() bool {
	d.mu.RLock()
	if d.frozen == nil {
		return true
	}
	d.mu.RUnlock()
	return false
}

// FirstIndex returns the first index of the log (0 when it is empty).
func (d *disk) FirstIndex() (uint64, error) {
	if !d.live() {
		return d.frozen.FirstIndex()
	}
	defer d.mu.RUnlock()
	first, err := d.bolt.FirstIndex()
	if err != nil || first != 0 {
		return first, err
	}
	lo, _ := d.cache.bounds()
	return lo, nil
}

// LastIndex returns the last index of the log, cached entries included.
func (d *disk) LastIndex() (uint64, error) {
	if !d.live() {
		return d.frozen.LastIndex()
	}
	defer d.mu.RUnlock()
	last, err := d.bolt.LastIndex()
	if err != nil {
		return 0, err
	}
	_, hi := d.cache.bounds()
	return max(last, hi), nil
}

// GetLog reads an entry, from the cache if it has not been written back.
func (d *disk) GetLog(index uint64, log *raft.Log) error {
	if !d.live() {
		return d.frozen.GetLog(index, log)
	}
	defer d.mu.RUnlock()
	if l, ok := d.cache.get(index); ok {
		*log = *l
		return nil
	}
	return d.bolt.GetLog(index, log)
}

// StoreLog appends one entry (see StoreLogs).
func (d *disk) StoreLog(log *raft.Log) error { return d.StoreLogs([]*raft.Log{log}) }

// StoreLogs appends entries and returns once they are durable: raft then
// acknowledges them (to its leader, or counts them toward commitment). The
// entries are written first and synced after, so a crash between the two
// loses them, unacknowledged.
func (d *disk) StoreLogs(logs []*raft.Log) error {
	if !d.live() {
		return d.frozen.StoreLogs(logs)
	}
	d.cache.put(logs)
	// Planted bug "ack-before-sync" (bug zoo): the entries are
	// acknowledged from the cache and written back later, so a power
	// failure loses entries raft has acknowledged (breaks STORE-LIN).
	lazy := d.ackUnsynced.Load()
	failpoint.InjectContext(d.fp, "ackBeforeSync", func() { lazy = true })
	if lazy {
		d.flusherOnce.Do(func() { go d.flusher() })
		d.mu.RUnlock()
		return nil
	}
	d.mu.RUnlock()
	// The crash instant may fall here, before the sync.
	if d.beforeSync != nil {
		d.beforeSync()
	}
	if !d.live() {
		// Lost (or, closed, synced by the close); either way raft's answer
		// can no longer leave the member.
		return nil
	}
	defer d.mu.RUnlock()
	// The entries cached earlier go first: the disk keeps raft's order.
	return d.flushLocked()
}

// DeleteRange removes entries min..max: raft compacts its log after a
// snapshot and truncates a follower's conflicting suffix. Cached entries are
// written back first, so the deletion applies to them too.
func (d *disk) DeleteRange(lo, hi uint64) error {
	if !d.live() {
		return d.frozen.DeleteRange(lo, hi)
	}
	defer d.mu.RUnlock()
	if err := d.flushLocked(); err != nil {
		return err
	}
	return d.bolt.DeleteRange(lo, hi)
}

func (d *disk) noteKey(k []byte, isUint bool) {
	d.keysMu.Lock()
	d.keys[string(k)] = isUint
	d.keysMu.Unlock()
}

// Set stores a stable-store key (raft's vote), synced before it returns.
func (d *disk) Set(k, v []byte) error {
	if !d.live() {
		return d.frozen.Set(k, v)
	}
	defer d.mu.RUnlock()
	d.noteKey(k, false)
	return d.bolt.Set(k, v)
}

// Get reads a stable-store key.
func (d *disk) Get(k []byte) ([]byte, error) {
	if !d.live() {
		return d.frozen.Get(k)
	}
	defer d.mu.RUnlock()
	d.noteKey(k, false)
	return d.bolt.Get(k)
}

// SetUint64 stores a stable-store counter (raft's term), synced before it
// returns.
func (d *disk) SetUint64(k []byte, v uint64) error {
	if !d.live() {
		return d.frozen.SetUint64(k, v)
	}
	defer d.mu.RUnlock()
	d.noteKey(k, true)
	return d.bolt.SetUint64(k, v)
}

// GetUint64 reads a stable-store counter.
func (d *disk) GetUint64(k []byte) (uint64, error) {
	if !d.live() {
		return d.frozen.GetUint64(k)
	}
	defer d.mu.RUnlock()
	d.noteKey(k, true)
	return d.bolt.GetUint64(k)
}

// Create starts a snapshot. It becomes durable when its sink closes; a crash
// before that cancels it.
func (d *disk) Create(version raft.SnapshotVersion, index, term uint64, conf raft.Configuration,
	confIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	if !d.live() {
		return d.frozenSnaps.Create(version, index, term, conf, confIndex, trans)
	}
	defer d.mu.RUnlock()
	sink, err := d.snaps.Create(version, index, term, conf, confIndex, trans)
	if err != nil {
		return nil, err
	}
	s := &diskSink{disk: d, sink: sink}
	d.sinksMu.Lock()
	d.sinks[s] = struct{}{}
	d.sinksMu.Unlock()
	return s, nil
}

// List lists the durable snapshots (after a crash, the abandoned instance's
// own).
func (d *disk) List() ([]*raft.SnapshotMeta, error) {
	if !d.live() {
		return d.frozenSnaps.List()
	}
	defer d.mu.RUnlock()
	return d.snaps.List()
}

// Open opens a snapshot for reading.
func (d *disk) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	if !d.live() {
		return d.frozenSnaps.Open(id)
	}
	defer d.mu.RUnlock()
	return d.snaps.Open(id)
}

// crash freezes the disk now: what was synced stays in the directory, the
// rest is lost, and the abandoned instance goes on with an in-memory copy of
// everything it had written. The bolt file is closed when crash returns. It
// reports how many entries written but not synced were lost.
func (d *disk) crash() (lost int, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.frozen != nil {
		return 0, nil
	}
	close(d.stopFlusher)
	view := raft.NewInmemStore()
	errs := []error{d.copyDurable(view)}
	// The abandoned instance still sees what it wrote; the disk does not.
	cached := d.cache.drain()
	for _, batch := range cached {
		lost += len(batch)
		_ = view.StoreLogs(batch) // an in-memory store cannot fail
	}
	d.cancelSinks()
	errs = append(errs, d.bolt.Close())
	d.frozen, d.frozenSnaps = view, raft.NewInmemSnapshotStore()
	return lost, errors.Join(errs...)
}

// copyDurable copies the durable log and the stable keys raft has used into
// view.
func (d *disk) copyDurable(view *raft.InmemStore) error {
	first, err := d.bolt.FirstIndex()
	if err != nil {
		return fmt.Errorf("reading the log's first index: %w", err)
	}
	last, err := d.bolt.LastIndex()
	if err != nil {
		return fmt.Errorf("reading the log's last index: %w", err)
	}
	if last > 0 {
		logs := make([]*raft.Log, 0, last-first+1)
		for i := first; i <= last; i++ {
			l := new(raft.Log)
			if err := d.bolt.GetLog(i, l); err != nil {
				return fmt.Errorf("reading log entry %d: %w", i, err)
			}
			logs = append(logs, l)
		}
		_ = view.StoreLogs(logs)
	}
	d.keysMu.Lock()
	defer d.keysMu.Unlock()
	for k, isUint := range d.keys {
		if isUint {
			if v, err := d.bolt.GetUint64([]byte(k)); err == nil {
				_ = view.SetUint64([]byte(k), v)
			}
		} else if v, err := d.bolt.Get([]byte(k)); err == nil {
			_ = view.Set([]byte(k), v)
		}
	}
	return nil
}

// cancelSinks drops every snapshot still being written, as a crash would
// (the file store never lists an unfinished one). Callers hold mu for
// writing, so no sink call is in flight.
func (d *disk) cancelSinks() {
	d.sinksMu.Lock()
	defer d.sinksMu.Unlock()
	for s := range d.sinks {
		if err := s.sink.Cancel(); err != nil {
			d.log.Debug("cancelling an unfinished snapshot", "id", s.sink.ID(), "err", err)
		}
		s.dead = true
		delete(d.sinks, s)
	}
}

// close is the clean stop: the cache is written back and synced, then the
// bolt file closed. Calls after it behave as after a crash.
func (d *disk) close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.frozen != nil {
		return nil
	}
	close(d.stopFlusher)
	errs := []error{d.flushLocked()}
	d.cancelSinks()
	errs = append(errs, d.bolt.Close())
	d.frozen, d.frozenSnaps = raft.NewInmemStore(), raft.NewInmemSnapshotStore()
	return errors.Join(errs...)
}

// flusher writes the cache back every writeBack until the disk stops.
func (d *disk) flusher() {
	t := time.NewTicker(d.writeBack)
	defer t.Stop()
	for {
		select {
		case <-d.stopFlusher:
			return
		case <-t.C:
		}
		if !d.live() {
			return
		}
		err := d.flushLocked()
		d.mu.RUnlock()
		if err != nil {
			d.log.Warn("writing back cached raft entries", "err", err)
		}
	}
}

// flushLocked writes the cached entries back to the bolt file, oldest first,
// each batch synced by its bolt commit. Callers hold mu (either way).
func (d *disk) flushLocked() error {
	d.flushMu.Lock()
	defer d.flushMu.Unlock()
	for {
		batch := d.cache.oldest()
		if batch == nil {
			return nil
		}
		if err := d.bolt.StoreLogs(batch); err != nil {
			return err
		}
		d.cache.done(batch)
	}
}

// diskSink is a snapshot being written. After a crash its writes go nowhere
// and closing it persists nothing.
type diskSink struct {
	disk *disk
	sink raft.SnapshotSink
	dead bool // guarded by disk.mu
}

func (s *diskSink) ID() string { return s.sink.ID() }

func (s *diskSink) Write(p []byte) (int, error) {
	s.disk.mu.RLock()
	defer s.disk.mu.RUnlock()
	if s.dead {
		return len(p), nil
	}
	return s.sink.Write(p)
}

// Close syncs the snapshot and makes it the member's latest.
func (s *diskSink) Close() error { return s.end(s.sink.Close) }

// Cancel drops the snapshot.
func (s *diskSink) Cancel() error { return s.end(s.sink.Cancel) }

func (s *diskSink) end(f func() error) error {
	s.disk.mu.RLock()
	defer s.disk.mu.RUnlock()
	if s.dead {
		return nil
	}
	s.dead = true
	s.disk.sinksMu.Lock()
	delete(s.disk.sinks, s)
	s.disk.sinksMu.Unlock()
	return f()
}

// writeBackCache holds acknowledged entries not yet synced, in the batches
// raft appended them in.
type writeBackCache struct {
	mu      sync.Mutex
	batches [][]*raft.Log
	logs    map[uint64]*raft.Log
}

func (c *writeBackCache) put(logs []*raft.Log) {
	batch := make([]*raft.Log, len(logs))
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, l := range logs {
		cp := *l
		batch[i] = &cp
		c.logs[l.Index] = &cp
	}
	c.batches = append(c.batches, batch)
}

func (c *writeBackCache) get(index uint64) (*raft.Log, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.logs[index]
	return l, ok
}

// bounds returns the lowest and highest cached index (0, 0 when empty).
func (c *writeBackCache) bounds() (lo, hi uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.logs {
		if lo == 0 || i < lo {
			lo = i
		}
		hi = max(hi, i)
	}
	return lo, hi
}

func (c *writeBackCache) oldest() []*raft.Log {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.batches) == 0 {
		return nil
	}
	return c.batches[0]
}

// done forgets a batch written back: the entries another batch has since
// replaced stay.
func (c *writeBackCache) done(batch []*raft.Log) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.batches = c.batches[1:]
	for _, l := range batch {
		if c.logs[l.Index] == l {
			delete(c.logs, l.Index)
		}
	}
}

// drain empties the cache and returns what it held.
func (c *writeBackCache) drain() [][]*raft.Log {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.batches
	c.batches = nil
	clear(c.logs)
	return out
}
