package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/podsafe/podsafe/target"
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

// needsSlow is what every slow fault needs.
var needsSlow = []target.Capability{target.SlowApply}

// canSlow reports whether t can slow a store member's apply, with more than
// one member (one slow member alone is just a slow cluster).
func canSlow(t target.Target) bool {
	_, ok := t.(target.Slower)
	return ok && t.Members() > 1 && len(able(t, target.SlowApply, target.RoleStore)) > 0
}

// slowLeader slows the raft leader's state machine.
type slowLeader struct{}

func (slowLeader) Name() string { return "slow-leader" }
func (slowLeader) Describe() string {
	return "slow the raft leader's state machine (each committed change applied 5-25 ms late, as on a slow disk) and restore it"
}
func (slowLeader) Needs() []target.Capability     { return needsSlow }
func (slowLeader) Available(t target.Target) bool { return canSlow(t) }
func (slowLeader) Inject(ctx context.Context, t target.Target, rng *rand.Rand) (Injection, error) {
	return slowApply(ctx, t, leaderOrAny(ctx, t, rng), rng, "slow leader")
}

// slowMember slows a random member's state machine.
type slowMember struct{}

func (slowMember) Name() string { return "slow-member" }
func (slowMember) Describe() string {
	return "slow a random control-plane member's state machine (each committed change applied 5-25 ms late) and restore it"
}
func (slowMember) Needs() []target.Capability     { return needsSlow }
func (slowMember) Available(t target.Target) bool { return canSlow(t) }
func (slowMember) Inject(ctx context.Context, t target.Target, rng *rand.Rand) (Injection, error) {
	return slowApply(ctx, t, rng.IntN(t.Members()), rng, "slow member")
}

func slowApply(ctx context.Context, t target.Target, i int, rng *rand.Rand, what string) (Injection, error) {
	st, ok := storeOf(t, i)
	if !ok || !t.Can(target.SlowApply, st.Name) {
		return Injection{}, fmt.Errorf("%s: member %d: %w", what, i, target.ErrUnsupported)
	}
	// A member that is down cannot be slowed: say so before drawing the
	// delay.
	if p, ok := t.(target.Processes); ok && !p.Running(st.Name) {
		return Injection{}, fmt.Errorf("%s: member %s is down: %w", what, st.Name, target.ErrNotRunning)
	}
	d := slowApplyMin + time.Duration(rng.Int64N(int64(slowApplyMax-slowApplyMin)))
	d = d.Round(time.Millisecond)
	// The member may be restarted before the heal: a restarted member was
	// never slowed, and the heal leaves it alone.
	heal, err := t.(target.Slower).SlowApply(ctx, i, d)
	if err != nil {
		return Injection{}, fmt.Errorf("%s %s: %w", what, st.Name, err)
	}
	return Injection{
		Description: fmt.Sprintf("%s %s: each change applied %s late", what, st.Name, d),
		Targets:     []string{st.Name},
		Components:  []string{st.Name},
		Params:      map[string]string{"member": member(i), "delay": d.String()},
		Heal:        heal,
	}, nil
}
