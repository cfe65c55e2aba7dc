package raftstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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

func TestRestoreRejectsGarbage(t *testing.T) {
	for _, data := range []string{``, `{"format":9}`, `{"format":1,"applied":3,"count":2}` + "\n" + `{"key":{},"rv":1,"data":{}}`} {
		f := newTestFSM(10)
		if err := f.Restore(io.NopCloser(bytes.NewReader([]byte(data)))); err == nil {
			t.Errorf("Restore(%q) succeeded", data)
		}
	}
}

func TestInstallSnapshotToLaggingFollower(t *testing.T) {
	c := OpenTestCluster(t, 3, WithConfig(func(cfg *Config) {
		cfg.TrailingLogs = 4
		cfg.SnapshotThreshold = 16
	}))
	ctx := testCtx(t)
	leader := c.Leader()
	before := create(ctx, leader, Key{Resource: "pods", Name: "before"})
	c.WaitApplied(before.RV)
	follower := c.Followers()[0]
	watch, err := follower.Watch(ctx, "pods", 0)
	if err != nil {
		t.Fatal(err)
	}
	c.IsolateMember(c.Index(follower.ID()))
	var last Object
	for i := range 40 {
		last = create(ctx, leader, Key{Resource: "pods", Name: fmt.Sprint(i)})
	}
	if err := leader.Snapshot(); err != nil {
		t.Fatal(err)
	}
	c.Net.Heal()
	c.WaitApplied(last.RV)

	want, _, err := leader.List(ctx, "pods", "")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := follower.fsm.list("pods", "")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("follower state after snapshot install (-want +got):\n%s", diff)
	}
	// The follower's watch was closed by the restore, and resuming from
	// before the snapshot is too old there.
	for range watch {
	}
	if _, err := follower.Watch(ctx, "pods", before.RV); !errors.Is(err, ErrTooOld) {
		t.Errorf("follower Watch from %d after restore: err = %v, want ErrTooOld", before.RV, err)
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
