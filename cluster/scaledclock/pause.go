package scaledclock

import (
	"sync"
	"sync/atomic"
	"time"
)

// pauseState is what Pause and Resume change. A paused clock stands for a
// stopped process (SIGSTOP): its readings stand still, and its timers,
// tickers, AfterFuncs and sleeps deliver nothing. Their deadlines keep
// running, as monotonic deadlines do while a process is stopped, so on Resume
// the reading jumps to the present and whatever fell due meanwhile is
// delivered at once; the rest keeps its schedule.
type pauseState struct {
	on atomic.Bool // mirrors paused, for a lock-free fast path

	mu      sync.Mutex
	paused  bool
	frozen  time.Duration // scaled time since New at Pause
	pending []func()      // deliveries held back while paused
}

// Pause stops the clock as a stopped process sees time: Now keeps returning
// the reading of this instant (moved only by jumps), and nothing is delivered
// on the clock's timers, tickers, AfterFuncs or sleeps until Resume. Pausing a
// paused clock does nothing. Clocks derived from this one are not paused.
func (c *Clock) Pause() {
	p := &c.pause
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused {
		return
	}
	p.frozen = c.ScaledFor(time.Since(c.base.wall0))
	p.paused = true
	p.on.Store(true)
}

// Resume undoes Pause: Now reads the present again, and every delivery held
// back is made at once (ticks at most one per ticker, as a slow receiver
// sees). Resuming a running clock does nothing.
func (c *Clock) Resume() {
	p := &c.pause
	p.mu.Lock()
	if !p.paused {
		p.mu.Unlock()
		return
	}
	p.paused = false
	p.on.Store(false)
	pending := p.pending
	p.pending = nil
	p.mu.Unlock()
	for _, deliver := range pending {
		deliver()
	}
}

// Paused reports whether the clock is paused.
func (c *Clock) Paused() bool { return c.pause.on.Load() }

// held queues deliver for Resume and reports true if the clock is paused;
// otherwise the caller delivers now. deliver must not block.
func (c *Clock) held(deliver func()) bool {
	p := &c.pause
	if !p.on.Load() {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.paused {
		return false
	}
	p.pending = append(p.pending, deliver)
	return true
}
