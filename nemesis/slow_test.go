package nemesis_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsafe/podsafe/cluster"
)

// slow-leader bites: while it lasts, followers apply changes the leader has
// not applied yet; reads (served by the leader) still see every change a
// follower already applied; after the heal the leader keeps up again.
func TestSlowLeader(t *testing.T) {
	c := cluster.StartForTest(t, cluster.Config{Topology: cluster.DefaultTopology(3, 0, 1), TimeScale: 1})
	cs := admin(t, c)
	ctx := context.Background()
	inj := inject(t, c, "slow-leader", seeded())
	leader := c.LeaderIndex()
	if want := cluster.MemberHost(leader); inj.Targets[0] != want {
		t.Fatalf("slowed %v, want the leader %s", inj.Targets, want)
	}

	var (
		wg     sync.WaitGroup
		lagged bool
		mu     sync.Mutex
	)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				name := fmt.Sprintf("l%d-%d", w, i)
				l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
				if _, err := cs.CoordinationV1().Leases("default").Create(ctx, l, metav1.CreateOptions{}); err != nil {
					t.Errorf("creating %s: %v", name, err)
					continue
				}
				for m := range c.Members() {
					if m != leader && c.Store(m).AppliedIndex() > c.Store(leader).AppliedIndex() {
						mu.Lock()
						lagged = true
						mu.Unlock()
					}
				}
			}
		}()
	}
	wg.Wait()
	if !lagged {
		t.Error("no follower was ever ahead of the slowed leader")
	}
	heal(t, inj)
	list, err := cs.CoordinationV1().Leases("default").List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 40 {
		t.Fatalf("after the heal: %d leases, %v; want 40", len(list.Items), err)
	}
	eventually(t, "every member applied the same index", 30*time.Second, func() bool {
		first := c.Store(0).AppliedIndex()
		for m := range c.Members() {
			if c.Store(m).AppliedIndex() != first {
				return false
			}
		}
		return true
	})
}
