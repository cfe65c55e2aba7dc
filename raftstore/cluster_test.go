package raftstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestReadsOnAnyMemberSeeAcknowledgedWrites(t *testing.T) {
	c := OpenTestCluster(t, 3)
	ctx := testCtx(t)
	for i := range 15 {
		key := Key{Resource: "pods", Namespace: "ns", Name: fmt.Sprint(i % 5)}
		var (
			ack Object
			err error
		)
		if i < 5 {
			ack, err = c.Stores[i%3].Create(ctx, key, []byte(`{}`))
		} else {
			ack, err = c.Stores[i%3].Update(ctx, key, []byte(fmt.Sprintf(`{"spec":{"i":%d}}`, i)), Preconditions{})
		}
		if err != nil {
			t.Fatalf("write %d via %s: %v", i, c.Stores[i%3].ID(), err)
		}
		// Straight after the acknowledgement, every member's read sees it.
		for _, s := range c.Stores {
			got, err := s.Get(ctx, key)
			if err != nil || got.RV != ack.RV {
				t.Fatalf("write %d acked at RV %d; Get on %s = RV %d, %v", i, ack.RV, s.ID(), got.RV, err)
			}
			objs, rev, err := s.List(ctx, "pods", "ns")
			if err != nil || rev < ack.RV || !slices.ContainsFunc(objs, func(o Object) bool { return o.RV == ack.RV }) {
				t.Fatalf("write %d acked at RV %d; List on %s = rev %d, %v", i, ack.RV, s.ID(), rev, err)
			}
		}
	}
}

// outcome is what a writer learned about one create.
type outcome struct {
	key Key
	obj Object
	err error
}

func TestLeaderCrashLosesNoAcknowledgedWrite(t *testing.T) {
	c := OpenTestCluster(t, 3)
	ctx := testCtx(t)
	stores := slices.Clone(c.Stores)
	watches := make([]<-chan Event, len(stores))
	for i, s := range stores {
		ch, err := s.Watch(ctx, "pods", 1)
		if err != nil {
			t.Fatal(err)
		}
		watches[i] = ch
	}

	const writers, perWriter = 4, 40
	var (
		mu       sync.Mutex
		outcomes []outcome
		wg       sync.WaitGroup
		written  = make(chan struct{}, writers*perWriter)
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				key := Key{Resource: "pods", Namespace: "ns", Name: fmt.Sprintf("w%d-%d", w, i)}
				s := stores[(w+i)%len(stores)]
				opCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
				obj, err := s.Create(opCtx, key, []byte(`{}`))
				cancel()
				if errors.Is(err, ErrClosed) {
					// The member crashed before taking the request; use another.
					s = stores[(w+i+1)%len(stores)]
					obj, err = s.Create(ctx, key, []byte(`{}`))
				}
				mu.Lock()
				outcomes = append(outcomes, outcome{key: key, obj: obj, err: err})
				mu.Unlock()
				written <- struct{}{}
			}
		}()
	}
	for range writers * perWriter / 3 {
		<-written
	}
	old := c.Leader()
	oldIdx := c.Index(old.ID())
	c.Kill(oldIdx)
	wg.Wait()

	newLeader := c.Leader()
	if newLeader.ID() == old.ID() {
		t.Fatalf("leader %s still leads after being killed", old.ID())
	}
	c.Restart(oldIdx)
	c.Leader()

	// Every acknowledged write is there; every write reported unavailable
	// is not; writes with unknown outcome may be either.
	objs, rev, err := newLeader.List(ctx, "pods", "ns")
	if err != nil {
		t.Fatal(err)
	}
	present := map[Key]Object{}
	for _, o := range objs {
		present[o.Key] = o
	}
	acked := 0
	for _, o := range outcomes {
		got, ok := present[o.key]
		switch {
		case o.err == nil:
			acked++
			if !ok || got.RV != o.obj.RV {
				t.Errorf("acknowledged create of %s at RV %d lost (present %v)", o.key, o.obj.RV, ok)
			}
		case errors.Is(o.err, ErrUnavailable):
			if ok {
				t.Errorf("create of %s reported unavailable but applied at RV %d: %v", o.key, got.RV, o.err)
			}
		case errors.Is(o.err, ErrTimeout):
		default:
			t.Errorf("create of %s: unexpected error %v", o.key, o.err)
		}
	}
	t.Logf("%d of %d creates acknowledged; %d present", acked, len(outcomes), len(objs))
	if acked < len(outcomes)/2 {
		t.Errorf("only %d of %d creates acknowledged", acked, len(outcomes))
	}

	// Every member, including the restarted one, emits the same events.
	c.WaitApplied(rev)
	var want []Event
	for i, s := range c.Stores {
		ch := watches[i]
		if i == oldIdx {
			// The restarted member replays the log from the start.
			if ch, err = s.Watch(ctx, "pods", 1); err != nil {
				t.Fatal(err)
			}
		}
		got := recv(t, ch, len(objs))
		if want == nil {
			want = got
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("member %s events differ from member %s (-want +got):\n%s", s.ID(), c.Stores[0].ID(), diff)
		}
	}
	// The killed member's watch saw a prefix of the same sequence.
	var prefix []Event
	for ev := range watches[oldIdx] {
		prefix = append(prefix, ev)
	}
	if diff := cmp.Diff(want[:min(len(prefix), len(want))], prefix); diff != "" {
		t.Errorf("killed member's events are not a prefix (-want +got):\n%s", diff)
	}
}

