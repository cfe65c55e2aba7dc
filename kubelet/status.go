package kubelet

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/pingcap/failpoint"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// phaseRank orders phases so that none is ever reported after a later one
// (LC-2, PS-2).
func phaseRank(p corev1.PodPhase) int {
	switch p {
	case corev1.PodRunning:
		return 1
	case corev1.PodSucceeded, corev1.PodFailed:
		return 2
	}
	return 0
}

// containerStatus renders one container for the pod status (LC-5).
func containerStatus(name string, s *ctrState) corev1.ContainerStatus {
	cs := corev1.ContainerStatus{Name: name, RestartCount: int32(s.restarts)}
	if s.spec != nil {
		cs.Image = s.spec.Image
	}
	if s.last != nil {
		term := &corev1.ContainerStateTerminated{
			ExitCode: int32(s.last.ExitCode), Reason: s.last.Reason, ContainerID: "sim://" + string(s.last.ID),
			StartedAt: metav1.NewTime(s.last.StartedAt), FinishedAt: metav1.NewTime(s.last.FinishedAt),
		}
		if s.cur != nil || s.waitMsg != "" {
			cs.LastTerminationState.Terminated = term
		} else {
			cs.State.Terminated = term
		}
	}
	switch {
	case s.cur != nil:
		cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(s.cur.start)}}
		cs.ContainerID = "sim://" + string(s.cur.id)
		cs.Started = ptr.To(s.probes.started)
		cs.Ready = s.probes.started && s.probes.ready && !s.killing()
	case s.last == nil || s.waitMsg != "":
		reason := reasonContainerCreating
		if s.init {
			reason = "PodInitializing"
		}
		if s.waitMsg != "" {
			reason = "CrashLoopBackOff"
			if s.waitReason != "" {
				reason = s.waitReason
			}
		}
		cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: s.waitMsg}}
		cs.Started = ptr.To(false)
	default:
		cs.Started = ptr.To(false)
	}
	return cs
}

// reasonContainerCreating is the Waiting reason of a container not started
// yet.
const reasonContainerCreating = "ContainerCreating"

// podPhase is LC-2 for the pod's current container states. It is pure.
func podPhase(pod *corev1.Pod, ctrs map[string]*ctrState, terminating bool) corev1.PodPhase {
	policy := pod.Spec.RestartPolicy
	for _, c := range pod.Spec.InitContainers {
		s := ctrs[c.Name]
		if s == nil || s.cur != nil || s.last == nil {
			return corev1.PodPending
		}
		if s.last.ExitCode != 0 {
			if policy == corev1.RestartPolicyNever || terminating {
				return corev1.PodFailed
			}
			return corev1.PodPending
		}
	}
	running, started, failed, done := 0, 0, 0, 0
	for _, c := range pod.Spec.Containers {
		s := ctrs[c.Name]
		if s == nil {
			continue
		}
		if s.cur != nil {
			running++
			started++
			continue
		}
		if s.last == nil {
			continue
		}
		started++
		if !terminating && shouldRestart(string(policy), s.last.ExitCode) {
			continue // it restarts: still running, as LC-2 counts it
		}
		done++
		if s.last.ExitCode != 0 {
			failed++
		}
	}
	switch {
	case done == len(pod.Spec.Containers) && failed > 0:
		return corev1.PodFailed
	case done == len(pod.Spec.Containers):
		return corev1.PodSucceeded
	case running > 0 || started > 0:
		return corev1.PodRunning
	}
	return corev1.PodPending
}

