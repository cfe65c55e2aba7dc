package raftstore

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/hashicorp/raft"
)

// A snapshot is a gzip stream (fastest level) of JSON values: one
// snapshotHeader, then Count snapshotObjects sorted by key. Objects are
// JSON documents, which compress about tenfold: a member without a disk
// keeps its latest snapshot in memory (raft's in-memory snapshot store)
// for as long as it runs, and a durable member writes it to disk and sends
// it to lagging followers, so the compressed form is what saves memory at
// 150,000 pods and bytes on the disk and the wire. Restore also reads the
// uncompressed stream of earlier versions, which a data directory may
// still hold; the header's format is the same in both.
const snapshotFormat = 1

// gzipMagic opens every gzip stream (RFC 1952); a JSON stream opens with '{'.
var gzipMagic = []byte{0x1f, 0x8b}

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
	zw, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(zw, 64<<10)
	enc := json.NewEncoder(bw)
	if err := enc.Encode(snapshotHeader{Format: snapshotFormat, Applied: s.applied, Count: len(s.objects)}); err != nil {
		return err
	}
	for _, o := range s.objects {
		if err := enc.Encode(o); err != nil {
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return zw.Close()
}

// snapshotReader reads a snapshot's JSON stream from r, uncompressing it
// when it is a gzip stream (every snapshot this version writes).
func snapshotReader(r io.Reader) (io.Reader, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	head, err := br.Peek(len(gzipMagic))
	if err != nil && len(head) == 0 {
		if err == io.EOF {
			return nil, fmt.Errorf("restoring snapshot: empty")
		}
		return nil, fmt.Errorf("restoring snapshot: %w", err)
	}
	if !bytes.Equal(head, gzipMagic) {
		return br, nil
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		return nil, fmt.Errorf("restoring snapshot: %w", err)
	}
	return bufio.NewReaderSize(zr, 64<<10), nil
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
	r, err := snapshotReader(rc)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(r)
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

	// Counted before the state is published: whoever waits for the
	// snapshot's index to be applied then finds the restore counted.
	f.snapshotRestored(hdr.Applied, hdr.Count)
	f.mu.Lock()
	f.objects = objects
	f.setAppliedLocked(hdr.Applied)
	f.hub.reset(hdr.Applied)
	f.reindexLocked()
	f.mu.Unlock()
	f.log.Info("restored snapshot", "applied", hdr.Applied, "objects", hdr.Count)
	return nil
}
