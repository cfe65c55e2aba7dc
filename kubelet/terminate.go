package kubelet

import (
	"context"
	"sync"
	"time"

	"github.com/pingcap/failpoint"
	"k8s.io/utils/ptr"
)

// graceCap is the grace period one kill works to, which may only shrink
// (PS-3, GP-5). Safe for concurrent use.
type graceCap struct {
	mu      sync.Mutex
	grace   int64
	changed chan struct{} // closed and replaced when grace shrinks
}

func newGraceCap(grace int64) *graceCap {
	return &graceCap{grace: grace, changed: make(chan struct{})}
}

func (g *graceCap) current() (int64, <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.grace, g.changed
}

// shorten lowers the grace period; a longer one is ignored.
func (g *graceCap) shorten(grace int64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if grace >= g.grace {
		return false
	}
	g.grace = grace
	close(g.changed)
	g.changed = make(chan struct{})
	return true
}

// termination is a pod's termination under way: its grace period, which may
// only shrink (PS-3), and the kills of its containers, each working to its
// own cap. A container already being killed for a probe when the pod is
// deleted keeps that one kill; the pod's grace only caps it (GP-5).
type termination struct {
	*graceCap
	caps []*graceCap   // one per container kill, shortened with the pod's
	done chan struct{} // closed once every container kill ended
	wg   sync.WaitGroup
}

// shorten lowers the grace period of the termination and of every container
// kill in it; a longer one is ignored.
func (t *termination) shorten(grace int64) bool {
	if !t.graceCap.shorten(grace) {
		return false
	}
	for _, c := range t.caps {
		c.shorten(grace)
	}
	return true
}

func (t *termination) finished() bool {
	select {
	case <-t.done:
		return true
	default:
		return false
	}
}

// orphanGrace is LC-13's short grace in whole seconds, at least 1.
func (k *Kubelet) orphanGrace() int64 {
	return max(1, int64((k.cfg.OrphanGrace+time.Second-1)/time.Second))
}

// terminate begins the pod's termination, or applies a shorter grace period
// to the one under way. A pod gone from the API (force deleted) gets the
// short orphan grace and no preStop hook (LC-13).
func (w *podWorker) terminate(ctx context.Context, deleted bool) {
	var grace int64
	if w.term != nil {
		grace, _ = w.term.current()
	}
	switch {
	case deleted:
		grace = w.k.orphanGrace()
	default:
		var override *int64
		if w.evictGrace != nil {
			// GP-4/GP-7: hard eviction's 0 is the 1 s floor of GP-5.
			override = ptr.To(max(*w.evictGrace, 1))
		}
		grace, _ = effectiveGracePeriod(w.k.failpoints(), grace, w.pod, override)
	}
	if w.term != nil {
		// Planted bug "kubelet-ignores-shortened-grace" (bug zoo): a
		// termination under way keeps its first, longer deadline when a
		// later deletion shortens the grace (breaks PS-3, GP-5).
		failpoint.InjectContext(w.k.failpoints(), "ignoreShortenedGrace", func() { failpoint.Return() })
		if w.term.shorten(grace) {
			w.k.log.Info("termination shortened", "pod", w.namespace+"/"+w.name, "grace", grace)
		}
		return
	}
	t := &termination{graceCap: newGraceCap(grace), done: make(chan struct{})}
	w.term = t
	w.k.log.Info("terminating pod", "pod", w.namespace+"/"+w.name, "grace", grace, "force_deleted", deleted)
	start := w.k.clock.Now()
	// Planted bug "kubelet-restart-forgets-grace" (bug zoo): a restarted
	// kubelet whose first look at a pod finds it terminating with
	// containers running (its predecessor began the termination, or the
	// deletion came while no kubelet ran) counts the grace from the
	// deletion's start, by the pod's deletionTimestamp, instead of starting
	// over: the containers get only what remained of the old deadline
	// (breaks PS-5, LC-12). killContainer keeps that start.
	failpoint.InjectContext(w.k.failpoints(), "restartForgetsGrace", func() {
		if p := w.pod; w.startTime.IsZero() && p != nil && p.DeletionTimestamp != nil && p.DeletionGracePeriodSeconds != nil {
			start = p.DeletionTimestamp.Add(-time.Duration(*p.DeletionGracePeriodSeconds) * time.Second)
		}
	})
	for _, s := range w.running() {
		in := s.cur
		if in.kill != nil {
			// One kill per container: the probe's kill goes on, and the
			// pod's grace applies only if it is smaller (GP-5).
			if in.kill.shorten(grace) {
				w.k.log.Info("container kill shortened", "pod", w.namespace+"/"+w.name,
					"container", s.spec.Name, "grace", grace)
			}
			t.caps = append(t.caps, in.kill)
			t.wg.Add(1)
			go func() {
				defer t.wg.Done()
				select {
				case <-ctx.Done():
				case <-in.done:
				}
			}()
			continue
		}
		hasPreStop := false
		if !deleted && w.pod != nil && s.spec != nil {
			if sc, err := ContainerScript(w.pod.Annotations, s.spec); err == nil {
				hasPreStop = sc.HasPreStop
			}
		}
		tl := NewKillTimeline(start, grace, hasPreStop)
		w.killingEvent(s, "")
		in.kill = newGraceCap(grace)
		t.caps = append(t.caps, in.kill)
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			w.k.killContainer(ctx, in, tl, in.kill)
		}()
	}
	go func() {
		t.wg.Wait()
		close(t.done)
	}()
}

