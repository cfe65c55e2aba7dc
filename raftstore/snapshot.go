package raftstore

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/hashicorp/raft"
)

// A snapshot is a stream of JSON values: one snapshotHeader, then Count
// snapshotObjects sorted by key.
const snapshotFormat = 1

type snapshotHeader struct {
	Format  int    `json:"format"`
	Applied uint64 `json:"applied"`
	Count   int    `json:"count"`
}

type snapshotObject struct {
	Key  Key             `json:"key"`
	RV   uint64          `json:"rv"`
	Data json.RawMessage `json:"data"`
}

// fsmSnapshot is a point-in-time copy of the FSM. Stored entries are
// immutable, so copying the maps is enough; Persist runs concurrently with
// later Applies.
type fsmSnapshot struct {
	applied uint64
	objects []snapshotObject
	// owner counts the snapshot once it is persisted; nil in tests that
	// build a snapshot by hand.
	owner *fsm
}

var _ raft.FSMSnapshot = (*fsmSnapshot)(nil)

// Snapshot captures the state; raft calls it on the FSM goroutine, so no Apply
// runs concurrently.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	snap := &fsmSnapshot{applied: f.applied, owner: f}
	for _, byKey := range f.objects {
		for k, s := range byKey {
			snap.objects = append(snap.objects, snapshotObject{Key: k, RV: s.rv, Data: s.data})
		}
	}
	return snap, nil
}

// Persist writes the snapshot to sink.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.write(sink); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("persisting snapshot at index %d: %w", s.applied, err)
	}
	if err := sink.Close(); err != nil {
		return err
	}
	if s.owner != nil {
		s.owner.snapshotTaken(s.applied, len(s.objects))
	}
	return nil
}

func (s *fsmSnapshot) write(w io.Writer) error {
	slices.SortFunc(s.objects, func(a, b snapshotObject) int { return compareKeys(a.Key, b.Key) })
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	if err := enc.Encode(snapshotHeader{Format: snapshotFormat, Applied: s.applied, Count: len(s.objects)}); err != nil {
		return err
	}
	for _, o := range s.objects {
		if err := enc.Encode(o); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// Release is a no-op: the snapshot holds only shared immutable data.
func (s *fsmSnapshot) Release() {}

// Restore replaces the whole state with a snapshot. Events before the
// snapshot are gone, so the watch window restarts at the snapshot's applied
// index and current watchers are closed (they would otherwise miss events).
// raft calls it for the member's own latest snapshot as it starts and for
// every snapshot the leader sends; the two are counted apart (snapCounters).
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	dec := json.NewDecoder(bufio.NewReader(rc))
	var hdr snapshotHeader
	if err := dec.Decode(&hdr); err != nil {
		return fmt.Errorf("restoring snapshot header: %w", err)
	}
	if hdr.Format != snapshotFormat {
		return fmt.Errorf("restoring snapshot: unknown format %d", hdr.Format)
	}
	objects := map[string]map[Key]stored{}
	for i := range hdr.Count {
		var o snapshotObject
		if err := dec.Decode(&o); err != nil {
			return fmt.Errorf("restoring snapshot object %d of %d: %w", i, hdr.Count, err)
		}
		d, err := parseDoc(o.Data)
		if err != nil {
			return fmt.Errorf("restoring snapshot object %s: %w", o.Key, err)
		}
		byKey := objects[o.Key.Resource]
		if byKey == nil {
			byKey = map[Key]stored{}
			objects[o.Key.Resource] = byKey
		}
		byKey[o.Key] = stored{data: []byte(o.Data), rv: o.RV, uid: d.str(fieldUID)}
	}

	f.mu.Lock()
	f.objects = objects
	f.setAppliedLocked(hdr.Applied)
	f.hub.reset(hdr.Applied)
	f.reindexLocked()
	f.mu.Unlock()
	f.log.Info("restored snapshot", "applied", hdr.Applied, "objects", hdr.Count)
	f.snapshotRestored(hdr.Applied, hdr.Count)
	return nil
}
