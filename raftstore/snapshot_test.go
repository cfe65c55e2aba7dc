package raftstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// memSink is a raft.SnapshotSink into memory.
type memSink struct {
	bytes.Buffer
	cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }
func (s *memSink) Close() error  { return nil }

func TestSnapshotRoundTrip(t *testing.T) {
	src := newTestFSM(100)
	index := uint64(0)
	next := func() uint64 { index++; return index }
	for i := range 20 {
		key := Key{Resource: []string{"pods", "nodes", "leases.coordination.k8s.io"}[i%3], Namespace: fmt.Sprint("ns", i%2), Name: fmt.Sprint(i)}
		applyCmd(t, src, next(), createCmd(t, key, fmt.Sprint("uid", i), `{"spec":{"a":"<&>"}}`))
		if i%4 == 0 {
			applyCmd(t, src, next(), command{Op: opDelete, Key: key})
		}
	}
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// Writes after the snapshot must not leak into it.
	applyCmd(t, src, 1000, createCmd(t, podA, "late", `{}`))

	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}

	dst := newTestFSM(100)
	ch, err := dst.hub.watch(context.Background(), "pods", 0, Narrowing{})
	if err != nil {
		t.Fatal(err)
	}
	if err := dst.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	for range ch {
		// A restore closes existing watches: they would miss events.
	}
	if got := dst.appliedIndex(); got != index {
		t.Errorf("restored applied index = %d, want %d", got, index)
	}
	applyCmd(t, src, 1001, command{Op: opDelete, Key: podA})
	for _, resource := range []string{"pods", "nodes", "leases.coordination.k8s.io"} {
		want, _ := src.list(resource, "")
		got, _ := dst.list(resource, "")
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s after restore (-want +got):\n%s", resource, diff)
		}
	}
	// The watch window restarts at the snapshot index.
	if _, err := dst.hub.watch(context.Background(), "pods", index-1, Narrowing{}); !errors.Is(err, ErrTooOld) {
		t.Errorf("watch from before the snapshot: err = %v, want ErrTooOld", err)
	}
	if _, err := dst.hub.watch(context.Background(), "pods", index, Narrowing{}); err != nil {
		t.Errorf("watch from the snapshot index: %v", err)
	}
	// Preconditions work on restored objects (the uid is recovered).
	key := Key{Resource: "nodes", Namespace: "ns1", Name: "1"}
	if res := applyCmd(t, dst, index+1, command{Op: opDelete, Key: key, Pre: Preconditions{UID: "uid1"}}); res.err != nil {
		t.Errorf("delete with UID precondition after restore: %v", res.err)
	}
}

// TestSnapshotCompressed: a snapshot is written gzip-compressed (a member
// without a disk keeps its latest one in memory), several times smaller
// than its JSON; the uncompressed stream an earlier version wrote still
// restores to the same state; a cut gzip stream is refused.
func TestSnapshotCompressed(t *testing.T) {
	src := newTestFSM(1000)
	const pod = `{"metadata":{"labels":{"app":"web"},"managedFields":[{"manager":"kubelet","operation":"Update"}]},"spec":{"containers":[{"name":"c","image":"registry.k8s.io/pause:3.10"}],"nodeName":"node-1"},"status":{"phase":"Running"}}`
	for i := range 200 {
		applyCmd(t, src, uint64(i+1), createCmd(t, Key{Resource: "pods", Namespace: "default", Name: fmt.Sprint("p", i)}, fmt.Sprint("uid", i), pod))
	}
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var zipped memSink
	if err := snap.Persist(&zipped); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(zipped.Bytes(), gzipMagic) {
		t.Fatalf("snapshot starts %q, want a gzip stream", zipped.Bytes()[:min(8, zipped.Len())])
	}
	// The same snapshot as the earlier versions wrote it: plain JSON.
	var plain bytes.Buffer
	enc := json.NewEncoder(&plain)
	s := snap.(*fsmSnapshot)
	if err := enc.Encode(snapshotHeader{Format: snapshotFormat, Applied: s.applied, Count: len(s.objects)}); err != nil {
		t.Fatal(err)
	}
	for _, o := range s.objects {
		if err := enc.Encode(o); err != nil {
			t.Fatal(err)
		}
	}
	if zipped.Len()*4 > plain.Len() {
		t.Errorf("compressed snapshot is %d bytes, plain %d: want it at least 4 times smaller", zipped.Len(), plain.Len())
	}
	t.Logf("200 pods: %d bytes compressed, %d plain", zipped.Len(), plain.Len())
	want, _ := src.list("pods", "")
	for name, data := range map[string][]byte{"compressed": zipped.Bytes(), "plain (earlier versions)": plain.Bytes()} {
		dst := newTestFSM(1000)
		if err := dst.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, _ := dst.list("pods", "")
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: pods after restore (-want +got):\n%s", name, diff)
		}
	}
	cut := zipped.Bytes()[:zipped.Len()/2]
	if err := newTestFSM(1000).Restore(io.NopCloser(bytes.NewReader(cut))); err == nil {
		t.Error("a gzip snapshot cut in half restored without an error")
	}
}