func TestStaleReadsBugSwitch(t *testing.T) {
	tests := []struct {
		name       string
		staleReads bool
	}{
		{"default is linearizable", false},
		{"StaleReads serves local state", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := OpenTestCluster(t, 3, WithConfig(func(cfg *Config) {
				cfg.StaleReads = tt.staleReads
				cfg.LeaderWait = 300 * time.Millisecond
			}))
			ctx := testCtx(t)
			leader := c.Leader()
			key := Key{Resource: "pods", Namespace: "ns", Name: "p"}
			v1, err := leader.Create(ctx, key, []byte(`{"spec":{"v":1}}`))
			if err != nil {
				t.Fatal(err)
			}
			c.WaitApplied(v1.RV)
			follower := c.Followers()[0]
			c.IsolateMember(c.Index(follower.ID()))
			v2, err := leader.Update(ctx, key, []byte(`{"spec":{"v":2}}`), Preconditions{})
			if err != nil {
				t.Fatal(err)
			}

			got, err := follower.Get(ctx, key)
			_, rev, listErr := follower.List(ctx, "pods", "")
			if tt.staleReads {
				if err != nil || got.RV != v1.RV || listErr != nil || rev >= v2.RV {
					t.Errorf("cut-off follower: Get = RV %d, %v; List rev %d, %v; want the stale RV %d", got.RV, err, rev, listErr, v1.RV)
				}
			} else {
				if !errors.Is(err, ErrUnavailable) || !errors.Is(listErr, ErrUnavailable) {
					t.Errorf("cut-off follower: Get = RV %d, %v; List = %v; want ErrUnavailable", got.RV, err, listErr)
				}
			}

			c.Net.Heal()
			c.WaitApplied(v2.RV)
			if got, err := follower.Get(ctx, key); err != nil || got.RV != v2.RV {
				t.Errorf("healed follower: Get = RV %d, %v; want RV %d", got.RV, err, v2.RV)
			}
		})
	}
}

// TestOutcomeClassification writes to a leader that has just been cut off
// from everyone. Whatever the timing, the outcome must be honest: a write
// reported as unavailable was not applied.
func TestOutcomeClassification(t *testing.T) {
	c := OpenTestCluster(t, 3, WithConfig(func(cfg *Config) { cfg.LeaderWait = 300 * time.Millisecond }))
	ctx := testCtx(t)
	old := c.Leader()
	c.IsolateMember(c.Index(old.ID()))
	// A read on the cut-off leader cannot confirm its leadership.
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		if obj, err := old.Get(ctx, podA); !errors.Is(err, ErrUnavailable) {
			t.Errorf("Get on a cut-off leader = %v, %v; want ErrUnavailable", obj, err)
		}
	}()
	defer func() { <-readDone }()
	var results []outcome
	for i := range 5 {
		key := Key{Resource: "pods", Namespace: "ns", Name: fmt.Sprint(i)}
		obj, err := old.Create(ctx, key, []byte(`{}`))
		results = append(results, outcome{key: key, obj: obj, err: err})
	}
	c.Net.Heal()
	leader := c.Leader()
	c.WaitApplied(leader.AppliedIndex())
	for _, r := range results {
		_, err := leader.Get(ctx, r.key)
		switch {
		case r.err == nil:
			t.Errorf("create of %s on a cut-off leader succeeded", r.key)
		case errors.Is(r.err, ErrUnavailable):
			if !errors.Is(err, ErrNotFound) {
				t.Errorf("create of %s reported %v, but Get = %v", r.key, r.err, err)
			}
		case !errors.Is(r.err, ErrTimeout):
			t.Errorf("create of %s: unexpected error %v", r.key, r.err)
		}
		t.Logf("%s: %v", r.key, r.err)
	}
}
