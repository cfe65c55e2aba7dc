package kubelet

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// timerClock is a fake clock that counts the timers made on it, so a test
// knows when the goroutine it drives has armed its next timer and is
// blocked: the test then moves the clock without racing it.
type timerClock struct {
	*clocktesting.FakeClock
	timers atomic.Int64
}

func (c *timerClock) NewTimer(d time.Duration) clock.Timer {
	t := c.FakeClock.NewTimer(d)
	c.timers.Add(1)
	return t
}

// killRig runs the kubelet's killContainer for one container of the
// simulated runtime on a fake clock.
type killRig struct {
	t      *testing.T
	t0     time.Time
	clk    *timerClock
	ledger *MemoryLedger
	in     *instance
	ended  chan struct{} // closed when killContainer returned
}

// startKill starts a container running script at t0 and begins killing it
// at t0 with grace seconds, as the kubelet would for a deletion. It returns
// once killContainer is blocked on its first timer.
func startKill(t *testing.T, script string, grace int64) *killRig {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	r := &killRig{t: t, t0: t0, clk: &timerClock{FakeClock: clocktesting.NewFakeClock(t0)}, ledger: &MemoryLedger{}, ended: make(chan struct{})}
	rt := NewSimRuntime("node-0", r.clk, r.ledger)
	t.Cleanup(rt.Close)
	spec := corev1.Container{Name: "app"}
	ann := map[string]string{ScriptAnnotationPrefix + "app": script}
	sc, err := ContainerScript(ann, &spec)
	if err != nil {
		t.Fatal(err)
	}
	if !sc.Forever || sc.StopAfterTerm != 0 {
		t.Fatal("bad script: the rig counts only the kill's timers")
	}
	id, err := rt.Start(ctx, ContainerConfig{Node: "node-0", Namespace: "default", Pod: "p", UID: "u1", Container: spec, Annotations: ann})
	if err != nil {
		t.Fatal(err)
	}
	r.in = &instance{id: id, start: t0, done: make(chan struct{}), kill: newGraceCap(grace)}
	go func() {
		if _, err := rt.Wait(ctx, id); err == nil {
			close(r.in.done)
		}
	}()
	k := &Kubelet{log: slog.New(slog.DiscardHandler), clock: r.clk, rt: rt}
	tl := NewKillTimeline(t0, grace, sc.HasPreStop)
	before := r.clk.timers.Load()
	go func() {
		defer close(r.ended)
		k.killContainer(ctx, r.in, tl, r.in.kill)
	}()
	// Its first timer: the hook's (prestop=D) and the kill's.
	first := int64(1)
	if sc.HasPreStop && !sc.PreStopHang {
		first = 2
	}
	r.waitTimers(before + first)
	return r
}

// waitTimers waits until n timers were made on the clock, or the kill
// ended. No wall-clock deadline: the test's own timeout catches a hang.
func (r *killRig) waitTimers(n int64) {
	for r.clk.timers.Load() < n {
		select {
		case <-r.ended:
			return
		case <-time.After(100 * time.Microsecond):
		}
	}
}

// to moves the fake clock to t0+d and reports whether a timer fired; when
// one did, it waits until the kill armed its next timer or ended.
func (r *killRig) to(d time.Duration) bool {
	n, w := r.clk.timers.Load(), r.clk.Waiters()
	r.clk.SetTime(r.t0.Add(d))
	if r.clk.Waiters() == w {
		return false
	}
	r.waitTimers(n + 1)
	r.settleHook()
	return true
}

