package scheduler

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/podsafe/podsafe/scheduler/framework"
)

// handleScheduleError handles a cycle that found no node: a pod that fits
// nowhere may preempt, and then stays pending nominated to the node; any
// other error leaves it pending too. Either way the pod is retried after
// back-off with its reason recorded (handleSchedulingFailure).
func (s *Scheduler) handleScheduleError(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, err error) {
	var nominate *string
	reason, msg := corev1.PodReasonSchedulerError, err.Error()
	var fe *FitError
	switch {
	case errors.As(err, &fe):
		reason = corev1.PodReasonUnschedulable
		if s.fw.HasPostFilterPlugins() {
			res, st := s.fw.RunPostFilterPlugins(ctx, state, pod, fe.Statuses)
			if st.IsSuccess() && res != nil {
				s.preempt(ctx, pod, res)
				nominate = &res.NominatedNodeName
			} else {
				fe.PostFilterMsg = st.Message()
			}
		}
		msg = fe.Error()
	case errors.Is(err, ErrNoNodesAvailable):
		// Nothing is wrong but the cluster's size: kube-scheduler reports
		// it as unschedulable, not as its own error.
		reason = corev1.PodReasonUnschedulable
	default:
		s.log.Warn("scheduling failed", "pod", klogRef(pod), "err", err)
	}
	s.log.Debug("pod not scheduled", "pod", klogRef(pod), "reason", reason, "message", msg)
	s.handleSchedulingFailure(ctx, pod, reason, msg, nominate)
}

// handleSchedulingFailure ends a cycle that left pod unbound, as
// kube-scheduler's handleSchedulingFailure does. The scheduler's informer
// decides: a pod it no longer has (deleted), or shows bound, being
// deleted, finished, replaced by a same-named pod or handed to another
// scheduler is done with; any other pod goes back to the queue with
// back-off, is never dropped, and gets a Warning Event FailedScheduling
// and the condition PodScheduled=False with reason (Unschedulable or
// SchedulerError) and msg, plus status.nominatedNodeName when nominate
// is set, in one status patch.
func (s *Scheduler) handleSchedulingFailure(ctx context.Context, pod *corev1.Pod, reason, msg string, nominate *string) {
	if ctx.Err() != nil {
		// Stopping: the cycle failed because of it, nothing to record.
		s.queue.Requeue(pod.UID)
		return
	}
	cached, err := s.podLister.Pods(pod.Namespace).Get(pod.Name)
	if err != nil || cached.UID != pod.UID || !s.stillPending(cached) {
		why := "gone"
		if err == nil {
			why = "no longer pending"
		}
		s.log.Info("pod not requeued", "pod", klogRef(pod), "why", why, "reason", reason, "message", msg)
		s.queue.Done(pod.UID)
		return
	}
	s.queue.AddUnschedulableIfNotPresent(cached)
	now := metav1.NewTime(s.cfg.Clock.Now())
	s.binder.recordFailedScheduling(ctx, cached, msg)
	if err := s.binder.markUnscheduled(ctx, cached, reason, msg, nominate, now); err != nil && ctx.Err() == nil {
		s.log.Warn("writing PodScheduled", "pod", klogRef(pod), "err", err)
	}
}

// stillPending reports whether the informer's pod is one this scheduler
// should still place: unbound, not being deleted, not finished, its own.
func (s *Scheduler) stillPending(pod *corev1.Pod) bool {
	return pod.Spec.NodeName == "" && pod.DeletionTimestamp == nil && s.responsible(pod) &&
		pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// preempt carries out a preemption decision as kube-scheduler's
// preemption executor does: each victim not already being deleted is
// first marked with the condition DisruptionTarget=True, reason
// PreemptionByScheduler (so that the preemptor waits for it while it
// terminates), then deleted gracefully, and an Event is recorded on it
// (PR-15). A victim already being deleted gets no call: its deletion is
// under way. A victim whose mark fails is not deleted, as the preemptor
// would not wait for it; a victim already gone is skipped. preempt then
// remembers the nomination (the status patch follows in
// handleSchedulingFailure) and voids lower-priority nominations to the
// same node.
func (s *Scheduler) preempt(ctx context.Context, pod *corev1.Pod, res *framework.PostFilterResult) {
	node := res.NominatedNodeName
	prio := corev1helpers.PodPriority(pod)
	s.nominator.Set(pod, node)
	now := metav1.NewTime(s.cfg.Clock.Now())
	msg := preemptedMessage(s.cfg.SchedulerName, pod)
	for _, v := range res.Victims {
		if corev1helpers.PodPriority(v) >= framework.PreemptableBelow(prio) {
			// Never reached: candidates hold only lower-priority pods (PR-10).
			s.log.Error("refusing to preempt a pod of equal or higher priority", "victim", klogRef(v), "preemptor", klogRef(pod))
			continue
		}
		if v.DeletionTimestamp != nil {
			s.log.Debug("victim already being deleted", "victim", klogRef(v), "preemptor", klogRef(pod), "node", node)
			continue
		}
		if err := s.binder.markPreempted(ctx, v, msg, now); err != nil {
			if !apierrors.IsNotFound(err) {
				s.log.Warn("preempting victim", "victim", klogRef(v), "err", err)
			}
			continue
		}
		if err := s.binder.evict(ctx, v); err != nil {
			if !apierrors.IsNotFound(err) {
				s.log.Warn("preempting victim", "victim", klogRef(v), "err", err)
			}
			continue
		}
		s.log.Info("preempted", "victim", klogRef(v), "victim_priority", corev1helpers.PodPriority(v),
			"preemptor", klogRef(pod), "preemptor_priority", prio, "node", node)
		s.binder.recordPreempted(ctx, v, pod, node)
	}
	s.clearLowerNominations(ctx, pod, node)
}

func (s *Scheduler) clearLowerNominations(ctx context.Context, pod *corev1.Pod, node string) {
	prio := corev1helpers.PodPriority(pod)
	for _, np := range s.nominator.ForNode(node) {
		if np.Pod.UID == pod.UID || np.Priority >= prio {
			continue
		}
		s.nominator.Delete(np.Pod.UID)
		if err := s.binder.setNominatedNode(ctx, np.Pod, ""); err != nil && !apierrors.IsNotFound(err) {
			s.log.Warn("clearing nomination", "pod", klogRef(np.Pod), "node", node, "err", err)
		}
		s.queue.Activate(np.Pod.UID)
	}
}
