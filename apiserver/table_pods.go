package apiserver

import (
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

// Row conditions kube-apiserver marks finished pods' rows with.
var (
	podSucceededConditions = []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue,
		Reason: string(corev1.PodSucceeded), Message: "The pod has completed successfully."}}
	podFailedConditions = []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue,
		Reason: string(corev1.PodFailed), Message: "The pod failed."}}
)

// podCells computes a pod's row as kube-apiserver's pod printer does: the
// STATUS is the phase (or status reason), overridden by the first init
// container that has not finished well (Init:…), then by the containers'
// waiting or terminated reasons (CrashLoopBackOff, ContainerCreating,
// Completed, Error…), then by Terminating while it is being deleted.
func podCells(obj runtime.Object, now time.Time) ([]any, []metav1.TableRowCondition) {
	pod := obj.(*corev1.Pod)
	var conditions []metav1.TableRowCondition
	switch pod.Status.Phase {
	case corev1.PodSucceeded:
		conditions = podSucceededConditions
	case corev1.PodFailed:
		conditions = podFailedConditions
	}

	reason := string(pod.Status.Phase)
	if pod.Status.Reason != "" {
		reason = pod.Status.Reason
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonSchedulingGated {
			reason = corev1.PodReasonSchedulingGated
		}
	}

	sidecars := map[string]bool{} // restartable init containers, by name
	total := len(pod.Spec.Containers)
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars[c.Name] = true
			total++
		}
	}

	var (
		ready, restarts, sidecarRestarts int
		lastRestart, lastSidecarRestart  time.Time
		initializing                     bool
	)
	later := func(t *time.Time, st corev1.ContainerStatus) {
		if term := st.LastTerminationState.Terminated; term != nil && term.FinishedAt.After(*t) {
			*t = term.FinishedAt.Time
		}
	}
	for i, st := range pod.Status.InitContainerStatuses {
		restarts += int(st.RestartCount)
		later(&lastRestart, st)
		if sidecars[st.Name] {
			sidecarRestarts += int(st.RestartCount)
			later(&lastSidecarRestart, st)
		}
		term, wait := st.State.Terminated, st.State.Waiting
		if term != nil && term.ExitCode == 0 {
			continue
		}
		if sidecars[st.Name] && st.Started != nil && *st.Started {
			if st.Ready {
				ready++
			}
			continue
		}
		switch {
		case term != nil && term.Reason != "":
			reason = "Init:" + term.Reason
		case term != nil && term.Signal != 0:
			reason = fmt.Sprintf("Init:Signal:%d", term.Signal)
		case term != nil:
			reason = fmt.Sprintf("Init:ExitCode:%d", term.ExitCode)
		case wait != nil && wait.Reason != "" && wait.Reason != "PodInitializing":
			reason = "Init:" + wait.Reason
		default:
			reason = fmt.Sprintf("Init:%d/%d", i, len(pod.Spec.InitContainers))
		}
		initializing = true
		break
	}

	if !initializing || podInitialized(pod) {
		restarts, lastRestart = sidecarRestarts, lastSidecarRestart
		running := false
		errorReason := ""
		for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
			st := pod.Status.ContainerStatuses[i]
			restarts += int(st.RestartCount)
			later(&lastRestart, st)
			switch term, wait := st.State.Terminated, st.State.Waiting; {
			case wait != nil && wait.Reason != "":
				reason = wait.Reason
			case term != nil:
				switch {
				case term.Reason != "":
					reason = term.Reason
				case term.Signal != 0:
					reason = fmt.Sprintf("Signal:%d", term.Signal)
				default:
					reason = fmt.Sprintf("ExitCode:%d", term.ExitCode)
				}
				if term.ExitCode != 0 {
					errorReason = reason
				}
			case st.Ready && st.State.Running != nil:
				running = true
				ready++
			}
		}
		// A pod with a container still running is not Completed.
		if reason == "Completed" {
			switch {
			case running && podReady(pod):
				reason = "Running"
			case errorReason != "":
				reason = errorReason
			case running:
				reason = "NotReady"
			}
		}
	}

	terminal := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
	switch {
	case pod.DeletionTimestamp != nil && pod.Status.Reason == nodeLostReason:
		reason = "Unknown"
	case pod.DeletionTimestamp != nil && !terminal:
		reason = "Terminating"
	}

	restartCell := strconv.Itoa(restarts)
	if restarts != 0 && !lastRestart.IsZero() {
		restartCell = fmt.Sprintf("%d (%s ago)", restarts, duration.HumanDuration(now.Sub(lastRestart)))
	}

	ip := "<none>"
	if len(pod.Status.PodIPs) > 0 && pod.Status.PodIPs[0].IP != "" {
		ip = pod.Status.PodIPs[0].IP
	}
	gates := "<none>"
	if n := len(pod.Spec.ReadinessGates); n > 0 {
		passed := 0
		for _, g := range pod.Spec.ReadinessGates {
			for _, c := range pod.Status.Conditions {
				if c.Type == g.ConditionType {
					if c.Status == corev1.ConditionTrue {
						passed++
					}
					break
				}
			}
		}
		gates = fmt.Sprintf("%d/%d", passed, n)
	}
	return []any{pod.Name, fmt.Sprintf("%d/%d", ready, total), reason, restartCell, age(pod.CreationTimestamp, now),
		orNone(ip), orNone(pod.Spec.NodeName), orNone(pod.Status.NominatedNodeName), gates}, conditions
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// podInitialized reports whether the pod's Initialized condition is true.
func podInitialized(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodInitialized {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podReady reports whether the pod has a true Ready condition.
func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
