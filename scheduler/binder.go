package scheduler

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// binder performs the scheduler's writes: bindings, status patches, victim
// deletions and events.
type binder struct {
	client kubernetes.Interface
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

// setUnschedulable writes PodScheduled=False with the reason, once per
// distinct message.
func (b *binder) setUnschedulable(ctx context.Context, pod *corev1.Pod, msg string, now metav1.Time) error {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message == msg {
			return nil
		}
	}
	cond := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: msg, LastTransitionTime: now}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID},
		"status":   map[string]any{"conditions": []corev1.PodCondition{cond}},
	})
	if err != nil {
		return fmt.Errorf("encoding condition patch: %w", err)
	}
	_, err = b.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("writing PodScheduled of pod %s/%s: %w", pod.Namespace, pod.Name, err)
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

// recordPreempted writes an Event on the victim (PR-15).
func (b *binder) recordPreempted(ctx context.Context, victim, preemptor *corev1.Pod, node string, now metav1.Time) error {
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: victim.Namespace, Name: fmt.Sprintf("%s.%x", victim.Name, now.UnixNano())},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: victim.Namespace,
			Name: victim.Name, UID: victim.UID},
		Reason: "Preempted",
		Message: fmt.Sprintf("Preempted by pod %s/%s (uid %s, priority %d) on node %s",
			preemptor.Namespace, preemptor.Name, preemptor.UID, priorityOf(preemptor), node),
		Type:           corev1.EventTypeNormal,
		Source:         corev1.EventSource{Component: "scheduler"},
		FirstTimestamp: now,
		LastTimestamp:  now,
		Count:          1,
	}
	if _, err := b.client.CoreV1().Events(victim.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("recording preemption of %s/%s: %w", victim.Namespace, victim.Name, err)
	}
	return nil
}

func priorityOf(pod *corev1.Pod) int32 {
	if pod.Spec.Priority == nil {
		return 0
	}
	return *pod.Spec.Priority
}
