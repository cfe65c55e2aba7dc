package history

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// SyncInterval is how often the Recorder fsyncs lines written since the last
// sync. Each line reaches the operating system as soon as it is recorded, so a
// crash of the process loses nothing; a crash of the machine loses at most
// this much.
const SyncInterval = 50 * time.Millisecond

// Recorder appends events to a history file. All methods are safe for
// concurrent use. Recording never blocks on fsync and never panics: the first
// write error is kept, later events are dropped (so the file stays loadable,
// at worst with a torn last line), and the error is returned by Err and Close.
type Recorder struct {
	path  string
	start time.Time // carries Go's monotonic reading: the run's time base

	nextID atomic.Uint64

	mu     sync.Mutex
	f      *os.File
	err    error // sticky: first I/O error; nothing is written after it
	misuse error // first misuse (ErrNotInvoked, ErrCompletedTwice, ErrClosed); writing goes on
	dirty  bool
	closed bool

	stop chan struct{}
	done chan struct{}

	// storeObserver, when set, is told every store line as it is written
	// (see ObserveStore).
	storeObserver atomic.Pointer[func(StoreEvent)]
}

// Create creates a new history file at path (it must not exist), writes meta
// as its first line and syncs it. A zero meta.Start is set to now. The caller
// must Close the Recorder.
func Create(path string, meta Meta) (*Recorder, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("creating history: %w", err)
	}
	r := &Recorder{
		path:  path,
		start: time.Now(),
		f:     f,
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	if meta.Start.IsZero() {
		meta.Start = r.start.Round(0)
	}
	r.write(KindMeta, 0, meta)
	err = r.Err()
	if err == nil {
		err = r.syncNow()
	}
	if err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("writing history meta: %w", err)
	}
	// Make the new directory entry durable too, so a machine crash cannot
	// lose the whole file; some filesystems do not support it, which is fine.
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	go r.flusher()
	return r, nil
}

// Path returns the path of the history file.
func (r *Recorder) Path() string { return r.path }

// Now returns the time since the recorder started, on the monotonic clock.
// Every event's t is a value of Now.
func (r *Recorder) Now() time.Duration { return time.Since(r.start) }

// Err returns the first write error, or the first misuse (ErrNotInvoked,
// ErrCompletedTwice, ErrClosed), or nil.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	return r.misuse
}

// Invoke records the start of op: it assigns op.ID (unique, from 1) and
// op.Invoke, clears op.Return, and writes an invoke line carrying the
// operation's inputs only.
// The caller keeps ownership of op and passes it to Complete when it ends.
func (r *Recorder) Invoke(op *Op) {
	op.ID = r.nextID.Add(1)
	now := r.Now().Nanoseconds()
	op.Invoke, op.Return = now, 0
	in := *op
	in.Status, in.Output, in.Found, in.Error, in.Return, in.RV, in.Items = "", "", false, "", 0, "", nil
	r.write(KindInvoke, now, in)
}

// Complete records the end of op. The caller sets op.Status (an empty
// status is recorded as unknown) and the outputs; Complete sets op.Return, or
// math.MaxInt64 when the status is unknown, since an operation of unknown
// outcome may take effect at any later time.
func (r *Recorder) Complete(op *Op) {
	switch {
	case op.ID == 0:
		r.noteMisuse(fmt.Errorf("completing %s %q: %w", op.Func, op.Key, ErrNotInvoked))
		return
	case op.Return != 0:
		// A second completion line would make the history unloadable.
		r.noteMisuse(fmt.Errorf("completing op %d: %w", op.ID, ErrCompletedTwice))
		return
	}
	now := r.Now().Nanoseconds()
	if op.Status == "" {
		op.Status = StatusUnknown
	}
	op.Return = now
	if op.Status == StatusUnknown {
		op.Return = math.MaxInt64
	}
	r.write(KindComplete, now, *op)
}

// API records one API call at the current time; the recording round-tripper
// calls it.
func (r *Recorder) API(call APICall) {
	now := r.Now().Nanoseconds()
	r.write(KindAPI, now, call)
}

// Nemesis records the start or end of a fault; ev.Wall is set to now.
func (r *Recorder) Nemesis(ev NemesisEvent) {
	wall := time.Now()
	ev.Wall = wall.Round(0)
	r.write(KindNemesis, wall.Sub(r.start).Nanoseconds(), ev)
}

// Ledger records one container-runtime action; a zero e.Wall is set to now.
func (r *Recorder) Ledger(e LedgerEntry) {
	wall := time.Now()
	if e.Wall.IsZero() {
		e.Wall = wall.Round(0)
	}
	r.write(KindLedger, wall.Sub(r.start).Nanoseconds(), e)
}

// Store records one committed store change.
func (r *Recorder) Store(e StoreEvent) {
	t := r.Now().Nanoseconds()
	r.write(KindStore, t, e)
	if f := r.storeObserver.Load(); f != nil {
		e.T = t
		(*f)(e)
	}
}