func TestRestoreRejectsGarbage(t *testing.T) {
	for _, data := range []string{``, `{"format":9}`, `{"format":1,"applied":3,"count":2}` + "\n" + `{"key":{},"rv":1,"data":{}}`} {
		f := newTestFSM(10)
		if err := f.Restore(io.NopCloser(bytes.NewReader([]byte(data)))); err == nil {
			t.Errorf("Restore(%q) succeeded", data)
		}
	}
}

// snapshotLog collects every member's snapshot events (Config.OnSnapshot).
type snapshotLog struct {
	mu     sync.Mutex
	events map[string][]SnapshotEvent
}

func (l *snapshotLog) option() TestOption {
	return WithConfig(func(cfg *Config) {
		id := cfg.ID
		cfg.OnSnapshot = func(e SnapshotEvent) {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.events == nil {
				l.events = map[string][]SnapshotEvent{}
			}
			l.events[id] = append(l.events[id], e)
		}
	})
}

func (l *snapshotLog) of(id string, kind SnapshotKind) []SnapshotEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []SnapshotEvent
	for _, e := range l.events[id] {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// TestInstallSnapshotToLaggingFollower: a follower that falls further
// behind than TrailingLogs, cut off or killed, is sent the leader's
// snapshot when it is back; the install is counted apart from a restart's
// restore of the member's own snapshot, and the follower's objects,
// resourceVersions and watches are then the leader's.
func TestInstallSnapshotToLaggingFollower(t *testing.T) {
	for _, tt := range []struct {
		name    string
		durable bool
	}{
		{"partitioned", false},
		{"killed and restarted", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var events snapshotLog
			opts := []TestOption{events.option(), WithConfig(func(cfg *Config) {
				cfg.TrailingLogs = 4
				cfg.SnapshotThreshold = 16
			})}
			if tt.durable {
				opts = append(opts, WithDurable())
			}
			c := OpenTestCluster(t, 3, opts...)
			ctx := testCtx(t)
			leader := c.Leader()
			before := create(ctx, leader, Key{Resource: "pods", Name: "before"})
			c.WaitApplied(before.RV)
			follower := c.Followers()[0]
			fi := c.Index(follower.ID())
			if tt.durable {
				// The follower's own snapshot, restored when it restarts.
				if err := follower.Snapshot(); err != nil {
					t.Fatal(err)
				}
			}
			watch, err := follower.Watch(ctx, "pods", 0)
			if err != nil {
				t.Fatal(err)
			}
			if tt.durable {
				c.Kill(fi)
			} else {
				c.IsolateMember(fi)
			}
			var last Object
			for i := range 40 {
				last = create(ctx, leader, Key{Resource: "pods", Name: fmt.Sprint(i)})
			}
			// The leader compacts its log past what the follower has.
			if err := leader.Snapshot(); err != nil {
				t.Fatal(err)
			}
			if got := leader.SnapshotStats().Taken; got == 0 {
				t.Errorf("leader took %d snapshots, want at least 1", got)
			}
			if tt.durable {
				follower = c.Restart(fi)
			} else {
				if got := follower.SnapshotStats().Installed; got != 0 {
					t.Errorf("cut-off follower installed %d snapshots before it was back", got)
				}
				c.Net.Heal()
			}
			c.WaitApplied(last.RV)

			st := follower.SnapshotStats()
			if st.Installed == 0 {
				t.Errorf("follower stats %+v: no snapshot installed", st)
			}
			wantRestored := uint64(0)
			if tt.durable {
				wantRestored = 1 // its own snapshot, as it restarted
			}
			if st.Restored != wantRestored {
				t.Errorf("follower stats %+v: restored on start %d times, want %d", st, st.Restored, wantRestored)
			}
			if got := leader.SnapshotStats().Installed; got != 0 {
				t.Errorf("leader installed %d snapshots", got)
			}
			installs := events.of(follower.ID(), SnapshotInstalled)
			if uint64(len(installs)) != st.Installed {
				t.Errorf("OnSnapshot was told of %d installs, stats say %d", len(installs), st.Installed)
			}
			if n := len(installs); n > 0 && installs[n-1].Index < last.RV-4 {
				t.Errorf("installed snapshot covers index %d, want at least %d", installs[n-1].Index, last.RV-4)
			}
			if got := len(events.of(follower.ID(), SnapshotRestored)); uint64(got) != st.Restored {
				t.Errorf("OnSnapshot was told of %d restores on start, stats say %d", got, st.Restored)
			}
			if len(events.of(leader.ID(), SnapshotTaken)) == 0 {
				t.Error("OnSnapshot was told of no snapshot the leader took")
			}

			want, _, err := leader.List(ctx, "pods", "")
			if err != nil {
				t.Fatal(err)
			}
			got, _ := follower.fsm.list("pods", "")
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("follower state after snapshot install (-want +got):\n%s", diff)
			}
			// A watch opened before was closed (by the restore, or by the
			// crash), and resuming from before the snapshot is too old
			// there.
			for range watch {
			}
			if _, err := follower.Watch(ctx, "pods", before.RV); !errors.Is(err, ErrTooOld) {
				t.Errorf("follower Watch from %d after install: err = %v, want ErrTooOld", before.RV, err)
			}
			// A watch from what the follower now holds resumes: it gets
			// the next write, with the leader's resourceVersion.
			resumed, err := follower.Watch(ctx, "pods", last.RV)
			if err != nil {
				t.Fatalf("follower Watch from %d after install: %v", last.RV, err)
			}
			next := create(ctx, leader, Key{Resource: "pods", Name: "after"})
			select {
			case ev, ok := <-resumed:
				if !ok || ev.Object.Key != next.Key || ev.Object.RV != next.RV {
					t.Errorf("resumed watch delivered %+v (open %v), want %s at RV %d", ev.Object, ok, next.Key, next.RV)
				}
			case <-ctx.Done():
				t.Fatal("resumed watch delivered nothing")
			}
		})
	}
}

