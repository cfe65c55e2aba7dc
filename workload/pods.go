package workload

// Pod helpers of the workloads: simulated containers, their scripts, and
// one-line summaries of pod states.

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsafe/podsafe/kubelet"
)

// simContainer is a container of the simulated runtime; the image is never
// pulled.
func simContainer(name string) corev1.Container {
	return corev1.Container{Name: name, Image: "podsafe.io/sim:1"}
}

// setScript scripts container c of a pod (or template) with annotations a.
func setScript(a map[string]string, c, script string) {
	if script != "" {
		a[kubelet.ScriptAnnotationPrefix+c] = script
	}
}

// podSummary renders what a list of pods shows, for an op's Output.
func podSummary(pods []corev1.Pod) string {
	phases := map[corev1.PodPhase]int{}
	terminating := 0
	for i := range pods {
		phases[pods[i].Status.Phase]++
		if pods[i].DeletionTimestamp != nil {
			terminating++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "pods=%d", len(pods))
	for _, ph := range []corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed, corev1.PodUnknown} {
		if n := phases[ph]; n > 0 {
			fmt.Fprintf(&b, " %s=%d", strings.ToLower(string(ph)), n)
		}
	}
	if terminating > 0 {
		fmt.Fprintf(&b, " terminating=%d", terminating)
	}
	return b.String()
}

// podState renders one pod for an op's Output.
func podState(p *corev1.Pod) string {
	s := fmt.Sprintf("uid=%s phase=%s", p.UID, p.Status.Phase)
	if p.Spec.NodeName != "" {
		s += " node=" + p.Spec.NodeName
	}
	if p.DeletionTimestamp != nil {
		s += " terminating"
	}
	return s
}

// podTerminal reports whether a pod's phase is Succeeded or Failed.
func podTerminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}
