package scheduler

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// binder performs the scheduler's writes: bindings, status patches, victim
// deletions and events.
type binder struct {
	client kubernetes.Interface
	events schedEvents
}

// bind posts pods/binding with the pod's UID as precondition; the API
// answers 409 if the pod is already bound or being deleted.
func (b *binder) bind(ctx context.Context, pod *corev1.Pod, node string) error {
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}
	if err := b.client.CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("binding pod %s/%s to %s: %w", pod.Namespace, pod.Name, node, err)
	}
	b.events.eventf(ctx, b.client, pod, pod, nil, corev1.EventTypeNormal, reasonScheduled, actionBinding,
		"Successfully assigned %v/%v to %v", pod.Namespace, pod.Name, node)
	return nil
}

// setNominatedNode patches status.nominatedNodeName ("" clears it).
func (b *binder) setNominatedNode(ctx context.Context, pod *corev1.Pod, node string) error {
	var value any = node
	if node == "" {
		value = nil
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID},
		"status":   map[string]any{"nominatedNodeName": value},
	})
	if err != nil {
		return fmt.Errorf("encoding nomination patch: %w", err)
	}
	_, err = b.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("setting nominatedNodeName of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// markUnscheduled writes PodScheduled=False with reason and message and,
// when nominate is set, status.nominatedNodeName, in one status patch,
// unless pod already shows both. The condition keeps its
// lastTransitionTime while its status stays False, as kube-scheduler's
// condition updates do. The patch is conditional on the
// UID and resourceVersion of the version it was computed from, so it never
// lands on a pod that was bound or replaced meanwhile: on a conflict it
// reads the pod again and retries once against that version if it is
// still pending.
func (b *binder) markUnscheduled(ctx context.Context, pod *corev1.Pod, reason, msg string, nominate *string, now metav1.Time) error {
	err := b.patchUnscheduled(ctx, pod, reason, msg, nominate, now)
	if !apierrors.IsConflict(err) {
		return err
	}
	fresh, gerr := b.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if gerr != nil {
		return fmt.Errorf("%w; reading it again: %w", err, gerr)
	}
	if fresh.UID != pod.UID || fresh.Spec.NodeName != "" || fresh.DeletionTimestamp != nil {
		return nil
	}
	return b.patchUnscheduled(ctx, fresh, reason, msg, nominate, now)
}

func (b *binder) patchUnscheduled(ctx context.Context, pod *corev1.Pod, reason, msg string, nominate *string, now metav1.Time) error {
	cond := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: reason, Message: msg,
		LastTransitionTime: now}
	condChanged := true
	for _, c := range pod.Status.Conditions {
		if c.Type != corev1.PodScheduled {
			continue
		}
		if c.Status == corev1.ConditionFalse {
			cond.LastTransitionTime = c.LastTransitionTime
			condChanged = c.Reason != reason || c.Message != msg
		}
	}
	status := map[string]any{}
	if condChanged {
		status["conditions"] = []corev1.PodCondition{cond}
	}
	if nominate != nil && *nominate != pod.Status.NominatedNodeName {
		status["nominatedNodeName"] = *nominate
	}
	if len(status) == 0 {
		return nil
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID, "resourceVersion": pod.ResourceVersion},
		"status":   status,
	})
	if err != nil {
		return fmt.Errorf("encoding status patch: %w", err)
	}
	_, err = b.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("writing PodScheduled of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// noteLengthLimit bounds an Event's note, as the API validates it.
const noteLengthLimit = 1024

// recordFailedScheduling records a Warning Event FailedScheduling on a pod
// that stays pending after a cycle, with the cycle's message: one per
// failed attempt, so the queue's back-off bounds their rate, and the
// recorder folds repeats into one Event's count.
func (b *binder) recordFailedScheduling(ctx context.Context, pod *corev1.Pod, msg string) {
	b.events.eventf(ctx, b.client, pod, pod, nil, corev1.EventTypeWarning, reasonFailedScheduling, actionScheduling, "%s", truncateNote(msg))
}

// preemptedMessage is the message of the DisruptionTarget condition the
// scheduler writes on a victim: kube-scheduler's, naming the scheduler,
// followed by the preemptor.
func preemptedMessage(schedulerName string, preemptor *corev1.Pod) string {
	return fmt.Sprintf("%s: preempting to accommodate a higher priority pod %s/%s", schedulerName, preemptor.Namespace, preemptor.Name)
}

// markPreempted writes on a victim, before its deletion, the condition
// DisruptionTarget=True with reason PreemptionByScheduler and msg, as
// kube-scheduler does: while the victim terminates, its preemptor waits
// for it instead of preempting again (see
// defaultpreemption.TerminatingByPreemption). Nothing is written when the
// victim already carries that condition. The strategic merge patch
// replaces only that condition, and its UID precondition keeps a
// same-named successor untouched.
func (b *binder) markPreempted(ctx context.Context, victim *corev1.Pod, msg string, now metav1.Time) error {
	cond := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: corev1.PodReasonPreemptionByScheduler, Message: msg, LastTransitionTime: now}
	for _, c := range victim.Status.Conditions {
		if c.Type != corev1.DisruptionTarget {
			continue
		}
		if c.Status == cond.Status {
			if c.Reason == cond.Reason && c.Message == cond.Message {
				return nil
			}
			cond.LastTransitionTime = c.LastTransitionTime
		}
		break
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": victim.UID},
		"status":   map[string]any{"conditions": []corev1.PodCondition{cond}},
	})
	if err != nil {
		return fmt.Errorf("encoding DisruptionTarget patch: %w", err)
	}
	_, err = b.client.CoreV1().Pods(victim.Namespace).Patch(ctx, victim.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("marking victim %s/%s as preempted: %w", victim.Namespace, victim.Name, err)
	}
	return nil
}

// evict deletes a victim gracefully with its own grace period (PR-6): no
// grace is sent, so the API uses spec.terminationGracePeriodSeconds. The UID
// precondition keeps a same-named successor safe.
func (b *binder) evict(ctx context.Context, victim *corev1.Pod) error {
	uid := victim.UID
	err := b.client.CoreV1().Pods(victim.Namespace).Delete(ctx, victim.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid},
	})
	if err != nil {
		return fmt.Errorf("deleting victim %s/%s: %w", victim.Namespace, victim.Name, err)
	}
	return nil
}

// recordPreempted records an Event on the victim, naming its preemptor
// as related object (PR-15), in kube-scheduler's words.
func (b *binder) recordPreempted(ctx context.Context, victim, preemptor *corev1.Pod, node string) {
	b.events.eventf(ctx, b.client, preemptor, victim, preemptor, corev1.EventTypeNormal, reasonPreempted, actionPreempting,
		"Preempted by pod %v on node %v", preemptor.UID, node)
}