// buildStatus renders the pod status the worker would report now.
func (w *podWorker) buildStatus(now time.Time, final bool) corev1.PodStatus {
	pod := w.pod
	terminating := w.term != nil
	phase := podPhase(pod, w.ctrs, terminating && final)
	if final && phase != corev1.PodSucceeded && phase != corev1.PodFailed {
		phase = corev1.PodFailed
	}
	for _, p := range []corev1.PodPhase{w.phase, pod.Status.Phase} {
		if phaseRank(p) > phaseRank(phase) || (phaseRank(p) == 2 && phaseRank(phase) == 2) {
			phase = p // LC-2: never back, and a terminal phase never changes
		}
	}
	st := corev1.PodStatus{Phase: phase, StartTime: ptr.To(metav1.NewTime(w.startTime))}
	if w.evictGrace != nil && w.term != nil && w.term.finished() && phase != corev1.PodSucceeded {
		// PR-14: every container of the evicted pod is dead.
		st.Phase = corev1.PodFailed
		st.Reason, st.Message = ReasonEvicted, "The node was low on resource: memory."
	}
	initialized, ready := true, true
	for _, c := range pod.Spec.InitContainers {
		s := w.ctrs[c.Name]
		if s == nil {
			s = &ctrState{init: true}
		}
		cs := containerStatus(c.Name, s)
		if s.cur != nil || s.last == nil || s.last.ExitCode != 0 {
			initialized = false
		}
		cs.Ready = s.last != nil && s.last.ExitCode == 0 && s.cur == nil
		st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
	}
	for _, c := range pod.Spec.Containers {
		s := w.ctrs[c.Name]
		if s == nil {
			s = &ctrState{}
		}
		cs := containerStatus(c.Name, s)
		if terminating {
			cs.Ready = false
		}
		ready = ready && cs.Ready
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	gates := true
	for _, g := range pod.Spec.ReadinessGates {
		found := false
		for _, c := range pod.Status.Conditions {
			if c.Type == g.ConditionType && c.Status == corev1.ConditionTrue {
				found = true
			}
		}
		gates = gates && found // LC-8: a missing gate condition is False
	}
	st.Conditions = []corev1.PodCondition{
		w.condition(corev1.PodScheduled, true, "", now),
		w.condition(corev1.PodInitialized, initialized, "ContainersNotInitialized", now),
		w.condition(corev1.ContainersReady, ready, "ContainersNotReady", now),
		w.condition(corev1.PodReady, ready && gates, readyReason(ready, gates), now),
	}
	return st
}

func readyReason(ready, gates bool) string {
	if !ready {
		return "ContainersNotReady"
	}
	if !gates {
		return "ReadinessGatesNotReady"
	}
	return ""
}

// condition returns a condition keeping its lastTransitionTime unless its
// status changes (LC-7).
func (w *podWorker) condition(t corev1.PodConditionType, ok bool, reason string, now time.Time) corev1.PodCondition {
	status := corev1.ConditionFalse
	if ok {
		status, reason = corev1.ConditionTrue, ""
	}
	prev, seen := w.conditions[t]
	if !seen {
		for _, c := range w.pod.Status.Conditions {
			if c.Type == t {
				prev, seen = c, true
			}
		}
	}
	c := corev1.PodCondition{Type: t, Status: status, Reason: reason, LastTransitionTime: metav1.NewTime(now)}
	if seen && prev.Status == status {
		c.LastTransitionTime = prev.LastTransitionTime
	}
	w.conditions[t] = c
	return c
}

// postStatus hands the current status to the poster; final marks the last
// status of a terminated pod, after which the poster finishes the deletion.
func (w *podWorker) postStatus(now time.Time, final bool) {
	if w.pod == nil {
		// An orphan (containers whose pod was never seen, LC-13) or a pod
		// already gone from the API: there is no object to report on.
		return
	}
	st := w.buildStatus(now, final)
	w.phase = st.Phase
	w.status.set(st, final)
}

// statusPoster writes a pod's status through pods/status with strategic
// merge patches (so conditions owned by others, such as readiness gates,
// survive), retrying with back-off while the API cannot be reached, and after
// the final status deletes the pod with grace 0 and a UID precondition.
//
// It posts from a goroutine that runs only while there is something to
// post (or a post to retry): a pod whose status the API already shows costs
// no goroutine, which is most pods of a large cluster most of the time.
type statusPoster struct {
	k *Kubelet
	w *podWorker

	mu       sync.Mutex
	want     *corev1.PodStatus
	final    bool
	posted   *corev1.PodStatus
	notify   chan struct{}
	done     chan struct{}
	doneOnce sync.Once
	// ctx is the worker's, set by start; nothing is posted before it.
	ctx context.Context
	// posting is set while a posting goroutine runs; stopped once the
	// worker ended (stop), after which nothing is posted.
	posting, stopped bool
	running          sync.WaitGroup
}

func newStatusPoster(k *Kubelet, w *podWorker) *statusPoster {
	return &statusPoster{k: k, w: w, notify: make(chan struct{}, 1), done: make(chan struct{})}
}

func (p *statusPoster) set(st corev1.PodStatus, final bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.posted != nil && apiequality.Semantic.DeepEqual(*p.posted, st) && !final {
		p.want = nil
		return
	}
	if p.want != nil && apiequality.Semantic.DeepEqual(*p.want, st) && p.final == final {
		return
	}
	p.want, p.final = &st, final
	p.kickLocked()
}

// start lets the poster post, in ctx, what it was given and will be.
func (p *statusPoster) start(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ctx = ctx
	p.kickLocked()
}

// stop ends posting and waits for a post in progress to end.
func (p *statusPoster) stop() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	p.running.Wait()
}

// kickLocked gets p.want posted: by the running goroutine, or by a new one.
// p.mu must be held.
func (p *statusPoster) kickLocked() {
	switch {
	case p.want == nil || p.ctx == nil || p.stopped || p.finished():
	case p.posting:
		select {
		case p.notify <- struct{}{}:
		default:
		}
	default:
		p.posting = true
		p.running.Add(1)
		go p.run(p.ctx)
	}
}

// reconcile posts the last status again when the API's copy of the pod no
// longer shows it: another writer changed what the kubelet owns, as the
// node lifecycle controller does when it marks the pods of an unreachable
// node not Ready. The kubelet's status is the truth of what runs, so it
// writes it back once it sees the difference, as upstream's status manager
// does (needsReconcile). A copy older than the last post may cause one
// needless post of the same status.
func (p *statusPoster) reconcile(api *corev1.PodStatus) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.posted == nil || p.want != nil || p.finished() || statusShows(api, p.posted) {
		return
	}
	p.want, p.final, p.posted = p.posted, false, nil
	p.kickLocked()
}

