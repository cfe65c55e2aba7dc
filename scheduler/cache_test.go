package scheduler

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/podsafe/podsafe/scheduler/framework"
	"github.com/podsafe/podsafe/scheduler/st"
)

// TestCacheForgetPod: a failed binding forgets the assumed pod, but not a
// pod the informer has shown bound meanwhile (the binding whose answer was
// lost may have landed): its room stays taken.
func TestCacheForgetPod(t *testing.T) {
	pod := st.MakePod().Name("p").Req("1", "").Obj()
	bound := st.MakePod().Name("p").Req("1", "").Node("n2").Obj()
	for _, tc := range []struct {
		name       string
		events     func(c *Cache)
		wantForgot bool
		wantNode   string
	}{
		{name: "still assumed: forgotten", events: func(c *Cache) {}, wantForgot: true},
		{name: "shown bound meanwhile: kept", events: func(c *Cache) { c.SetPod(bound, "n2") }, wantNode: "n2"},
		{name: "deleted meanwhile: nothing to forget", events: func(c *Cache) { c.RemovePod(pod.UID) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCache()
			c.SetNode(st.MakeNode().Name("n1").Capacity("2", "8Gi", "10").Obj())
			c.SetNode(st.MakeNode().Name("n2").Capacity("2", "8Gi", "10").Obj())
			c.AssumePod(pod, "n1")
			tc.events(c)
			forgot := c.ForgetPod(pod.UID)
			node, _ := c.PodNode(pod.UID)
			if diff := cmp.Diff([]any{tc.wantForgot, tc.wantNode}, []any{forgot, node}); diff != "" {
				t.Errorf("(forgotten, counted on) (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCacheSnapshotSkipsNodeNotYetKnown: a pod counted on a node the cache
// has not seen yet stays out of the snapshot, update after update, until
// its node arrives.
func TestCacheSnapshotSkipsNodeNotYetKnown(t *testing.T) {
	c := NewCache()
	c.SetNode(st.MakeNode().Name("n1").Capacity("2", "8Gi", "10").Obj())
	c.SetPod(st.MakePod().Name("p").Req("1", "").Node("n2").Obj(), "n2")
	snap := framework.NewEmptySnapshot()
	for range 2 {
		c.UpdateSnapshot(snap)
		if snap.NumNodes() != 1 || snap.Get("n1") == nil {
			t.Fatalf("snapshot has %d nodes, want only n1", snap.NumNodes())
		}
	}
	c.SetNode(st.MakeNode().Name("n2").Capacity("2", "8Gi", "10").Obj())
	c.UpdateSnapshot(snap)
	if n2 := snap.Get("n2"); n2 == nil || len(n2.Pods) != 1 {
		t.Errorf("n2 in the snapshot once known: %+v, want it with its pod", n2)
	}
}

// TestCacheSnapshotCopiesOnlyChangedNodes: an update replaces the NodeInfo
// of a node that changed and keeps the very NodeInfo of one that did not
// (plugins keep per-node results between cycles by it).
func TestCacheSnapshotCopiesOnlyChangedNodes(t *testing.T) {
	c := NewCache()
	c.SetNode(st.MakeNode().Name("n1").Capacity("2", "8Gi", "10").Obj())
	c.SetNode(st.MakeNode().Name("n2").Capacity("2", "8Gi", "10").Obj())
	snap := framework.NewEmptySnapshot()
	c.UpdateSnapshot(snap)
	n1, n2 := snap.Get("n1"), snap.Get("n2")
	c.SetPod(st.MakePod().Name("p").Req("1", "").Node("n2").Obj(), "n2")
	c.UpdateSnapshot(snap)
	if snap.Get("n1") != n1 {
		t.Errorf("unchanged n1 was copied again")
	}
	if got := snap.Get("n2"); got == nil || got == n2 || len(got.Pods) != 1 {
		t.Errorf("changed n2 not refreshed: %+v (the old NodeInfo: %v)", got, got == n2)
	}
}
