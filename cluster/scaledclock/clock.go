// Package scaledclock provides a k8s.io/utils/clock clock that runs a fixed
// number of times faster than wall time, so that timeouts measured in tens of
// seconds cost milliseconds, and per-component clocks derived from it (views)
// whose readings can be jumped to simulate clock faults and which can be
// paused to simulate a stopped process.
package scaledclock

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

var (
	_ clock.WithTicker                    = (*Clock)(nil)
	_ clock.WithDelayedExecution          = (*Clock)(nil)
	_ clock.WithTickerAndDelayedExecution = (*Clock)(nil)
)

// base is what a clock and every clock derived from it share.
type base struct {
	scale float64
	start time.Time // scaled time at wall0, without a monotonic reading
	wall0 time.Time // wall instant of New, with a monotonic reading
}

// Clock reads scaled time: Now is start + scale × (wall time elapsed since
// New) + offset. Timers, tickers and sleeps of d last d/scale of wall time and
// ignore the offset, as Go's monotonic timers ignore wall-clock jumps. All
// methods are safe for concurrent use.
type Clock struct {
	base   *base
	parent *Clock       // the clock this one was derived from, or nil
	offset atomic.Int64 // nanoseconds
	pause  pauseState   // see pause.go
}

// New returns a clock that reads start now and runs scale times faster than
// wall time. A zero start means time.Now(). It panics unless scale is a finite
// number >= 1.
func New(scale float64, start time.Time) *Clock {
	if !(scale >= 1) || math.IsInf(scale, 0) {
		panic(fmt.Sprintf("scaledclock: scale %v must be a finite number >= 1", scale))
	}
	wall0 := time.Now()
	if start.IsZero() {
		start = wall0
	}
	// Readings carry no monotonic clock, so Since and Sub see Jump as a
	// wall-clock step would show.
	return &Clock{base: &base{scale: scale, start: start.Round(0), wall0: wall0}}
}

// Scale returns how many times faster than wall time the clock runs.
func (c *Clock) Scale() float64 { return c.base.scale }

// Derive returns a clock that shares this clock's start and scale, and so its
// timers' pace, with an offset of its own that starts equal to this clock's.
// Jumping either clock later does not move the other.
func (c *Clock) Derive() *Clock {
	d := &Clock{base: c.base, parent: c}
	d.offset.Store(c.offset.Load())
	return d
}

// SetOffset sets this clock's offset (see Offset) to d, replacing every
// earlier jump.
func (c *Clock) SetOffset(d time.Duration) { c.offset.Store(int64(d)) }

// ResetOffset undoes this clock's own jumps: its offset becomes that of the
// clock it was derived from (now), or zero for a clock made by New.
func (c *Clock) ResetOffset() {
	var d time.Duration
	if c.parent != nil {
		d = c.parent.Offset()
	}
	c.SetOffset(d)
}

// Jump shifts this clock's readings by d, forward or backward, as a step of
// the wall clock would. Timers, tickers and sleeps already running or started
// later keep their wall durations.
func (c *Clock) Jump(d time.Duration) { c.offset.Add(int64(d)) }

// Offset returns the sum of the jumps applied to this clock, including those
// inherited when it was derived.
func (c *Clock) Offset() time.Duration { return time.Duration(c.offset.Load()) }

// WallFor converts a scaled duration to the wall duration it takes.
func (c *Clock) WallFor(d time.Duration) time.Duration {
	return time.Duration(float64(d) / c.base.scale)
}

// ScaledFor converts a wall duration to the scaled duration it represents.
func (c *Clock) ScaledFor(wall time.Duration) time.Duration {
	return time.Duration(float64(wall) * c.base.scale)
}

// Now returns the current scaled time. It has no monotonic reading. While the
// clock is paused it reads the instant of Pause (plus any later jump).
func (c *Clock) Now() time.Time {
	return c.base.start.Add(c.elapsed() + c.Offset())
}

// elapsed is the scaled time since New, stopped while the clock is paused.
func (c *Clock) elapsed() time.Duration {
	if c.pause.on.Load() {
		c.pause.mu.Lock()
		defer c.pause.mu.Unlock()
		if c.pause.paused {
			return c.pause.frozen
		}
	}
	return c.ScaledFor(time.Since(c.base.wall0))
}

// Since returns the scaled time elapsed since t.
func (c *Clock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Until returns the scaled time until t.
func (c *Clock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

// Sleep blocks for scaled duration d, and while the clock is paused.
func (c *Clock) Sleep(d time.Duration) {
	if d <= 0 && !c.Paused() {
		return
	}
	tm := c.NewTimer(d)
	defer tm.Stop()
	<-tm.C()
}

// After returns a channel that receives the scaled time once scaled duration
// d has passed. Prefer NewTimer where the timer may be abandoned early.
func (c *Clock) After(d time.Duration) <-chan time.Time { return c.NewTimer(d).C() }

// Tick returns the channel of a new ticker, or nil if d <= 0, like time.Tick.
func (c *Clock) Tick(d time.Duration) <-chan time.Time {
	if d <= 0 {
		return nil
	}
	return c.NewTicker(d).C()
}
