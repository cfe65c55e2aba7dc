package workload

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// maxInterval bounds the spacing of a Limiter's slots, so that a tiny rate
// stays a duration.
const maxInterval = 24 * time.Hour

// Limiter bounds how many operations the processes of a workload start per
// second, all together, as Jepsen's --rate does. Time is cut into slots of
// 1/rate; an operation takes the next free slot and starts at a random point
// in it, so starts are staggered rather than released in bursts, and any
// span of d holds at most d×rate+2 of them. Slots that pass while every
// process is busy are not made up later: the rate is a ceiling, never a
// catch-up. A nil *Limiter does not limit. Safe for concurrent use.
type Limiter struct {
	interval time.Duration
	clock    clock.Clock

	mu   sync.Mutex
	rng  *rand.Rand
	next time.Time // start of the next free slot
}

// NewLimiter returns a Limiter of rate operations per second on clk (nil:
// the real clock), its offsets within slots drawn from seed; a rate of 0 or
// less (or NaN) returns nil, which does not limit. Rates are in the clock's
// seconds: pass the real clock for operations per wall-clock second.
func NewLimiter(rate float64, clk clock.Clock, seed uint64) *Limiter {
	if !(rate > 0) || math.IsInf(rate, 1) {
		return nil
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	interval := maxInterval
	if s := 1 / rate; s < maxInterval.Seconds() {
		interval = max(time.Duration(s*float64(time.Second)), 1)
	}
	return &Limiter{interval: interval, clock: clk, rng: rand.New(rand.NewPCG(seed, 0x7a7e))}
}

// Interval is the length of a slot: 1/rate.
func (l *Limiter) Interval() time.Duration { return l.interval }

// reserve takes the next free slot at or after now and returns when its
// operation starts.
func (l *Limiter) reserve(now time.Time) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	slot := l.next
	if slot.Before(now) {
		slot = now // idle slots are gone, not banked
	}
	l.next = slot.Add(l.interval)
	return slot.Add(time.Duration(l.rng.Int64N(int64(l.interval))))
}

// Wait blocks until the caller may start its next operation, or until ctx
// ends, which it returns ctx's error for; the slot it held is then lost.
// A nil Limiter returns at once (ctx's error, if ctx has ended).
func (l *Limiter) Wait(ctx context.Context) error {
	if l == nil {
		return ctx.Err()
	}
	now := l.clock.Now()
	d := l.reserve(now).Sub(now)
	if d <= 0 {
		return ctx.Err()
	}
	t := l.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}
