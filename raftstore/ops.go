package raftstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	"github.com/pingcap/failpoint"
)

// errRetry marks an attempt that definitely had no effect because the member
// it reached does not lead (or could not be reached at all); the request may
// be tried again on whoever leads next.
var errRetry = errors.New("not the leader")

// Create stores a new object under key. It sets metadata.name and
// metadata.namespace from key, and metadata.uid, metadata.creationTimestamp,
// metadata.generation (1) and metadata.resourceVersion, overwriting whatever
// data had there. ErrExists if the key is taken; ErrInvalid if data is not a
// JSON object or its metadata.name/namespace disagree with key.
func (s *Store) Create(ctx context.Context, key Key, data []byte) (Object, error) {
	if err := checkKey(key); err != nil {
		return Object{}, fmt.Errorf("creating %s: %w", key, err)
	}
	prepared, err := prepareCreate(key, data, s.cfg.NewUID(), s.cfg.Clock.Now())
	if err != nil {
		return Object{}, fmt.Errorf("creating %s: %w", key, err)
	}
	obj, err := s.write(ctx, command{Op: opCreate, Key: key, Data: prepared})
	if err != nil {
		return Object{}, fmt.Errorf("creating %s: %w", key, err)
	}
	return obj, nil
}

// Update replaces the object under key with data, if pre holds (ErrConflict
// otherwise; ErrNotFound if there is no object). metadata.name and
// metadata.namespace are set from key, metadata.uid and
// metadata.creationTimestamp are kept from the stored object,
// metadata.generation is incremented when the top-level spec changed, and
// metadata.resourceVersion in data is ignored: use pre.ResourceVersion for a
// compare-and-swap. Graceful-deletion fields (metadata.deletionTimestamp,
// metadata.deletionGracePeriodSeconds) are ordinary data here; their rules
// are the API server's to enforce.
func (s *Store) Update(ctx context.Context, key Key, data []byte, pre Preconditions) (Object, error) {
	if err := checkKey(key); err != nil {
		return Object{}, fmt.Errorf("updating %s: %w", key, err)
	}
	if err := validateUpdate(key, data); err != nil {
		return Object{}, fmt.Errorf("updating %s: %w", key, err)
	}
	obj, err := s.write(ctx, command{Op: opUpdate, Key: key, Data: data, Pre: pre})
	if err != nil {
		return Object{}, fmt.Errorf("updating %s: %w", key, err)
	}
	return obj, nil
}

// Delete removes the object under key if pre holds, and returns its last state
// with RV (and metadata.resourceVersion) set to the index of the deletion.
func (s *Store) Delete(ctx context.Context, key Key, pre Preconditions) (Object, error) {
	if err := checkKey(key); err != nil {
		return Object{}, fmt.Errorf("deleting %s: %w", key, err)
	}
	obj, err := s.write(ctx, command{Op: opDelete, Key: key, Pre: pre})
	if err != nil {
		return Object{}, fmt.Errorf("deleting %s: %w", key, err)
	}
	return obj, nil
}

// Get returns the object under key. The read is linearizable (unless
// StaleReads is set). Returned Data is shared with the store: do not modify
// it (the same holds for List and Watch).
func (s *Store) Get(ctx context.Context, key Key) (Object, error) {
	if err := checkKey(key); err != nil {
		return Object{}, fmt.Errorf("getting %s: %w", key, err)
	}
	var obj Object
	err := s.read(ctx,
		func(uint64) (err error) { obj, err = s.fsm.get(key); return err },
		func(ctx context.Context, leader string) (err error) {
			obj, err = s.fwdClient.get(ctx, leader, key)
			return err
		})
	if err != nil {
		return Object{}, fmt.Errorf("getting %s: %w", key, err)
	}
	return obj, nil
}

