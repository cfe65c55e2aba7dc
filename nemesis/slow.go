package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/podsafe/podsafe/cluster"
)

// Slow members. A member whose disk or CPU is slow applies committed changes
// late: the others apply (and stream to their watchers) what it has not yet
// applied. Nothing is lost and every guarantee must still hold; reads served
// by a slow leader must wait for its state machine (read-index), or a client
// is told "not found" for an object its watch already delivered.
func init() {
	register("slow", slowLeader{}, slowMember{})
}

// slowApplyRange bounds the injected delay per applied change.
const (
	slowApplyMin = 5 * time.Millisecond
	slowApplyMax = 25 * time.Millisecond
)

// slowLeader slows the raft leader's state machine.
type slowLeader struct{}

func (slowLeader) Name() string { return "slow-leader" }
func (slowLeader) Describe() string {
	return "slow the raft leader's state machine (each committed change applied 5-25 ms late, as on a slow disk) and restore it"
}
func (slowLeader) Available(c *cluster.Cluster) bool { return c.Members() > 1 }
func (slowLeader) Inject(ctx context.Context, c *cluster.Cluster, rng *rand.Rand) (Injection, error) {
	return slowApply(c, leaderOrAny(c, rng), rng, "slow leader")
}

// slowMember slows a random member's state machine.
type slowMember struct{}

func (slowMember) Name() string { return "slow-member" }
func (slowMember) Describe() string {
	return "slow a random control-plane member's state machine (each committed change applied 5-25 ms late) and restore it"
}
func (slowMember) Available(c *cluster.Cluster) bool { return c.Members() > 1 }
func (slowMember) Inject(ctx context.Context, c *cluster.Cluster, rng *rand.Rand) (Injection, error) {
	return slowApply(c, rng.IntN(c.Members()), rng, "slow member")
}

func slowApply(c *cluster.Cluster, i int, rng *rand.Rand, what string) (Injection, error) {
	st := c.Store(i)
	if st == nil {
		return Injection{}, fmt.Errorf("%s: member %s is down", what, cluster.MemberHost(i))
	}
	d := slowApplyMin + time.Duration(rng.Int64N(int64(slowApplyMax-slowApplyMin)))
	d = d.Round(time.Millisecond)
	st.SetApplyDelay(d)
	host := cluster.MemberHost(i)
	return Injection{
		Description: fmt.Sprintf("%s %s: each change applied %s late", what, host, d),
		Targets:     []string{host},
		// The member may have been restarted meanwhile: a restarted member
		// is a new store that was never slowed, and the old one is gone.
		Heal: func() error { st.SetApplyDelay(0); return nil },
	}, nil
}
