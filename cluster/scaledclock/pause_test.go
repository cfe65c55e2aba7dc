package scaledclock

import (
	"testing"
	"testing/synctest"
	"time"
)

func TestSetAndResetOffset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(1000, start)
		c.Jump(time.Minute)
		v := c.Derive()
		v.Jump(time.Hour)
		v.SetOffset(-time.Second)
		if got := v.Now(); !got.Equal(start.Add(-time.Second)) {
			t.Errorf("after SetOffset(-1s) Now() = %s, want start-1s", got)
		}
		c.Jump(time.Minute) // the parent moves: a reset follows it
		v.ResetOffset()
		if v.Offset() != 2*time.Minute || !v.Now().Equal(c.Now()) {
			t.Errorf("after ResetOffset the view reads %s (offset %s), want the parent's %s", v.Now(), v.Offset(), c.Now())
		}
		c.ResetOffset()
		if c.Offset() != 0 {
			t.Errorf("ResetOffset of a root clock left offset %s, want 0", c.Offset())
		}
	})
}

func TestPauseFreezesReadingsAndDeliveries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(1000, start)
		v := c.Derive()
		timer := v.NewTimer(10 * time.Second)   // falls due during the pause
		later := v.NewTimer(100 * time.Second)  // falls due after it
		stopped := v.NewTimer(10 * time.Second) // stopped while held back
		ran := make(chan time.Time, 1)
		v.AfterFunc(10*time.Second, func() { ran <- v.Now() })
		heldFunc := v.AfterFunc(10*time.Second, func() { t.Error("stopped AfterFunc ran") })
		slept := make(chan time.Time, 1)
		go func() {
			v.Sleep(10 * time.Second)
			slept <- v.Now()
		}()

		v.Pause()
		v.Pause() // idempotent
		if !v.Paused() || c.Paused() {
			t.Fatalf("Paused() view, root = %v, %v; want true, false", v.Paused(), c.Paused())
		}
		time.Sleep(50 * time.Millisecond) // 50 s of scaled time
		synctest.Wait()
		if got := v.Now(); !got.Equal(start) {
			t.Errorf("paused Now() = %s, want the instant of Pause %s", got, start)
		}
		v.Jump(time.Second)
		if got := v.Now(); !got.Equal(start.Add(time.Second)) {
			t.Errorf("paused Now() after a 1s jump = %s, want start+1s", got)
		}
		if !c.Now().Equal(start.Add(50 * time.Second)) {
			t.Errorf("the root clock stopped too: %s", c.Now())
		}
		select {
		case v := <-timer.C():
			t.Fatalf("timer delivered %s while paused", v)
		case v := <-ran:
			t.Fatalf("AfterFunc ran at %s while paused", v)
		case v := <-slept:
			t.Fatalf("Sleep returned at %s while paused", v)
		default:
		}
		if !stopped.Stop() {
			t.Error("Stop() of a timer held back by a pause = false, want true (never delivered)")
		}
		if !heldFunc.Stop() {
			t.Error("Stop() of an AfterFunc held back by a pause = false, want true")
		}

		resumed := time.Now()
		v.Resume()
		v.Resume() // idempotent
		want := start.Add(51 * time.Second)
		if got := <-timer.C(); !got.Equal(want) {
			t.Errorf("held timer delivered %s on Resume, want the present %s", got, want)
		}
		if got := <-ran; !got.Equal(want) {
			t.Errorf("held AfterFunc ran at %s, want %s", got, want)
		}
		if got := <-slept; !got.Equal(want) {
			t.Errorf("Sleep returned at %s, want %s", got, want)
		}
		if time.Since(resumed) != 0 {
			t.Errorf("held deliveries took %s of wall time after Resume, want none", time.Since(resumed))
		}
		<-later.C()
		if el := time.Since(resumed); el != 50*time.Millisecond {
			t.Errorf("a timer due after the pause fired %s after Resume, want 50ms (its schedule)", el)
		}
		select {
		case v := <-stopped.C():
			t.Errorf("stopped timer delivered %s", v)
		default:
		}
	})
}

func TestPausedTickerTicksOnceOnResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(1000, start)
		tk := c.NewTicker(10 * time.Second)
		defer tk.Stop()
		<-tk.C()
		c.Pause()
		time.Sleep(45 * time.Millisecond) // four ticks fall due
		synctest.Wait()
		select {
		case v := <-tk.C():
			t.Fatalf("tick %s while paused", v)
		default:
		}
		c.Resume()
		if v := <-tk.C(); !v.Equal(start.Add(55 * time.Second)) {
			t.Errorf("tick on Resume = %s, want the present start+55s", v)
		}
		select {
		case v := <-tk.C():
			t.Fatalf("second tick %s right after Resume, want the missed ones dropped", v)
		default:
		}
		if v := <-tk.C(); !v.Equal(start.Add(60 * time.Second)) {
			t.Errorf("next tick = %s, want start+60s on the original schedule", v)
		}
	})
}

func TestSleepWhilePausedWaitsForResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(1000, start)
		c.Pause()
		done := make(chan struct{})
		go func() {
			c.Sleep(0)
			close(done)
		}()
		time.Sleep(time.Second)
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("Sleep(0) on a paused clock returned before Resume")
		default:
		}
		c.Resume()
		<-done
	})
}