// List returns the objects of resource in namespace ("" for all namespaces),
// sorted by key, and the applied index the read reflects (a resourceVersion
// to start a Watch from). The read is linearizable (unless StaleReads is set).
// ByIndex narrows it to the objects of one index value.
func (s *Store) List(ctx context.Context, resource, namespace string, opts ...Narrowing) ([]Object, uint64, error) {
	if resource == "" {
		return nil, 0, fmt.Errorf("listing: %w: empty resource", ErrInvalid)
	}
	var (
		objs []Object
		rev  uint64
		n    = narrowing(opts)
	)
	err := s.read(ctx,
		func(index uint64) error {
			objs, rev = s.fsm.listNarrowed(resource, namespace, n)
			rev = max(rev, index)
			return nil
		},
		func(ctx context.Context, leader string) (err error) {
			objs, rev, err = s.fwdClient.list(ctx, leader, resource, namespace, n)
			return err
		})
	if err != nil {
		return nil, 0, fmt.Errorf("listing %s in namespace %q: %w", resource, namespace, err)
	}
	return objs, rev, nil
}

// Watch streams every change of resource with RV > fromRV, in RV order and
// exactly once: first the remembered ones, then live ones. fromRV 0 means
// from now. ErrTooOld if events after fromRV may have been forgotten (the
// window keeps the last WatchWindow events of all resources). The watch is
// served from this member's own state, so on a lagging member it lags too.
// The channel is closed when ctx ends, the store closes, this member restores
// a snapshot, or the receiver falls WatchWindow events behind; the receiver
// resumes with a new Watch from the last RV it saw. Event data is shared:
// do not modify it. ByIndex narrows it to the events whose object had or has
// one index value.
func (s *Store) Watch(ctx context.Context, resource string, fromRV uint64, opts ...Narrowing) (<-chan Event, error) {
	if resource == "" {
		return nil, fmt.Errorf("watching: %w: empty resource", ErrInvalid)
	}
	ch, err := s.hub.watch(ctx, resource, fromRV, narrowing(opts))
	if err != nil {
		return nil, fmt.Errorf("watching %s from %d: %w", resource, fromRV, err)
	}
	return ch, nil
}

func checkKey(k Key) error {
	if k.Resource == "" || k.Name == "" {
		return fmt.Errorf("%w: key %s needs a resource and a name", ErrInvalid, k)
	}
	return nil
}

// write proposes cmd on the leader and returns its outcome.
func (s *Store) write(ctx context.Context, cmd command) (Object, error) {
	body, err := json.Marshal(cmd)
	if err != nil {
		return Object{}, fmt.Errorf("%w: encoding command: %v", ErrInvalid, err)
	}
	var obj Object
	err = s.route(ctx,
		func(ctx context.Context) (err error) { obj, err = s.applyLocal(ctx, body); return err },
		func(ctx context.Context, leader string) (err error) {
			obj, err = s.fwdClient.write(ctx, leader, body)
			return err
		})
	return obj, err
}

// read runs a read on the leader, after making the leader's state
// linearizable (readIndex), and hands local the read index: the local state
// is the state at that index (every entry after the FSM's last command up to
// it is raft's own), so a list may name it as its resourceVersion, which is
// then never 0 on a started store. With StaleReads it just reads local state
// (index 0).
func (s *Store) read(ctx context.Context, local func(index uint64) error, remote func(context.Context, string) error) error {
	if s.closed() {
		return ErrClosed
	}
	if s.staleReads.Load() {
		return local(0)
	}
	return s.route(ctx,
		func(ctx context.Context) error {
			index, err := s.readIndex(ctx)
			if err != nil {
				return err
			}
			return local(index)
		},
		remote)
}

