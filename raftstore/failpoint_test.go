package raftstore

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/pingcap/failpoint"

	"github.com/podsafe/podsafe/internal/fpctx"
)

// TestFailpointApplyDelayAimedAtOneMember: applyDelay aimed at one follower
// fires in that member's state machine only, and slows it only. It runs
// in a failpoint build (make test-failpoints sets PODSAFE_FAILPOINTS=1);
// an ordinary build's markers are inert and it is skipped.
//
// What it asserts is where the marker fired (fpctx counts that, per
// component) and, with the failpoint pausing the aimed member's applies,
// that this member lags while the others apply every write: properties a
// loaded machine cannot blur, unlike a measured delay.
func TestFailpointApplyDelayAimedAtOneMember(t *testing.T) {
	if os.Getenv("PODSAFE_FAILPOINTS") != "1" {
		t.Skip("ordinary build: failpoint markers are inert; make test-failpoints runs this test")
	}
	const name = "github.com/podsafe/podsafe/raftstore/applyDelay"
	c := OpenTestCluster(t, 3)
	ctx := testCtx(t)
	leader := c.Leader()
	aimed := c.Followers()[0]
	write := func(i int) uint64 {
		t.Helper()
		obj, err := leader.Create(ctx, Key{Resource: "pods", Namespace: "default", Name: fmt.Sprintf("p%d", i)}, []byte(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		return obj.RV
	}
	fired := func() map[string]uint64 {
		out := map[string]uint64{}
		for _, s := range c.Stores {
			out[s.ID()] = fpctx.Fired(name, s.ID())
		}
		return out
	}

	// Fired where aimed, and nowhere else.
	defer fpctx.Aim(name, aimed.ID())()
	if err := failpoint.Enable(name, "return(true)"); err != nil {
		t.Fatal(err)
	}
	before := fired()
	const writes = 20
	var last uint64
	for i := range writes {
		last = write(i)
	}
	c.WaitApplied(last)
	after := fired()
	for id := range after {
		n := after[id] - before[id]
		switch {
		case id == aimed.ID() && n < writes:
			t.Errorf("aimed at %s, applyDelay fired %d times there for %d writes", id, n, writes)
		case id != aimed.ID() && n != 0:
			t.Errorf("aimed at %s, applyDelay fired %d times in %s", aimed.ID(), n, id)
		}
	}

	// Pausing the aimed member's applies: it lags, the others do not.
	if err := failpoint.Enable(name, "pause"); err != nil {
		t.Fatal(err)
	}
	paused := true
	defer func() {
		if paused {
			_ = failpoint.Disable(name)
		}
	}()
	last = write(writes)
	deadline := time.Now().Add(10 * time.Second)
	for !othersReflect(c, aimed, last) {
		if time.Now().After(deadline) {
			t.Fatalf("members other than %s did not apply index %d while it was paused", aimed.ID(), last)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if aimed.Reflects(last) {
		t.Errorf("%s applied index %d though applyDelay paused its applies", aimed.ID(), last)
	}
	if err := failpoint.Disable(name); err != nil {
		t.Fatal(err)
	}
	paused = false
	c.WaitApplied(last)
}

// othersReflect reports whether every running member but skip has applied
// index.
func othersReflect(c *TestCluster, skip *Store, index uint64) bool {
	for _, s := range c.Stores {
		if s != nil && s != skip && !s.Reflects(index) {
			return false
		}
	}
	return true
}
