package workload

import (
	"context"
	"errors"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

func TestNewLimiterUnlimited(t *testing.T) {
	for _, rate := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		if l := NewLimiter(rate, nil, 1); l != nil {
			t.Errorf("NewLimiter(%g) = %+v, want nil (no bound)", rate, l)
		}
	}
	var l *Limiter
	if err := l.Wait(context.Background()); err != nil {
		t.Errorf("nil Limiter: Wait = %v", err)
	}
	if got := NewLimiter(1e-12, nil, 1).Interval(); got != maxInterval {
		t.Errorf("a tiny rate's interval = %v, want the bound %v", got, maxInterval)
	}
	if got := NewLimiter(1e12, nil, 1).Interval(); got != 1 {
		t.Errorf("a huge rate's interval = %v, want 1ns", got)
	}
	if got := NewLimiter(200, nil, 1).Interval(); got != 5*time.Millisecond {
		t.Errorf("rate 200: interval %v, want 5ms", got)
	}
}

// TestLimiterStaggersWithinSlots: many processes asking at once get one
// slot each, in order, each start at a random point of its own slot.
func TestLimiterStaggersWithinSlots(t *testing.T) {
	l := NewLimiter(100, nil, 42) // 10 ms slots
	now := time.Unix(1000, 0)
	var offsets []time.Duration
	for k := range 1000 {
		at := l.reserve(now)
		lo := now.Add(time.Duration(k) * l.interval)
		if at.Before(lo) || !at.Before(lo.Add(l.interval)) {
			t.Fatalf("start %d at %v, outside its slot [%v, %v)", k, at.Sub(now), lo.Sub(now), lo.Add(l.interval).Sub(now))
		}
		offsets = append(offsets, at.Sub(lo))
	}
	// Staggered, not lock-step: the offsets spread over the slot.
	sort.Slice(offsets, func(i, j int) bool { return offsets[i] < offsets[j] })
	if offsets[100] > 2*time.Millisecond || offsets[900] < 8*time.Millisecond {
		t.Errorf("offsets within slots do not spread: 10th percentile %v, 90th %v", offsets[100], offsets[900])
	}
}

// TestLimiterBound: whatever the pattern of demand, no window of d holds
// more than d×rate+2 starts, and idle time is not banked for a burst.
func TestLimiterBound(t *testing.T) {
	const rate = 50.0
	l := NewLimiter(rate, nil, 7)
	now := time.Unix(0, 0)
	var starts []time.Time
	for i := range 3000 {
		// Bursts of demand, and idle gaps of up to two seconds.
		switch {
		case i%500 == 499:
			now = now.Add(2 * time.Second)
		case i%7 == 0:
			now = now.Add(time.Duration(i%13) * time.Millisecond)
		}
		at := l.reserve(now)
		if at.Before(now) {
			t.Fatalf("start %d at %v, before it was asked for at %v", i, at, now)
		}
		starts = append(starts, at)
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i].Before(starts[j]) })
	for _, d := range []time.Duration{10 * time.Millisecond, 100 * time.Millisecond, time.Second, 5 * time.Second} {
		limit := int(d.Seconds()*rate) + 2
		j := 0
		for i := range starts {
			for starts[i].Sub(starts[j]) >= d {
				j++
			}
			if n := i - j + 1; n > limit {
				t.Fatalf("%d starts within %v ending at %v, want at most %d", n, d, starts[i].Sub(starts[0]), limit)
			}
		}
	}
}

// TestLimiterWaitFakeClock: Wait blocks until the clock reaches the slot
// and ends early with its context.
func TestLimiterWaitFakeClock(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(0, 0))
	l := NewLimiter(1, clk, 3) // 1 s slots
	var started atomic.Int64
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if err := l.Wait(context.Background()); err != nil {
				t.Error(err)
			}
			started.Add(1)
		})
	}
	// Three processes hold three successive 1 s slots (or later ones, if
	// they ask late): never more than one starts per second of clock.
	deadline := time.Now().Add(30 * time.Second)
	for sec := int64(1); started.Load() < 3; sec++ {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of 3 started after %d s of clock", started.Load(), sec)
		}
		clk.Step(time.Second)
		time.Sleep(5 * time.Millisecond) // let the released ones count
		if n := started.Load(); n > sec {
			t.Fatalf("%d started by %d s of clock, want at most %d", n, sec, sec)
		}
	}
	wg.Wait()

	ctx, cancel := context.WithCancel(context.Background())
	l.reserve(clk.Now()) // the next slot is taken: Wait must wait
	done := make(chan error, 1)
	go func() { done <- l.Wait(ctx) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Wait after cancel = %v, want context.Canceled", err)
	}
}

// TestLimiterRealClockUpperBound: on the real clock, n starts take at least
// (n-1)/rate, however slow the machine (slowness only lowers n).
func TestLimiterRealClockUpperBound(t *testing.T) {
	const rate = 200.0
	l := NewLimiter(rate, nil, 9)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	begin := time.Now()
	var n atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for l.Wait(ctx) == nil {
				n.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(begin)
	if limit := int64(elapsed.Seconds()*rate) + 2; n.Load() > limit {
		t.Errorf("%d starts in %v at rate %g, want at most %d", n.Load(), elapsed, rate, limit)
	}
}
