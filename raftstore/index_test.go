package raftstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// nodeOf is a test index: the "node" field of an object.
func nodeOf(data []byte) string {
	var o struct {
		Node string `json:"node"`
	}
	_ = json.Unmarshal(data, &o)
	return o.Node
}

var testIndexes = map[string]IndexFunc{"pods": nodeOf}

func namesOf(objs []Object) []string {
	var names []string
	for _, o := range objs {
		names = append(names, o.Key.Name)
	}
	return names
}

// TestNarrowedListOnEveryMember checks a list narrowed by index on the
// leader and on followers (whose lists are served locally after a read index
// or forwarded to the leader), and that an object changing its value moves
// between the lists.
func TestNarrowedListOnEveryMember(t *testing.T) {
	c := OpenTestCluster(t, 3, WithConfig(func(cfg *Config) { cfg.Indexes = testIndexes }))
	ctx := context.Background()
	leader := c.Leader()
	for i := range 6 {
		if _, err := leader.Create(ctx, Key{Resource: "pods", Namespace: "ns", Name: fmt.Sprint("p", i)}, fmt.Appendf(nil, `{"node":"n%d"}`, i%2)); err != nil {
			t.Fatal(err)
		}
	}
	moved, err := leader.Get(ctx, Key{Resource: "pods", Namespace: "ns", Name: "p0"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leader.Update(ctx, moved.Key, []byte(`{"node":"n1"}`), Preconditions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := leader.Delete(ctx, Key{Resource: "pods", Namespace: "ns", Name: "p3"}, Preconditions{}); err != nil {
		t.Fatal(err)
	}
	for _, s := range c.Stores {
		for value, want := range map[string][]string{"n0": {"p2", "p4"}, "n1": {"p0", "p1", "p5"}, "n9": nil} {
			objs, _, err := s.List(ctx, "pods", "", ByIndex(value))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, namesOf(objs)); diff != "" {
				t.Errorf("%s: list narrowed to %s (-want +got):\n%s", s.ID(), value, diff)
			}
		}
		// A resource without an index is never narrowed.
		if _, err := s.Create(ctx, Key{Resource: "nodes", Name: s.ID()}, []byte(`{"node":"x"}`)); err != nil {
			t.Fatal(err)
		}
	}
	objs, _, err := leader.List(ctx, "nodes", "", ByIndex("y"))
	if err != nil || len(objs) != 3 {
		t.Errorf("a list of an unindexed resource narrowed by index: %d objects, %v; want all 3", len(objs), err)
	}
}

// TestIndexRebuiltAfterRestore checks that a member restoring a snapshot
// indexes the restored objects: narrowed lists and watches see them.
func TestIndexRebuiltAfterRestore(t *testing.T) {
	src := newFSM(newHub(100, testIndexes), slog.New(slog.DiscardHandler))
	for i := range 4 {
		applyCmd(t, src, uint64(i+1), createCmd(t, Key{Resource: "pods", Namespace: "ns", Name: fmt.Sprint("p", i)}, fmt.Sprint("uid", i), fmt.Sprintf(`{"node":"n%d"}`, i%2)))
	}
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	dst := newFSM(newHub(100, testIndexes), slog.New(slog.DiscardHandler))
	if err := dst.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	objs, _ := dst.listNarrowed("pods", "", ByIndex("n1"))
	if diff := cmp.Diff([]string{"p1", "p3"}, namesOf(objs)); diff != "" {
		t.Errorf("narrowed list after restore (-want +got):\n%s", diff)
	}
	// p1 leaves n1 for n0: a watch of n0 gets it as having entered, a
	// watch of n1 as a plain change; a watch of n7 gets nothing.
	watch := func(value string) <-chan Event {
		ch, err := dst.hub.watch(t.Context(), "pods", 4, ByIndex(value))
		if err != nil {
			t.Fatal(err)
		}
		return ch
	}
	n0, n1, n7 := watch("n0"), watch("n1"), watch("n7")
	applyCmd(t, dst, 5, command{Op: opUpdate, Key: Key{Resource: "pods", Namespace: "ns", Name: "p1"}, Data: json.RawMessage(`{"node":"n0"}`)})
	applyCmd(t, dst, 6, createCmd(t, Key{Resource: "pods", Namespace: "ns", Name: "p9"}, "uid9", `{"node":"n1"}`))
	if ev := <-n0; ev.Object.Key.Name != "p1" || !ev.Entered {
		t.Errorf("n0 watch got %s %s entered=%v, want p1 entered", ev.Type, ev.Object.Key.Name, ev.Entered)
	}
	for _, want := range []string{"p1", "p9"} {
		if ev := <-n1; ev.Object.Key.Name != want || ev.Entered {
			t.Errorf("n1 watch got %s %s entered=%v, want %s not entered", ev.Type, ev.Object.Key.Name, ev.Entered, want)
		}
	}
	select {
	case ev := <-n7:
		t.Errorf("n7 watch got %s %s", ev.Type, ev.Object.Key.Name)
	default:
	}
	if _, _, watchers := dst.hub.stats(); watchers != 3 {
		t.Errorf("hub counts %d watchers, want 3", watchers)
	}
}