// ObserveStore makes f see every store line recorded from now on, after it
// is written, with its time set: a run follows the state the history will
// show without reading the file back. f is called from the goroutines that
// record, concurrently, and must not keep e.Object's bytes past the call
// unless they are not reused (recorders never reuse them). A later call
// replaces f; nil stops it.
func (r *Recorder) ObserveStore(f func(StoreEvent)) {
	if f == nil {
		r.storeObserver.Store(nil)
		return
	}
	r.storeObserver.Store(&f)
}

// Watch records one watch line (the opening of a watch request, an event
// it delivered, or its end) at the current time.
func (r *Recorder) Watch(e WatchEvent) {
	r.write(KindWatch, r.Now().Nanoseconds(), e)
}

// Log records a free-form note with the current wall time and optional
// attributes (nil for none). The map is encoded before Log returns, so the
// caller may reuse it.
func (r *Recorder) Log(msg string, attrs map[string]string) {
	wall := time.Now()
	r.write(KindLog, wall.Sub(r.start).Nanoseconds(), LogEntry{Msg: msg, Attrs: attrs, Wall: wall.Round(0)})
}

// Close stops the background sync, syncs and closes the file, and returns
// the first error the Recorder met. Events recorded after Close are dropped
// and reported by Err as ErrClosed. Close is idempotent.
func (r *Recorder) Close() error { return r.CloseWith(End{}) }

// CloseWith is Close, with the closing record saying how the run ended.
// Only the first Close or CloseWith writes it.
func (r *Recorder) CloseWith(end End) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return r.Err()
	}
	r.mu.Unlock()
	// The closing record is the last line: it tells a reader that the
	// recording ended here on purpose, not because the process was killed.
	r.write(KindEnd, int64(r.Now()), end)
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()

	close(r.stop)
	<-r.done

	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.f.Sync(); err != nil && r.err == nil {
		r.err = fmt.Errorf("syncing history: %w", err)
	}
	if err := r.f.Close(); err != nil && r.err == nil {
		r.err = fmt.Errorf("closing history: %w", err)
	}
	if r.err != nil {
		return r.err
	}
	return r.misuse
}

// write encodes one line as {"kind":K,"t":T,<payload fields>} and appends it
// with a single write, so concurrent lines never interleave.
func (r *Recorder) write(kind Kind, t int64, payload any) {
	body, err := json.Marshal(payload)
	if err != nil {
		r.noteMisuse(fmt.Errorf("encoding %s event: %w", kind, err))
		return
	}
	line := appendLine(make([]byte, 0, len(body)+40), kind, t, body)
	if len(line) > MaxLineBytes {
		// A reader refuses such a line, so it is never written: a log line
		// says what was dropped instead.
		r.noteOversize(kind, t, len(line))
		return
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		if r.misuse == nil {
			what := string(kind)
			if c, ok := payload.(APICall); ok {
				// Name the late caller, so the component that outlived
				// the run can be found.
				what = fmt.Sprintf("%s (%s %s %s by %s)", kind, c.Verb, c.Resource, c.Name, c.Identity)
			}
			r.misuse = fmt.Errorf("recording %s event: %w", what, ErrClosed)
		}
		return
	}
	if r.err != nil {
		return
	}
	if _, err := r.f.Write(line); err != nil {
		r.err = fmt.Errorf("appending %s event to history: %w", kind, err)
		return
	}
	r.dirty = true
}

// noteOversize records, in place of an event too long for a history line,
// a log line naming its kind and size.
func (r *Recorder) noteOversize(kind Kind, t int64, size int) {
	r.write(KindLog, t, LogEntry{Wall: time.Now(), Msg: "event dropped: longer than a history line may be", Attrs: map[string]string{
		"kind": string(kind), "bytes": strconv.Itoa(size), "limit": strconv.Itoa(MaxLineBytes),
	}})
}

func (r *Recorder) noteMisuse(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.misuse == nil {
		r.misuse = err
	}
}

// flusher fsyncs in the background, at most once per SyncInterval and only
// when something was written. The sync runs outside the lock so recording
// goes on meanwhile.
func (r *Recorder) flusher() {
	defer close(r.done)
	t := time.NewTicker(SyncInterval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			if err := r.syncIfDirty(); err != nil {
				r.mu.Lock()
				if r.err == nil {
					r.err = fmt.Errorf("syncing history: %w", err)
				}
				r.mu.Unlock()
			}
		}
	}
}

func (r *Recorder) syncIfDirty() error {
	r.mu.Lock()
	dirty := r.dirty && r.err == nil
	r.dirty = false
	r.mu.Unlock()
	if !dirty {
		return nil
	}
	return r.f.Sync()
}

func (r *Recorder) syncNow() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	r.dirty = false
	return r.f.Sync()
}
