package scaledclock

import (
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Most tests run in a synctest bubble, where wall time is fake and advances
// only when every goroutine is blocked, so scaled durations are exact.

var start = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func TestNowAndSinceAreScaled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(1000, start)
		if got := c.Now(); !got.Equal(start) {
			t.Errorf("Now() = %s, want the start %s", got, start)
		}
		time.Sleep(10 * time.Millisecond)
		if got := c.Since(start); got != 10*time.Second {
			t.Errorf("Since(start) after 10ms wall = %s, want 10s", got)
		}
		if got := c.Until(start.Add(time.Minute)); got != 50*time.Second {
			t.Errorf("Until(start+1m) = %s, want 50s", got)
		}
		if got := c.Now(); !got.Equal(start.Add(10 * time.Second)) {
			t.Errorf("Now() = %s, want start+10s", got)
		}
		if c.Scale() != 1000 {
			t.Errorf("Scale() = %v, want 1000", c.Scale())
		}
	})
}

func TestZeroStartIsNow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(10, time.Time{})
		if got := c.Now(); !got.Equal(time.Now()) {
			t.Errorf("Now() = %s, want the wall time %s", got, time.Now())
		}
	})
}

func TestTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(1000, start)
		wall := time.Now()
		tm := c.NewTimer(30 * time.Second)
		got := <-tm.C()
		if d := time.Since(wall); d != 30*time.Millisecond {
			t.Errorf("30s timer fired after %s of wall time, want 30ms", d)
		}
		if !got.Equal(start.Add(30 * time.Second)) {
			t.Errorf("timer sent %s, want start+30s", got)
		}
		if tm.Stop() {
			t.Errorf("Stop() of a fired timer = true, want false")
		}

		if tm.Reset(5 * time.Second) {
			t.Errorf("Reset() of a fired timer reported it pending")
		}
		wall = time.Now()
		<-tm.C()
		if d := time.Since(wall); d != 5*time.Millisecond {
			t.Errorf("reset 5s timer fired after %s, want 5ms", d)
		}
	})
}

func TestTimerStop(t *testing.T) {
	tests := []struct {
		name     string
		wait     time.Duration // wall time before Stop
		wantStop bool
	}{
		{name: "pending", wait: 10 * time.Millisecond, wantStop: true},
		{name: "fired, value not received", wait: 40 * time.Millisecond, wantStop: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := New(1000, start)
				tm := c.NewTimer(30 * time.Second)
				time.Sleep(tt.wait)
				if got := tm.Stop(); got != tt.wantStop {
					t.Errorf("Stop() = %v, want %v", got, tt.wantStop)
				}
				time.Sleep(time.Second)
				select {
				case v := <-tm.C():
					t.Errorf("received %s after Stop, want nothing", v)
				default:
				}
			})
		})
	}
}

func TestTimerResetWhilePending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(1000, start)
		tm := c.NewTimer(30 * time.Second)
		time.Sleep(20 * time.Millisecond)
		if !tm.Reset(30 * time.Second) {
			t.Errorf("Reset() of a pending timer = false, want true")
		}
		wall := time.Now()
		<-tm.C()
		if d := time.Since(wall); d != 30*time.Millisecond {
			t.Errorf("timer fired %s after Reset, want 30ms", d)
		}
	})
}

func TestAfterAndSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(1000, start)
		wall := time.Now()
		<-c.After(2 * time.Second)
		c.Sleep(3 * time.Second)
		if d := time.Since(wall); d != 5*time.Millisecond {
			t.Errorf("After(2s)+Sleep(3s) took %s of wall time, want 5ms", d)
		}
	})
}

func TestTicker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(1000, start)
		tk := c.NewTicker(10 * time.Second)
		var got []time.Time
		for range 3 {
			got = append(got, <-tk.C())
		}
		want := []time.Time{start.Add(10 * time.Second), start.Add(20 * time.Second), start.Add(30 * time.Second)}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ticks (-want +got):\n%s", diff)
		}
		// A slow receiver misses ticks instead of queueing them.
		time.Sleep(55 * time.Millisecond)
		if v := <-tk.C(); !v.Equal(start.Add(40 * time.Second)) {
			t.Errorf("tick after a slow receive = %s, want the one buffered at start+40s", v)
		}
		if v := <-tk.C(); !v.Equal(start.Add(90 * time.Second)) {
			t.Errorf("next tick = %s, want start+90s on the original schedule", v)
		}
		tk.Stop()
		time.Sleep(time.Second)
		select {
		case v := <-tk.C():
			t.Errorf("tick %s after Stop", v)
		default:
		}
		if c.Tick(0) != nil {
			t.Errorf("Tick(0) != nil")
		}
		if v := <-c.Tick(time.Second); !v.After(start) {
			t.Errorf("Tick sent %s", v)
		}
	})
}