// statusShows reports whether the API's status shows the kubelet's: the same
// phase, every condition the kubelet set with the same status, and every
// container in the same state and readiness. It is pure.
func statusShows(api, ours *corev1.PodStatus) bool {
	if api.Phase != ours.Phase {
		return false
	}
	for _, c := range ours.Conditions {
		found := false
		for _, a := range api.Conditions {
			if a.Type == c.Type {
				found = a.Status == c.Status
				break
			}
		}
		if !found {
			return false
		}
	}
	return containersShow(api.InitContainerStatuses, ours.InitContainerStatuses) &&
		containersShow(api.ContainerStatuses, ours.ContainerStatuses)
}

// containersShow reports whether every container of ours is in api in the
// same state and readiness. It is pure and allocates nothing: it runs on
// every informer update of a pod.
func containersShow(api, ours []corev1.ContainerStatus) bool {
	for _, cs := range ours {
		i := slices.IndexFunc(api, func(a corev1.ContainerStatus) bool { return a.Name == cs.Name })
		if i < 0 {
			return false
		}
		a := api[i]
		if a.Ready != cs.Ready || a.RestartCount != cs.RestartCount ||
			(a.State.Running != nil) != (cs.State.Running != nil) ||
			(a.State.Terminated != nil) != (cs.State.Terminated != nil) {
			return false
		}
	}
	return true
}

func (p *statusPoster) finishedCh() <-chan struct{} { return p.done }

func (p *statusPoster) finished() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// run posts until nothing is left to post, the final status is posted or ctx
// ends; kickLocked starts it.
func (p *statusPoster) run(ctx context.Context) {
	defer p.running.Done()
	retry := time.Second
	var t clock.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		p.mu.Lock()
		want, final := p.want, p.final
		if want == nil || p.stopped || ctx.Err() != nil {
			// Cleared under the lock set takes, so a status set from now
			// on starts a new goroutine.
			p.posting = false
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		err := p.post(ctx, want, final)
		if err == nil {
			retry = time.Second
			p.mu.Lock()
			p.posted = want
			if p.want == want {
				p.want = nil
			}
			if final {
				p.doneOnce.Do(func() { close(p.done) })
				p.posting = false
				p.mu.Unlock()
				p.w.wake()
				return
			}
			p.mu.Unlock()
			continue
		}
		if ctx.Err() == nil {
			p.k.log.Debug("pod status not posted", "pod", p.w.namespace+"/"+p.w.name, "err", err)
		}
		if t != nil {
			t.Stop()
		}
		t = p.k.clock.NewTimer(retry)
		retry = min(2*retry, 30*time.Second)
		select {
		case <-ctx.Done():
		case <-p.notify:
		case <-t.C():
		}
	}
}

// post writes one status and, for the final one, finishes the deletion. A
// pod already gone counts as done.
func (p *statusPoster) post(ctx context.Context, st *corev1.PodStatus, final bool) error {
	// Failpoint statusPostDelay: pod status reaches the API late.
	failpoint.InjectContext(p.k.failpoints(), "statusPostDelay", func() {})
	pods := p.k.cfg.Client.CoreV1().Pods(p.w.namespace)
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": p.w.uid},
		"status":   sortedStatus(st),
	})
	if err != nil {
		return fmt.Errorf("encoding status of %s/%s: %w", p.w.namespace, p.w.name, err)
	}
	rctx, cancel := p.k.requestCtx(ctx)
	defer cancel()
	_, err = pods.Patch(rctx, p.w.name, types.StrategicMergePatchType, body, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or replaced by a pod of another UID
	}
	if err != nil {
		return fmt.Errorf("patching status of %s/%s: %w", p.w.namespace, p.w.name, err)
	}
	// Failpoint neverFinishDeletion is a PLANTED BUG for the bug zoo,
	// inert unless a scenario switches it on: the final status is posted
	// but the deletion is never finished with grace 0, so the pod stays
	// Terminating on a Ready node for good (breaks PS-4, LC-11).
	failpoint.InjectContext(p.k.failpoints(), "neverFinishDeletion", func() { final = false })
	if !final {
		return nil
	}
	err = pods.Delete(rctx, p.w.name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To(int64(0)),
		Preconditions:      &metav1.Preconditions{UID: &p.w.uid},
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("deleting pod %s/%s: %w", p.w.namespace, p.w.name, err)
	}
	p.k.log.Info("pod deleted", "pod", p.w.namespace+"/"+p.w.name, "phase", string(st.Phase))
	return nil
}

func sortedStatus(st *corev1.PodStatus) *corev1.PodStatus {
	out := st.DeepCopy()
	sort.SliceStable(out.ContainerStatuses, func(i, j int) bool { return out.ContainerStatuses[i].Name < out.ContainerStatuses[j].Name })
	return out
}
