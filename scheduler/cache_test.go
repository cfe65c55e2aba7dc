package scheduler

import (
	"testing"

	"github.com/google/go-cmp/cmp"

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