// settleHook waits, once TERM was sent, until the preStop hook's goroutine
// recorded the hook's end: a hook abandoned at TERM stops its own timer
// only then, and the next step must not count that as a timer firing.
func (r *killRig) settleHook() {
	for {
		started, ended, termed := false, false, false
		for _, e := range r.ledger.Entries() {
			switch e.Action {
			case ActionPreStopStart:
				started = true
			case ActionPreStopEnd:
				ended = true
			case ActionTerm:
				termed = true
			}
		}
		if !started || ended || !termed {
			return
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// signals returns the TERM and KILL entries as offsets from t0 with the
// grace the kubelet stated.
func (r *killRig) signals() []string {
	var out []string
	for _, e := range r.ledger.Entries() {
		if e.Action == ActionTerm || e.Action == ActionKill {
			out = append(out, string(e.Action)+" +"+e.Scaled.Sub(r.t0).String()+" grace "+time.Duration(e.Grace*int64(time.Second)).String())
		}
	}
	return out
}

// TestKillContainerHangingPreStop: a preStop hook that never ends gets TERM
// at exactly Start + grace and KILL at exactly Start + grace + 2 s on the
// fake clock (LC-11's one 2 s extension is the window after TERM, GP-2, GP-3;
// upstream kuberuntime_container.go v1.37.2 lines 801-808 and 895-915).
func TestKillContainerHangingPreStop(t *testing.T) {
	const grace = 10
	r := startKill(t, "ignore-term prestop=hang", grace)
	ms := time.Millisecond
	if r.to(grace*time.Second - ms) {
		t.Fatalf("a timer fired before the grace deadline: %v", r.signals())
	}
	if !r.to(grace * time.Second) {
		t.Fatal("nothing happened at the grace deadline")
	}
	if diff := cmp.Diff([]string{"term +10s grace 10s"}, r.signals()); diff != "" {
		t.Fatalf("at the deadline (-want +got):\n%s", diff)
	}
	if r.to((grace+2)*time.Second - ms) {
		t.Fatalf("a timer fired before TERM + 2 s: %v", r.signals())
	}
	r.to((grace + 2) * time.Second)
	<-r.ended
	if diff := cmp.Diff([]string{"term +10s grace 10s", "kill +12s grace 10s"}, r.signals()); diff != "" {
		t.Errorf("signals (-want +got):\n%s", diff)
	}
	// The hook was abandoned at TERM (its end recorded when the runtime
	// saw it cancelled) and never run again.
	var hooks []LedgerAction
	for _, e := range r.ledger.Entries() {
		if e.Action == ActionPreStopStart || e.Action == ActionPreStopEnd {
			hooks = append(hooks, e.Action)
		}
	}
	if diff := cmp.Diff([]LedgerAction{ActionPreStopStart, ActionPreStopEnd}, hooks); diff != "" {
		t.Errorf("hook entries (-want +got):\n%s", diff)
	}
}

// TestKillContainerSchedule drives killContainer through the siblings of
// the hanging hook: a hook ending between the deadline and the deadline +
// 2 s, a grace shortened while the hook runs (the deadline still ahead, or
// already past), a grace of 1 with a hook, and the plain cases.
func TestKillContainerSchedule(t *testing.T) {
	s := time.Second
	tests := []struct {
		name   string
		script string
		grace  int64
		// a shorter grace arriving at shortAt (0: none)
		shorten int64
		shortAt time.Duration
		want    []string
	}{
		{"no hook", "ignore-term", 10, 0, 0, []string{"term +0s grace 10s", "kill +10s grace 10s"}},
		{"hook within the grace: its time is subtracted", "ignore-term prestop=4s", 10, 0, 0,
			[]string{"term +4s grace 10s", "kill +10s grace 10s"}},
		{"hook ending 1 s after the deadline is abandoned at it", "ignore-term prestop=11s", 10, 0, 0,
			[]string{"term +10s grace 10s", "kill +12s grace 10s"}},
		{"grace 1 with a hanging hook", "ignore-term prestop=hang", 1, 0, 0,
			[]string{"term +1s grace 1s", "kill +3s grace 1s"}},
		{"grace shortened during a hanging hook, deadline ahead", "ignore-term prestop=hang", 30, 5, 1 * s,
			[]string{"term +5s grace 5s", "kill +7s grace 5s"}},
		{"grace shortened during a hanging hook, deadline past", "ignore-term prestop=hang", 30, 5, 8 * s,
			[]string{"term +8s grace 5s", "kill +10s grace 5s"}},
		{"grace shortened after TERM", "ignore-term", 30, 5, 3 * s,
			[]string{"term +0s grace 30s", "kill +5s grace 5s"}},
		{"grace shortened after TERM past the deadline", "ignore-term", 30, 5, 8 * s,
			[]string{"term +0s grace 30s", "kill +8s grace 5s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := startKill(t, tt.script, tt.grace)
			// Walk the clock in 500 ms steps, as the kubelet's timers would
			// fire; every step is taken only once the kill is blocked.
			for d := time.Duration(0); ; d += 500 * time.Millisecond {
				if tt.shorten != 0 && d == tt.shortAt {
					n := r.clk.timers.Load()
					r.clk.SetTime(r.t0.Add(d))
					r.in.kill.shorten(tt.shorten)
					r.waitTimers(n + 1)
					r.settleHook()
				} else {
					r.to(d)
				}
				select {
				case <-r.ended:
				default:
					if d < time.Minute {
						continue
					}
					t.Fatalf("no KILL within a minute: %v", r.signals())
				}
				break
			}
			if diff := cmp.Diff(tt.want, r.signals()); diff != "" {
				t.Errorf("signals (-want +got):\n%s", diff)
			}
		})
	}
}
