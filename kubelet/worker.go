package kubelet

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// podWorker runs one pod (one UID): it starts init containers one after
// another, then the app containers, restarts them per restartPolicy with
// back-off, probes them, reports status, and terminates the pod. One
// goroutine (run) owns every field below the mutex-guarded inbox.
type podWorker struct {
	k         *Kubelet
	uid       types.UID
	namespace string
	name      string
	orphan    bool // no pod object was ever seen: only kill

	mu      sync.Mutex
	latest  *corev1.Pod
	deleted bool
	notify  chan struct{}
	// evictReq is the eviction grace asked for, once the pod is evicted.
	evictReq *int64

	pod        *corev1.Pod
	ctrs       map[string]*ctrState
	exits      chan struct{}
	term       *termination
	status     *statusPoster
	startTime  time.Time
	phase      corev1.PodPhase // the furthest phase reported or seen
	conditions map[corev1.PodConditionType]corev1.PodCondition
	evictGrace *int64 // the worker's copy of evictReq
}

// instance is one started container; done closes when it exited, after
// final is set. kill, set and read by the worker's goroutine only, is the
// grace cap of the one kill under way, if any: a container is never killed
// twice at once.
type instance struct {
	id    ContainerID
	start time.Time
	done  chan struct{}
	final ContainerStatus
	kill  *graceCap
	// killReason is why kill began: a failed probe's reason, or empty for
	// the pod's termination (the ledger records it).
	killReason KillReason
}

func (in *instance) exited() bool {
	select {
	case <-in.done:
		return true
	default:
		return false
	}
}

// ctrState is what the worker knows of one container of the pod.
type ctrState struct {
	spec     *corev1.Container
	init     bool
	cur      *instance
	last     *ContainerStatus // the newest exited instance
	restarts int
	backoff  Backoff
	notAfter time.Time // back-off: no restart before
	waitMsg  string    // why the container is waiting
	// waitReason is the Waiting reason that goes with waitMsg (default
	// CrashLoopBackOff).
	waitReason string
	probes     probeState
}

// killing reports whether the running instance is being killed.
func (s *ctrState) killing() bool { return s.cur != nil && s.cur.kill != nil }

func newPodWorker(k *Kubelet, uid types.UID, ns, name string, adopted []ContainerStatus) *podWorker {
	w := &podWorker{k: k, uid: uid, namespace: ns, name: name,
		notify: make(chan struct{}, 1), exits: make(chan struct{}, 1),
		ctrs: map[string]*ctrState{}, conditions: map[corev1.PodConditionType]corev1.PodCondition{}}
	w.status = newStatusPoster(k, w)
	// The newest instance of each container is adopted; a running one is
	// watched again, an exited one is its last state.
	for _, c := range adopted {
		s := w.ctrs[c.Container]
		if s == nil {
			s = &ctrState{init: c.Init}
			w.ctrs[c.Container] = s
		}
		if c.Attempt > s.restarts || (s.cur == nil && s.last == nil) || c.Running {
			s.restarts = c.Attempt
			if c.Running {
				s.cur = w.watch(c.ID, c.StartedAt)
			} else if s.cur == nil {
				cs := c
				s.last = &cs
			}
		}
	}
	return w
}

// update hands the worker the newest pod object.
func (w *podWorker) update(pod *corev1.Pod) {
	w.mu.Lock()
	w.latest = pod
	w.mu.Unlock()
	if w.status != nil {
		w.status.reconcile(&pod.Status)
	}
	w.wake()
}

// gone tells the worker the pod is no longer in the API.
func (w *podWorker) gone() {
	w.mu.Lock()
	w.deleted = true
	w.mu.Unlock()
	w.wake()
}