func TestDurableRestart(t *testing.T) {
	tests := []struct {
		name    string
		members int
		kill    func(c *TestCluster) []int // which members to kill and restart
	}{
		{"single member", 1, func(*TestCluster) []int { return []int{0} }},
		{"leader of three", 3, func(c *TestCluster) []int { return []int{c.Index(c.Leader().ID())} }},
		{"follower of three", 3, func(c *TestCluster) []int { return []int{c.Index(c.Followers()[0].ID())} }},
		{"whole cluster", 3, func(*TestCluster) []int { return []int{0, 1, 2} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := OpenTestCluster(t, tt.members, WithDurable(), WithConfig(func(cfg *Config) {
				cfg.TrailingLogs = 8
				cfg.SnapshotThreshold = 1 << 20 // snapshots only when asked
			}))
			ctx := testCtx(t)
			acked := map[Key]Object{}
			write := func(prefix string, n int) {
				for i := range n {
					key := Key{Resource: "pods", Namespace: "ns", Name: fmt.Sprint(prefix, i)}
					obj, err := c.Leader().Create(ctx, key, []byte(`{"spec":{"i":1}}`))
					if err != nil {
						t.Fatal(err)
					}
					acked[key] = obj
				}
			}
			write("a", 20)
			// Snapshot on every member, then write more: a restart goes
			// through snapshot restore and log replay.
			for _, s := range c.Stores {
				if err := s.Snapshot(); err != nil {
					t.Fatal(err)
				}
			}
			write("b", 20)
			last := c.Leader().AppliedIndex()
			c.WaitApplied(last)

			victims := tt.kill(c)
			for _, i := range victims {
				c.Kill(i)
			}
			if len(victims) < tt.members {
				write("c", 10) // the survivors still have a majority
			}
			for _, i := range victims {
				c.Restart(i)
			}
			leader := c.Leader()
			obj, err := leader.Create(ctx, Key{Resource: "pods", Namespace: "ns", Name: "after"}, []byte(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			if obj.RV <= last {
				t.Errorf("RV after restart %d is not above %d: the log was reset", obj.RV, last)
			}
			acked[obj.Key] = obj
			c.WaitApplied(obj.RV)
			for _, i := range victims {
				s := c.Stores[i]
				got, _ := s.fsm.list("pods", "ns")
				if len(got) != len(acked) {
					t.Errorf("restarted member %s has %d objects, want %d", s.ID(), len(got), len(acked))
				}
				for _, o := range got {
					if want := acked[o.Key]; want.RV != o.RV || !bytes.Equal(want.Data, o.Data) {
						t.Errorf("restarted member %s: %s = RV %d, want RV %d", s.ID(), o.Key, o.RV, want.RV)
					}
				}
				// Objects from after the snapshot are replayed and watchable.
				var floor uint64
				if _, err := fmt.Sscan(s.Stats()["watch_floor"], &floor); err != nil || floor == 0 {
					t.Errorf("restarted member %s: watch_floor %q, want the snapshot index", s.ID(), s.Stats()["watch_floor"])
				}
				if _, err := s.Watch(ctx, "pods", floor-1); !errors.Is(err, ErrTooOld) {
					t.Errorf("restarted member %s: watch from before its snapshot: %v, want ErrTooOld", s.ID(), err)
				}
			}
			for _, s := range c.Stores {
				if s.Stats()["last_snapshot_index"] == "0" {
					t.Errorf("member %s took no snapshot", s.ID())
				}
			}
		})
	}
}
