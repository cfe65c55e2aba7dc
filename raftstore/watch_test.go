package raftstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// recv reads n events from ch, failing the test if they do not arrive in
// time or the channel closes.
func recv(t *testing.T, ch <-chan Event, n int) []Event {
	t.Helper()
	var got []Event
	timeout := time.After(10 * time.Second)
	for len(got) < n {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("watch closed after %d of %d events", len(got), n)
			}
			got = append(got, ev)
		case <-timeout:
			t.Fatalf("got %d of %d events in 10s", len(got), n)
		}
	}
	return got
}

// writeMix makes a mix of creates, updates and deletes of pods and nodes
// and returns the events they must cause, in order.
func writeMix(t *testing.T, ctx context.Context, s *Store, n int) []Event {
	t.Helper()
	var evs []Event
	for i := range n {
		resource := []string{"pods", "nodes"}[i%2]
		key := Key{Resource: resource, Name: fmt.Sprint("o", i/6)}
		var (
			obj Object
			err error
			typ EventType
		)
		switch (i / 2) % 3 {
		case 0:
			obj, err, typ = create(ctx, s, key), nil, Added
		case 1:
			obj, err = s.Update(ctx, key, []byte(fmt.Sprintf(`{"spec":{"i":%d}}`, i)), Preconditions{})
			typ = Modified
		case 2:
			obj, err = s.Delete(ctx, key, Preconditions{})
			typ = Deleted
		}
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		evs = append(evs, Event{Type: typ, Object: obj})
	}
	return evs
}

func create(ctx context.Context, s *Store, key Key) Object {
	obj, err := s.Create(ctx, key, []byte(`{"spec":{}}`))
	if err != nil {
		panic(fmt.Sprintf("creating %s: %v", key, err))
	}
	return obj
}

func filter(evs []Event, resource string, fromRV uint64) []Event {
	var out []Event
	for _, ev := range evs {
		if ev.Object.Key.Resource == resource && ev.Object.RV > fromRV {
			out = append(out, ev)
		}
	}
	return out
}

func TestWatchResumeFromEveryRV(t *testing.T) {
	s := OpenTestCluster(t, 1).Stores[0]
	ctx := testCtx(t)
	start := max(s.AppliedIndex(), 1) // 0 would mean "from now"
	evs := writeMix(t, ctx, s, 36)
	end := evs[len(evs)-1].Object.RV
	for fromRV := start; fromRV <= end; fromRV++ {
		for _, resource := range []string{"pods", "nodes"} {
			wctx, cancel := context.WithCancel(ctx)
			ch, err := s.Watch(wctx, resource, fromRV)
			if err != nil {
				t.Fatalf("Watch(%s, %d): %v", resource, fromRV, err)
			}
			want := filter(evs, resource, fromRV)
			if diff := cmp.Diff(want, recv(t, ch, len(want))); diff != "" {
				t.Fatalf("Watch(%s, %d) history (-want +got):\n%s", resource, fromRV, diff)
			}
			// The next event must be the next change, live: nothing repeated
			// or left over in between.
			live := Event{Type: Added, Object: create(ctx, s, Key{Resource: resource, Name: fmt.Sprint("live", fromRV)})}
			evs = append(evs, live)
			if diff := cmp.Diff([]Event{live}, recv(t, ch, 1)); diff != "" {
				t.Fatalf("Watch(%s, %d) live (-want +got):\n%s", resource, fromRV, diff)
			}
			cancel()
			for range ch {
			}
		}
	}
}