func (w *podWorker) wake() {
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// watch starts waiting for a container instance's exit.
func (w *podWorker) watch(id ContainerID, start time.Time) *instance {
	in := &instance{id: id, start: start, done: make(chan struct{})}
	ctx := w.k.ctx
	exited := func(st ContainerStatus) {
		if ctx.Err() != nil {
			return // the kubelet stopped; the next one watches again
		}
		in.final = st
		close(in.done)
		select {
		case w.exits <- struct{}{}:
		default:
		}
	}
	if n, ok := w.k.rt.(ExitNotifier); ok {
		if err := n.OnExit(id, exited); err == nil {
			return in
		}
		// Not known to the runtime (any more): Wait says why, as below.
	}
	go func() {
		st, err := w.k.rt.Wait(ctx, id)
		if err != nil {
			return // the kubelet stopped; the next one watches again
		}
		exited(st)
	}()
	return in
}

func (w *podWorker) run(ctx context.Context) {
	defer w.k.workerDone0(w)
	w.status.start(ctx)
	defer w.status.stop()
	timer := w.k.clock.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		w.mu.Lock()
		if w.latest != nil {
			w.pod = w.latest
		}
		deleted := w.deleted
		w.evictGrace = w.evictReq
		w.mu.Unlock()

		next, finished := w.sync(ctx, deleted)
		if finished {
			return
		}
		timer.Stop()
		var tc <-chan time.Time
		if !next.IsZero() {
			timer.Reset(max(next.Sub(w.k.clock.Now()), time.Millisecond))
			tc = timer.C()
		}
		select {
		case <-ctx.Done():
			return
		case <-w.notify:
		case <-w.exits:
		case <-tc:
		case <-w.termDone():
		case <-w.status.finishedCh():
		}
	}
}

// workerDone0 forgets the worker once it finished the pod for good; a
// worker stopped with the kubelet is simply dropped.
func (k *Kubelet) workerDone0(w *podWorker) {
	if k.ctx.Err() == nil {
		k.workerDone(w.uid)
	}
}

func (w *podWorker) termDone() <-chan struct{} {
	if w.term == nil {
		return nil
	}
	return w.term.done
}

// sync does the next steps for the pod and returns when it next needs a
// look without being woken, and whether the worker is finished.
func (w *podWorker) sync(ctx context.Context, deleted bool) (time.Time, bool) {
	if ctx.Err() != nil {
		return time.Time{}, true
	}
	now := w.k.clock.Now()
	w.collectExits(now)
	if w.pod == nil && !deleted {
		return time.Time{}, false
	}
	terminating := deleted || (w.pod != nil && w.pod.DeletionTimestamp != nil)
	if terminating || (w.evictGrace != nil && w.pod != nil) {
		w.terminate(ctx, deleted)
		if w.term.finished() {
			// The containers stopped during terminate: their exits belong
			// in the status posted now (LC-2: no Failed pod shows a
			// container still running).
			w.collectExits(now)
		}
		if w.term.finished() && !terminating {
			// Evicted: the pod stays, Failed, until someone deletes it
			// (LC-14); that deletion finds nothing left to kill.
			w.postStatus(now, false)
			return time.Time{}, false
		}
		if w.term.finished() {
			if deleted || w.pod == nil {
				w.cleanup(ctx)
				return time.Time{}, true
			}
			// PS-4/PS-8: every container is confirmed dead; report the
			// final status, then finish the deletion.
			w.postStatus(now, true)
			if w.status.finished() {
				w.cleanup(ctx)
				return time.Time{}, true
			}
		} else {
			w.postStatus(now, false)
		}
		return time.Time{}, false
	}
	if w.startTime.IsZero() {
		w.startTime = now
		if w.pod.Status.StartTime != nil {
			w.startTime = w.pod.Status.StartTime.Time
		}
	}
	w.ensureStates(now)
	next := w.startContainers(ctx, now)
	if n := w.runProbes(ctx, now); !n.IsZero() && (next.IsZero() || n.Before(next)) {
		next = n
	}
	w.postStatus(now, false)
	return next, false
}

func (w *podWorker) ensureStates(now time.Time) {
	defer func() {
		// Adopted running containers are probed afresh.
		for _, s := range w.ctrs {
			if s.spec != nil && s.cur != nil && !s.probes.configured {
				s.probes = newProbeState(s.spec, now)
			}
		}
	}()
	for i := range w.pod.Spec.InitContainers {
		c := &w.pod.Spec.InitContainers[i]
		if s := w.ctrs[c.Name]; s == nil {
			w.ctrs[c.Name] = &ctrState{spec: c, init: true}
		} else {
			s.spec, s.init = c, true
		}
	}
	for i := range w.pod.Spec.Containers {
		c := &w.pod.Spec.Containers[i]
		if s := w.ctrs[c.Name]; s == nil {
			w.ctrs[c.Name] = &ctrState{spec: c}
		} else {
			s.spec, s.init = c, false
		}
	}
}

// collectExits moves exited instances to their container's last state and
// arms the restart back-off.
func (w *podWorker) collectExits(now time.Time) {
	for _, s := range w.ctrs {
		if s.cur == nil || !s.cur.exited() {
			continue
		}
		st := s.cur.final
		s.last = &st
		s.cur = nil
		s.probes = probeState{}
		ran := st.FinishedAt.Sub(st.StartedAt)
		s.notAfter = now.Add(s.backoff.Next(ran))
	}
}

