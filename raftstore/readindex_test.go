package raftstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// A client that watches on one member and reads on others must never be told
// "not found" for an object its watch already delivered: the read began after
// the change was visible, so a linearizable read reflects it. The leader's
// state machine is slowed down, so followers apply (and stream) each create
// well before the leader itself has applied it; a read that did not wait for
// the leader's state machine to reach the read index would miss it.
func TestReadAfterWatchOnSlowLeader(t *testing.T) {
	c := OpenTestCluster(t, 3)
	ctx := testCtx(t)
	leader := c.Leader()
	leader.SetApplyDelay(20 * time.Millisecond)
	follower := c.Followers()[0]
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	events, err := follower.Watch(watchCtx, "pods", 0)
	if err != nil {
		t.Fatal(err)
	}

	const objects = 60
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < objects; i += 3 {
				key := Key{Resource: "pods", Namespace: "default", Name: fmt.Sprintf("p%d", i)}
				if _, err := leader.Create(ctx, key, []byte(`{"spec":{}}`)); err != nil {
					t.Errorf("creating %s: %v", key, err)
				}
			}
		}()
	}
	readers := []*Store{follower, leader, c.Followers()[1]}
	for seen := 0; seen < objects; {
		ev, ok := <-events
		if !ok {
			t.Fatalf("watch closed after %d events", seen)
		}
		if ev.Type != Added {
			continue
		}
		seen++
		for _, r := range readers {
			if _, err := r.Get(ctx, ev.Object.Key); err != nil {
				t.Errorf("read of %s on %s after its ADDED event (rv %d) was delivered: %v", ev.Object.Key, r.ID(), ev.Object.RV, err)
			}
		}
		objs, rev, err := follower.List(ctx, "pods", "default")
		if err != nil {
			t.Fatalf("listing: %v", err)
		}
		if rev < ev.Object.RV {
			t.Errorf("list after the watch delivered rv %d reflects only rv %d (%d objects)", ev.Object.RV, rev, len(objs))
		}
	}
	wg.Wait()
}

// A store whose last committed entries are raft's own (the leader's no-op,
// barriers) must still serve reads: the state machine never sees those
// entries, so waiting for it to "apply" them would wait forever.
func TestReadIndexAfterNonCommandEntries(t *testing.T) {
	c := OpenTestCluster(t, 3)
	ctx := testCtx(t)
	key := Key{Resource: "pods", Namespace: "default", Name: "a"}
	if _, err := c.Leader().Create(ctx, key, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	// A new term begins with the new leader's no-op entry.
	old := c.Leader()
	if err := old.TransferLeadership(ctx); err != nil {
		t.Fatal(err)
	}
	for c.Leader() == old {
		time.Sleep(10 * time.Millisecond)
	}
	for i, s := range c.Stores {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := s.Get(rctx, key)
		cancel()
		if err != nil {
			t.Errorf("read on member %d after a leader change: %v", i, err)
		}
		if err := c.Leader().raft.Barrier(time.Second).Error(); err != nil && !errors.Is(err, ErrTimeout) {
			t.Fatalf("barrier: %v", err)
		}
	}
}

// A list names a resourceVersion a watch can start from exactly, even on a
// store where nothing has been written yet: never 0, which a Kubernetes
// client would take for "any version" (a watch from "0" starts with the
// current state as synthetic ADDED events, in no resourceVersion order).
func TestListRevisionOfEmptyStore(t *testing.T) {
	c := OpenTestCluster(t, 3)
	ctx := testCtx(t)
	for _, s := range c.Stores {
		objs, rev, err := s.List(ctx, "leases", "ns")
		if err != nil {
			t.Fatal(err)
		}
		if len(objs) != 0 || rev == 0 {
			t.Errorf("list of an empty store on %s: %d objects at rv %d, want none at a nonzero rv", s.ID(), len(objs), rev)
		}
	}
}