// route runs an operation on the leader: local if this member leads,
// otherwise remote with the leader's forward address. Attempts that
// definitely had no effect (errRetry) are repeated, as the leader changes,
// for up to LeaderWait; then the result is ErrUnavailable. Any other error is
// the outcome.
func (s *Store) route(ctx context.Context, local func(context.Context) error, remote func(context.Context, string) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.life, cancel)()
	giveUp := time.NewTimer(s.cfg.LeaderWait)
	defer giveUp.Stop()
	cause := "no leader known"
	for {
		if s.closed() {
			return ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%w: not sent: %v", ErrUnavailable, err)
		}
		changed := s.leaderChanged()
		var err error
		switch leader := s.LeaderID(); {
		case s.IsLeader():
			err = local(ctx)
		case leader != "" && leader != s.cfg.ID:
			err = remote(ctx, leader)
		default:
			err = errRetry
		}
		if !errors.Is(err, errRetry) {
			return err
		}
		if err != errRetry {
			cause = err.Error()
		}
		// Back off briefly so a follower that still names a deposed leader
		// does not spin while the election runs.
		t := time.NewTimer(5 * time.Millisecond)
		select {
		case <-t.C:
		case <-changed:
		case <-giveUp.C:
			t.Stop()
			return fmt.Errorf("%w: %s", ErrUnavailable, cause)
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w: %s (%v)", ErrUnavailable, cause, ctx.Err())
		case <-s.closing:
		}
		t.Stop()
	}
}