func TestNewTickerPanicsOnNonPositive(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Errorf("NewTicker(0) did not panic")
		}
	}()
	New(10, start).NewTicker(0)
}

func TestAfterFunc(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(1000, start)
		ran := make(chan time.Time, 2)
		wall := time.Now()
		tm := c.AfterFunc(7*time.Second, func() { ran <- time.Now() })
		if tm.C() != nil {
			t.Errorf("AfterFunc timer C() != nil")
		}
		if at := <-ran; at.Sub(wall) != 7*time.Millisecond {
			t.Errorf("AfterFunc ran after %s, want 7ms", at.Sub(wall))
		}
		stopped := c.AfterFunc(time.Second, func() { ran <- time.Now() })
		if !stopped.Stop() {
			t.Errorf("Stop() of a pending AfterFunc = false")
		}
		time.Sleep(time.Second)
		if len(ran) != 0 {
			t.Errorf("stopped AfterFunc ran")
		}
	})
}

func TestDeriveAndJump(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(1000, start)
		d := c.Derive()
		d.Jump(time.Hour)
		time.Sleep(time.Millisecond)
		type reading struct {
			Now    time.Time
			Offset time.Duration
		}
		got := []reading{{c.Now(), c.Offset()}, {d.Now(), d.Offset()}}
		want := []reading{
			{start.Add(time.Second), 0},
			{start.Add(time.Hour + time.Second), time.Hour},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("readings (-want +got):\n%s", diff)
		}
		// A jump backwards shows in Since, as a wall-clock step would.
		before := d.Now()
		d.Jump(-2 * time.Hour)
		if got := d.Since(before); got != -2*time.Hour {
			t.Errorf("Since across a -2h jump = %s, want -2h", got)
		}
		// A clock derived from a jumped one starts at its reading.
		dd := d.Derive()
		if !dd.Now().Equal(d.Now()) || dd.Offset() != -time.Hour {
			t.Errorf("derived clock reads %s (offset %s), want %s (offset -1h)", dd.Now(), dd.Offset(), d.Now())
		}
		// Timers ignore jumps.
		wall := time.Now()
		tm := d.NewTimer(30 * time.Second)
		d.Jump(time.Hour)
		<-tm.C()
		if el := time.Since(wall); el != 30*time.Millisecond {
			t.Errorf("timer on a jumped clock took %s, want 30ms", el)
		}
	})
}

func TestDurations(t *testing.T) {
	c := New(250, start)
	tests := []struct {
		scaled, wall time.Duration
	}{
		{30 * time.Second, 120 * time.Millisecond},
		{0, 0},
		{-time.Second, -4 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := c.WallFor(tt.scaled); got != tt.wall {
			t.Errorf("WallFor(%s) = %s, want %s", tt.scaled, got, tt.wall)
		}
		if got := c.ScaledFor(tt.wall); got != tt.scaled {
			t.Errorf("ScaledFor(%s) = %s, want %s", tt.wall, got, tt.scaled)
		}
	}
}

func TestNewRejectsBadScale(t *testing.T) {
	for _, scale := range []float64{0, 0.5, -1, math.NaN(), math.Inf(1)} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(%v) did not panic", scale)
				}
			}()
			New(scale, start)
		}()
	}
}

// TestRealTime checks the clock against the real wall clock, asserting only
// lower bounds since a loaded machine may run late.
func TestRealTime(t *testing.T) {
	c := New(1000, time.Time{})
	wall := time.Now()
	before := c.Now()
	fired := <-c.NewTimer(30 * time.Second).C()
	if el := time.Since(wall); el < 30*time.Millisecond {
		t.Errorf("30s timer fired after %s of wall time, want at least 30ms", el)
	}
	if got := fired.Sub(before); got < 30*time.Second {
		t.Errorf("timer sent a reading %s after the start, want at least 30s", got)
	}
	if c.Now().Before(fired) {
		t.Errorf("Now went backwards")
	}
}
