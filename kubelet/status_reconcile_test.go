package kubelet

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestStatusReconcile: once the API's copy of a pod stops showing what the
// kubelet last posted (the node lifecycle controller marked it not Ready
// while the node was unreachable), the kubelet posts its status again; a
// copy that shows it, with conditions of other writers added, changes
// nothing.
func TestStatusReconcile(t *testing.T) {
	ours := corev1.PodStatus{
		Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue},
		},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}},
	}
	shown := *ours.DeepCopy()
	shown.Conditions = append(shown.Conditions, corev1.PodCondition{Type: "DisruptionTarget", Status: corev1.ConditionTrue})
	notReady := *ours.DeepCopy()
	notReady.Conditions[0].Status = corev1.ConditionFalse
	stopped := *ours.DeepCopy()
	stopped.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}
	failed := *ours.DeepCopy()
	failed.Phase = corev1.PodFailed
	missing := *ours.DeepCopy()
	missing.ContainerStatuses = nil

	for _, tc := range []struct {
		name   string
		api    corev1.PodStatus
		repost bool
	}{
		{"the same", ours, false},
		{"with another writer's condition", shown, false},
		{"marked not Ready by another writer", notReady, true},
		{"a container in another state", stopped, true},
		{"another phase", failed, true},
		{"no container status", missing, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := statusShows(&tc.api, &ours); got == tc.repost {
				t.Errorf("statusShows = %v", got)
			}
			p := &statusPoster{notify: make(chan struct{}, 1), done: make(chan struct{}), posted: ours.DeepCopy()}
			p.reconcile(&tc.api)
			reposted := p.want != nil && p.posted == nil
			if reposted != tc.repost {
				t.Errorf("reposted %v (want %v, posted %v), want %v", reposted, p.want, p.posted, tc.repost)
			}
			// Nothing posted yet, or the pod finished: nothing to do.
			q := &statusPoster{notify: make(chan struct{}, 1), done: make(chan struct{})}
			q.reconcile(&tc.api)
			f := &statusPoster{notify: make(chan struct{}, 1), done: make(chan struct{}), posted: ours.DeepCopy()}
			close(f.done)
			f.reconcile(&tc.api)
			if q.want != nil || f.want != nil {
				t.Error("reposted with nothing posted, or after the final status")
			}
		})
	}
}

// TestSortedStatus: the posted status lists its containers by name, as the
// upstream kubelet sorts them, whatever order the worker keeps them in, and
// leaves the worker's copy as it was.
func TestSortedStatus(t *testing.T) {
	st := &corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "web"}, {Name: "app"}, {Name: "sidecar"}, {Name: "log"}}}
	got := sortedStatus(st)
	var names []string
	for _, c := range got.ContainerStatuses {
		names = append(names, c.Name)
	}
	if want := "app log sidecar web"; strings.Join(names, " ") != want {
		t.Errorf("posted order %v, want %s", names, want)
	}
	if st.ContainerStatuses[0].Name != "web" {
		t.Error("sortedStatus changed the worker's copy")
	}
}