// applyLocal proposes an encoded command on this member, which must lead,
// and waits for it to be applied. The outcome classes matter to the checker:
// errRetry (and ErrUnavailable) only when the entry was certainly never
// appended; ErrTimeout whenever it may yet commit.
func (s *Store) applyLocal(ctx context.Context, body []byte) (Object, error) {
	f := s.raft.Apply(body, s.cfg.LeaderWait)
	if err := waitFuture(ctx, f); err != nil {
		switch {
		case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
			return Object{}, fmt.Errorf("%w: %v", errRetry, err)
		case errors.Is(err, raft.ErrEnqueueTimeout):
			return Object{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
		case errors.Is(err, ErrTimeout):
			return Object{}, err
		default:
			// ErrLeadershipLost, ErrRaftShutdown, ErrAbortedByRestore: the
			// entry may have been appended and may still commit.
			return Object{}, fmt.Errorf("%w: %v", ErrTimeout, err)
		}
	}
	res, ok := f.Response().(applyResult)
	if !ok {
		return Object{}, fmt.Errorf("%w: unexpected apply response %T", ErrTimeout, f.Response())
	}
	return res.obj, res.err
}

// readIndex makes a read of local state on the leader linearizable: the
// read-index protocol of the raft thesis (section 6.4).
//
//  1. The leader must have committed an entry of its own term, or its commit
//     index may lag what earlier leaders committed: one barrier per term.
//  2. The commit index at the moment the read began is the read index: every
//     write acknowledged to anyone before then, and every change any member
//     may have applied (and streamed to its watchers) before then, is at or
//     below it.
//  3. VerifyLeader then contacts a quorum: if it succeeds, no later term
//     existed when the read began, so nothing newer was committed elsewhere.
//  4. Finally the read waits until this member's state machine has applied
//     the read index. raft applies committed entries asynchronously, and a
//     follower can apply an entry and deliver it on a watch before the
//     leader's own state machine has applied it; without this wait a client
//     could be told "not found" for an object its watch just delivered.
//
// The read therefore reflects every operation that completed, and every
// change any member made visible, before it started.
func (s *Store) readIndex(ctx context.Context) (uint64, error) {
	term := s.raft.CurrentTerm()
	if s.barrierTerm.Load() != term {
		f := s.raft.Barrier(s.cfg.LeaderWait)
		if err := waitFuture(ctx, f); err != nil {
			return 0, readErr(err)
		}
		// The term was read before the barrier was proposed, so the barrier
		// was committed in this term or a later one; recording the earlier
		// term can only cause an extra barrier, never a missing one.
		s.barrierTerm.Store(term)
		if idx, ok := f.(raft.IndexFuture); ok {
			s.noteProcessed(idx.Index())
		}
	}
	readIndex := s.raft.CommitIndex()
	if err := waitFuture(ctx, s.raft.VerifyLeader()); err != nil {
		return 0, readErr(err)
	}
	// Planted bug "read-skips-apply-wait" (bug zoo): answer from whatever
	// the leader's state machine holds now (breaks read-after-watch).
	skip := false
	failpoint.InjectContext(s.fsm.fp, "readSkipsApplyWait", func() { skip = true })
	if skip {
		return 0, nil
	}
	return readIndex, s.waitApplied(ctx, readIndex)
}

// waitApplied waits until this member's state machine reflects every
// committed entry up to index (see Reflects). The state machine wakes it when
// it applies a command at or past index; an index that is one of raft's own
// entries (a no-op or barrier) reaches the state machine only with the next
// command, so Reflects is also asked now and then: after CommitTimeout, then
// at doubling intervals up to maxApplyPoll. Thousands of reads can wait at
// once (every kubelet's first list at start): each registers once and
// sleeps, rather than all of them polling every few milliseconds.
func (s *Store) waitApplied(ctx context.Context, index uint64) error {
	done, _ := s.fsm.appliedChan(index)
	if done == nil || s.Reflects(index) {
		return nil
	}
	poll := s.cfg.CommitTimeout
	t := time.NewTimer(poll)
	defer t.Stop()
	for {
		select {
		case <-done:
			return nil
		case <-t.C:
			if s.Reflects(index) {
				return nil
			}
			poll = min(2*poll, maxApplyPoll)
			t.Reset(poll)
		case <-ctx.Done():
			return fmt.Errorf("%w: waiting for index %d to be applied: %v", ErrTimeout, index, ctx.Err())
		case <-s.closing:
			return ErrClosed
		}
	}
}

// maxApplyPoll bounds the interval at which a waiting read asks Reflects.
const maxApplyPoll = 50 * time.Millisecond

// Reflects reports whether this member's objects reflect every committed
// change up to raft index index. Not every entry reaches the state machine:
// raft keeps its no-op and barrier entries (and configuration changes) to
// itself, so an index that is such an entry is never "applied" by the FSM.
// Once raft has handed every entry up to index to the state machine, and
// none of the entries after the FSM's last command is a command, the state
// is current; a barrier that resolved proves the same up to its index.
func (s *Store) Reflects(index uint64) bool {
	applied := s.fsm.appliedIndex()
	if applied >= index || s.processed.Load() >= index {
		return true
	}
	if s.raft.AppliedIndex() < index {
		return false
	}
	if current, err := s.onlyNonCommands(applied, index); err != nil || !current {
		return false
	}
	s.noteProcessed(index)
	return true
}

// onlyNonCommands reports whether the log entries after from, up to and
// including to, hold no command for the state machine. An entry already
// compacted away was included in a snapshot, so the state machine has it.
func (s *Store) onlyNonCommands(from, to uint64) (bool, error) {
	var l raft.Log
	for i := from + 1; i <= to; i++ {
		if err := s.logs.GetLog(i, &l); err != nil {
			if errors.Is(err, raft.ErrLogNotFound) {
				continue
			}
			return false, err
		}
		if l.Type == raft.LogCommand {
			return false, nil
		}
	}
	return true, nil
}

// noteProcessed records that the state machine has consumed every entry up
// to index.
func (s *Store) noteProcessed(index uint64) {
	for {
		cur := s.processed.Load()
		if index <= cur || s.processed.CompareAndSwap(cur, index) {
			return
		}
	}
}

// readErr classifies a failed barrier or leadership check. A read has no
// effect, so losing leadership is simply a reason to retry elsewhere.
func readErr(err error) error {
	if errors.Is(err, ErrTimeout) {
		return err
	}
	if errors.Is(err, raft.ErrRaftShutdown) {
		return ErrClosed
	}
	return fmt.Errorf("%w: %v", errRetry, err)
}

// waitFuture waits for f or ctx, whichever comes first; a context that ends
// first is ErrTimeout, since f may still succeed.
func waitFuture(ctx context.Context, f raft.Future) error {
	if ctx.Done() == nil {
		return f.Error()
	}
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%w: %v", ErrTimeout, ctx.Err())
	}
}