// killForProbe kills one container whose startup or liveness probe failed,
// with the probe's grace period (GP-1); restartPolicy then decides.
func (w *podWorker) killForProbe(ctx context.Context, s *ctrState, reason KillReason) {
	if s.cur == nil || s.killing() {
		return
	}
	grace := ContainerGracePeriod(w.pod, s.spec, reason)
	hasPreStop := false
	if sc, err := ContainerScript(w.pod.Annotations, s.spec); err == nil {
		hasPreStop = sc.HasPreStop
	}
	w.k.log.Info("killing container", "pod", w.namespace+"/"+w.name, "container", s.spec.Name,
		"reason", string(reason), "grace", grace)
	tl := NewKillTimeline(w.k.clock.Now(), max(grace, 1), hasPreStop && grace > 0)
	w.killingEvent(s, reason)
	in := s.cur
	in.kill = newGraceCap(tl.Grace)
	in.killReason = reason
	go w.k.killContainer(ctx, in, tl, in.kill)
}

// killContainer carries out one container's KillTimeline: preStop (waited
// on until the grace deadline, then abandoned), TERM, then KILL when due,
// applying shorter grace periods from g as they arrive. TERM therefore comes
// no later than the deadline and KILL no later than the deadline + 2 s
// (LC-11; upstream kuberuntime_container.go v1.37.2 lines 895-915). It
// returns once the container exited, or when ctx ends (the kubelet stopped:
// the container keeps running and the next kubelet starts over, PS-5).
func (k *Kubelet) killContainer(ctx context.Context, in *instance, tl *KillTimeline, g *graceCap) {
	var changed <-chan struct{}
	refresh := func() {
		var grace int64
		grace, changed = g.current()
		tl.Shorten(grace)
	}
	refresh()
	var resumeFrom time.Time
	// Planted bug "kubelet-restart-forgets-grace" (see terminate): a start
	// well in the past is a resumed termination's; keep it past TERM.
	failpoint.InjectContext(k.failpoints(), "restartForgetsGrace", func() {
		if tl.Start.Before(k.clock.Now().Add(-MinimumGracePeriodSeconds * time.Second)) {
			resumeFrom = tl.Start
		}
	})
	if tl.RunPreStop {
		hookCtx, cancel := context.WithCancel(ctx)
		hookDone, err := k.rt.PreStop(hookCtx, in.id, in.killReason)
		// The kill begins when the hook has started, as the ledger shows it:
		// every later deadline counts from here (GP-R).
		tl.Start = k.clock.Now()
		if err != nil {
			k.log.Warn("preStop not started", "container", string(in.id), "err", err)
		}
		// GP-2, LC-11: the hook is waited on until the grace deadline and no
		// longer (upstream executePreStopHook returns after gracePeriod, a
		// hanging hook or not); a shorter grace that moves the deadline
		// into the past ends the wait at once. Its "2 s extension" is the
		// window after TERM (KillAt), never more time for the hook.
	hook:
		for hookDone != nil {
			now := k.clock.Now()
			if tl.PreStopExpired(now) {
				// Abandoned, never retried; cancel ends it in the runtime.
				k.log.Info("preStop abandoned at the grace deadline", "container", string(in.id), "grace", tl.Grace)
				break
			}
			timer := k.clock.NewTimer(tl.PreStopDeadline().Sub(now))
			select {
			case <-ctx.Done():
				timer.Stop()
				cancel()
				return
			case <-hookDone:
				timer.Stop()
				break hook
			case <-in.done:
				timer.Stop()
				break hook
			case <-changed:
				timer.Stop()
				refresh()
			case <-timer.C():
			}
		}
		cancel()
	}
	if in.exited() {
		return
	}
	if err := k.rt.Signal(ctx, in.id, SignalTerm, tl.Grace, in.killReason); err != nil {
		k.log.Warn("TERM not delivered", "container", string(in.id), "err", err)
	}
	// Read after the runtime recorded TERM, so no deadline is earlier than
	// the ledger says it should be.
	now := k.clock.Now()
	if !tl.RunPreStop {
		tl.Start = now
	}
	tl.Termed(now)
	failpoint.InjectContext(k.failpoints(), "restartForgetsGrace", func() {
		if !resumeFrom.IsZero() {
			tl.Start = resumeFrom
		}
	})
	// KILL at max(deadline, TERM + 2 s), or at once when a shorter grace
	// puts that in the past; a timer never fires early by the clock's
	// reading, and the deadline is looked at again after every wake-up.
	for {
		now := k.clock.Now()
		if !now.Before(tl.killAt(k.failpoints())) {
			break
		}
		timer := k.clock.NewTimer(tl.killAt(k.failpoints()).Sub(now))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-in.done:
			timer.Stop()
			return
		case <-changed:
			timer.Stop()
			refresh()
		case <-timer.C():
		}
	}
	if err := k.rt.Signal(ctx, in.id, SignalKill, tl.Grace, in.killReason); err != nil {
		k.log.Warn("KILL not delivered", "container", string(in.id), "err", err)
	}
	select {
	case <-ctx.Done():
	case <-in.done:
	}
}
