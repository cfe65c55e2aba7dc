package scaledclock

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// NewTimer returns a timer whose channel receives the scaled time once scaled
// duration d has passed (d/scale of wall time). As with Go's timers since
// 1.23, no stale value is received after Stop or Reset returns.
func (c *Clock) NewTimer(d time.Duration) clock.Timer {
	tm := &timer{c: c, ch: make(chan time.Time, 1)}
	tm.mu.Lock()
	defer tm.mu.Unlock()
	tm.startLocked(d)
	return tm
}

// AfterFunc calls f in its own goroutine once scaled duration d has passed.
// The returned timer's C is nil; Stop and Reset behave as time.Timer's.
func (c *Clock) AfterFunc(d time.Duration, f func()) clock.Timer {
	ft := &funcTimer{c: c, f: f}
	ft.mu.Lock()
	defer ft.mu.Unlock()
	ft.startLocked(d)
	return ft
}

// NewTicker returns a ticker that sends the scaled time every scaled period d,
// dropping ticks a slow receiver misses, like time.Ticker. It panics if
// d <= 0.
func (c *Clock) NewTicker(d time.Duration) clock.Ticker {
	if d <= 0 {
		panic("scaledclock: non-positive interval for NewTicker")
	}
	tk := &ticker{c: c, ch: make(chan time.Time, 1), period: max(c.WallFor(d), 1)}
	tk.mu.Lock()
	defer tk.mu.Unlock()
	tk.next = time.Now().Add(tk.period)
	tk.t = time.AfterFunc(tk.period, tk.fire)
	return tk
}

// timer is a clock.Timer over a wall timer that delivers scaled readings.
// Each start gets a generation so that a wall timer that fired just before a
// Stop or Reset cannot deliver afterwards.
type timer struct {
	c  *Clock
	ch chan time.Time

	mu     sync.Mutex
	t      *time.Timer
	gen    uint64
	active bool
}

func (tm *timer) startLocked(d time.Duration) {
	tm.gen++
	gen := tm.gen
	tm.active = true
	tm.t = time.AfterFunc(tm.c.WallFor(d), func() { tm.fire(gen) })
}

func (tm *timer) fire(gen uint64) {
	if tm.c.held(func() { tm.fire(gen) }) {
		return
	}
	tm.mu.Lock()
	defer tm.mu.Unlock()
	if gen != tm.gen || !tm.active {
		return
	}
	tm.active = false
	select {
	case tm.ch <- tm.c.Now():
	default:
	}
}

// stopLocked disarms the timer and drops an undelivered value, reporting
// whether the timer was still pending.
func (tm *timer) stopLocked() bool {
	was := tm.active
	tm.active = false
	tm.gen++
	tm.t.Stop()
	select {
	case <-tm.ch:
	default:
	}
	return was
}

// C returns the channel the scaled time is sent on.
func (tm *timer) C() <-chan time.Time { return tm.ch }

// Stop prevents the timer from firing and reports whether it was pending.
func (tm *timer) Stop() bool {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return tm.stopLocked()
}

// Reset restarts the timer for scaled duration d and reports whether it was
// pending.
func (tm *timer) Reset(d time.Duration) bool {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	was := tm.stopLocked()
	tm.startLocked(d)
	return was
}

// funcTimer is the clock.Timer of AfterFunc. Like timer it counts
// generations, so that a call held back by a paused clock is dropped by a
// Stop or Reset made meanwhile.
type funcTimer struct {
	c *Clock
	f func()

	mu      sync.Mutex
	t       *time.Timer
	gen     uint64
	pending bool // armed, or fired while the clock was paused
}

func (ft *funcTimer) startLocked(d time.Duration) {
	ft.gen++
	gen := ft.gen
	ft.pending = true
	ft.t = time.AfterFunc(ft.c.WallFor(d), func() { ft.fire(gen) })
}

// fire runs f, in the wall timer's goroutine or, when held back by a pause,
// in a goroutine of its own.
func (ft *funcTimer) fire(gen uint64) {
	if ft.c.held(func() { go ft.fire(gen) }) {
		return
	}
	ft.mu.Lock()
	if gen != ft.gen || !ft.pending {
		ft.mu.Unlock()
		return
	}
	ft.pending = false
	ft.mu.Unlock()
	ft.f()
}

func (ft *funcTimer) stopLocked() bool {
	was := ft.pending
	ft.pending = false
	ft.gen++
	ft.t.Stop()
	return was
}

func (ft *funcTimer) C() <-chan time.Time { return nil }

// Stop prevents f from running and reports whether it had not started.
func (ft *funcTimer) Stop() bool {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	return ft.stopLocked()
}

// Reset re-arms the timer for scaled duration d and reports whether f had
// not yet started.
func (ft *funcTimer) Reset(d time.Duration) bool {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	was := ft.stopLocked()
	ft.startLocked(d)
	return was
}

// ticker re-arms one wall timer per tick against a fixed schedule, so ticks
// do not drift, and skips the ticks it fell behind on.
type ticker struct {
	c      *Clock
	ch     chan time.Time
	period time.Duration // wall

	mu      sync.Mutex
	t       *time.Timer
	next    time.Time // wall instant of the next tick
	stopped bool
}

func (tk *ticker) fire() {
	if tk.c.held(tk.fire) {
		return
	}
	tk.mu.Lock()
	defer tk.mu.Unlock()
	if tk.stopped {
		return
	}
	select {
	case tk.ch <- tk.c.Now():
	default:
	}
	now := time.Now()
	tk.next = tk.next.Add(tk.period)
	if !tk.next.After(now) {
		tk.next = tk.next.Add((now.Sub(tk.next)/tk.period + 1) * tk.period)
	}
	tk.t.Reset(tk.next.Sub(now))
}

// C returns the channel the ticks are sent on.
func (tk *ticker) C() <-chan time.Time { return tk.ch }

// Stop turns the ticker off; no tick is received after it returns.
func (tk *ticker) Stop() {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	tk.stopped = true
	tk.t.Stop()
	select {
	case <-tk.ch:
	default:
	}
}