func TestWatchFromNowAndDeletedState(t *testing.T) {
	s := OpenTestCluster(t, 1).Stores[0]
	ctx := testCtx(t)
	key := Key{Resource: "pods", Namespace: "ns", Name: "p"}
	create(ctx, s, key)
	ch, err := s.Watch(ctx, "pods", 0)
	if err != nil {
		t.Fatal(err)
	}
	upd, err := s.Update(ctx, key, []byte(`{"metadata":{"labels":{"a":"b"}}}`), Preconditions{})
	if err != nil {
		t.Fatal(err)
	}
	del, err := s.Delete(ctx, key, Preconditions{})
	if err != nil {
		t.Fatal(err)
	}
	got := recv(t, ch, 2)
	want := []Event{{Type: Modified, Object: upd}, {Type: Deleted, Object: del}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// The deleted event carries the last state at the deletion index.
	if m := metaOf(t, got[1].Object.Data); m["resourceVersion"] != fmt.Sprint(del.RV) || m["labels"] == nil {
		t.Errorf("deleted event metadata = %v", m)
	}
}

func TestWatchTooOld(t *testing.T) {
	const window = 10
	s := OpenTestCluster(t, 1, WithConfig(func(c *Config) { c.WatchWindow = window })).Stores[0]
	ctx := testCtx(t)
	evs := writeMix(t, ctx, s, 3*window)
	oldest := evs[len(evs)-window].Object.RV // the oldest event still kept
	tests := []struct {
		fromRV  uint64
		wantErr error
	}{
		{1, ErrTooOld},
		{oldest - 2, ErrTooOld},
		{oldest - 1, nil}, // needs events from oldest on: all kept
		{oldest, nil},
		{evs[len(evs)-1].Object.RV, nil},
		{evs[len(evs)-1].Object.RV + 100, nil}, // the future is fine
	}
	for _, tt := range tests {
		wctx, cancel := context.WithCancel(ctx)
		_, err := s.Watch(wctx, "pods", tt.fromRV)
		cancel()
		if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
			t.Errorf("Watch from %d (oldest kept %d): err = %v, want %v", tt.fromRV, oldest, err, tt.wantErr)
		}
	}
}

func TestSlowWatcherDoesNotBlockWrites(t *testing.T) {
	const window = 20
	s := OpenTestCluster(t, 1, WithConfig(func(c *Config) { c.WatchWindow = window })).Stores[0]
	ctx := testCtx(t)
	slow, err := s.Watch(ctx, "pods", 0)
	if err != nil {
		t.Fatal(err)
	}
	fast, err := s.Watch(ctx, "pods", 0)
	if err != nil {
		t.Fatal(err)
	}
	// Nobody reads slow: writes must still complete. fast is read in
	// lockstep with the writes, so it never lags and must get everything.
	var want []Event
	for i := range 10 * window {
		obj := create(ctx, s, Key{Resource: "pods", Name: fmt.Sprint(i)})
		ev := Event{Type: Added, Object: obj}
		want = append(want, ev)
		if diff := cmp.Diff([]Event{ev}, recv(t, fast, 1)); diff != "" {
			t.Fatalf("fast watcher, event %d (-want +got):\n%s", i, diff)
		}
	}
	// The slow watcher was dropped: it yields an in-order prefix, then closes.
	var got []Event
	for ev := range slow {
		got = append(got, ev)
	}
	if len(got) >= len(want) {
		t.Fatalf("slow watcher received all %d events; expected it to be dropped", len(got))
	}
	if diff := cmp.Diff(want[:len(got)], got); diff != "" {
		t.Errorf("slow watcher prefix (-want +got):\n%s", diff)
	}
}

func TestWatchClosesWithContextAndStore(t *testing.T) {
	c := OpenTestCluster(t, 1)
	s := c.Stores[0]
	ctx, cancel := context.WithCancel(context.Background())
	byCtx, err := s.Watch(ctx, "pods", 0)
	if err != nil {
		t.Fatal(err)
	}
	byClose, err := s.Watch(context.Background(), "pods", 0)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	for range byCtx {
	}
	c.Kill(0)
	for range byClose {
	}
}

// A watch from a resourceVersion the member has not reached yet (a follower
// behind the leader that served the list) must not replay the events up to
// it: the client has them already.
func TestWatchFromFutureRVSkipsEventsUpToIt(t *testing.T) {
	h := newHub(16, nil)
	for rv := uint64(1); rv <= 5; rv++ {
		h.publish(Event{Type: Added, Object: Object{Key: Key{Resource: "pods", Name: fmt.Sprint(rv)}, RV: rv}})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := h.watch(ctx, "pods", 8, Narrowing{})
	if err != nil {
		t.Fatal(err)
	}
	for rv := uint64(6); rv <= 10; rv++ {
		h.publish(Event{Type: Added, Object: Object{Key: Key{Resource: "pods", Name: fmt.Sprint(rv)}, RV: rv}})
	}
	var got []uint64
	for len(got) < 2 {
		select {
		case ev := <-ch:
			got = append(got, ev.Object.RV)
		case <-time.After(5 * time.Second):
			t.Fatalf("got %v, then nothing", got)
		}
	}
	if diff := cmp.Diff([]uint64{9, 10}, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}