// startContainers starts what LC-10 and LC-6 say is due: the first init
// container that has not succeeded, or, once all have, every app container
// that is not running and may (re)start. It returns the earliest back-off
// expiry it waits for.
func (w *podWorker) startContainers(ctx context.Context, now time.Time) time.Time {
	if podTerminal(w.pod) || w.phase == corev1.PodSucceeded || w.phase == corev1.PodFailed {
		return time.Time{} // LC-2: nothing runs again in a terminal pod
	}
	var vols []AttachedVolume
	var wait string
	if w.k.cfg.CSIAttachments {
		vols, wait = w.k.csiAttachedVolumes(w.uid, w.pod)
	} else {
		vols, wait = attachedVolumes(w.k.vaLister, w.k.cfg.NodeName, w.pod)
	}
	if wait != "" {
		// PS-15: nothing starts (or restarts) until every RWO volume is
		// attached here; an attachment change wakes the worker, and it
		// looks again every few seconds in any case.
		for _, s := range w.ctrs {
			if s.cur == nil {
				s.waitMsg, s.waitReason = wait, reasonContainerCreating
			}
		}
		return now.Add(volumeRecheck)
	}
	for _, s := range w.ctrs {
		if s.waitReason == reasonContainerCreating {
			s.waitMsg, s.waitReason = "", ""
		}
	}
	policy := string(w.pod.Spec.RestartPolicy)
	var next time.Time
	later := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for i := range w.pod.Spec.InitContainers {
		s := w.ctrs[w.pod.Spec.InitContainers[i].Name]
		switch {
		case s.cur != nil:
			return next // running: the next waits (LC-10)
		case s.last != nil && s.last.ExitCode == 0:
			continue
		case s.last != nil && policy == string(corev1.RestartPolicyNever):
			return next // failed for good: the pod fails
		case s.last != nil && now.Before(s.notAfter):
			s.waitMsg = "back-off restarting failed init container"
			w.backOffEvent(s)
			later(s.notAfter)
			return next
		}
		w.start(ctx, s, now, vols)
		return next
	}
	for i := range w.pod.Spec.Containers {
		s := w.ctrs[w.pod.Spec.Containers[i].Name]
		switch {
		case s.cur != nil:
			continue
		case s.last != nil && !shouldRestart(policy, s.last.ExitCode):
			continue
		case s.last != nil && now.Before(s.notAfter):
			s.waitMsg = "back-off restarting failed container"
			w.backOffEvent(s)
			later(s.notAfter)
			continue
		}
		w.start(ctx, s, now, vols)
		if s.cur == nil {
			later(s.notAfter)
		}
	}
	return next
}

// volumeRecheck is how often a pod waiting for its volumes looks again
// without being woken.
const volumeRecheck = 5 * time.Second

func (w *podWorker) start(ctx context.Context, s *ctrState, now time.Time, vols []AttachedVolume) {
	attempt := 0
	if s.last != nil {
		attempt = s.restarts + 1
	}
	w.imageEvents(s)
	id, err := w.k.rt.Start(ctx, ContainerConfig{
		Node: w.k.cfg.NodeName, Namespace: w.namespace, Pod: w.name, UID: string(w.uid),
		Container: *s.spec, Init: s.init, Annotations: w.pod.Annotations, Attempt: attempt,
		Volumes: vols,
	})
	w.startEvents(s, err)
	if err != nil {
		s.waitMsg = err.Error()
		s.notAfter = now.Add(s.backoff.Next(0))
		w.k.log.Warn("container not started", "pod", w.namespace+"/"+w.name, "container", s.spec.Name, "err", err)
		return
	}
	s.restarts = attempt
	s.waitMsg, s.waitReason = "", ""
	s.cur = w.watch(id, now)
	// The probes' initial delays count from the container's start (LC-9),
	// which the runtime has recorded by now: not from before it.
	s.probes = newProbeState(s.spec, w.k.clock.Now())
}

// cleanup removes the pod's exited containers from the runtime.
func (w *podWorker) cleanup(ctx context.Context) {
	for _, s := range w.ctrs {
		if s.last != nil && s.cur == nil {
			_ = w.k.rt.Remove(ctx, s.last.ID)
		}
	}
}

// running lists the running instances.
func (w *podWorker) running() []*ctrState {
	var out []*ctrState
	for _, s := range w.ctrs {
		if s.cur != nil && !s.cur.exited() {
			out = append(out, s)
		}
	}
	return out
}

func podTerminal(pod *corev1.Pod) bool {
	return pod != nil && (pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed)
}
