package cluster_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/kubelet"
)

// execProbe is a probe the simulated runtime answers from the container's
// script; its handler is not run.
func execProbe(period, failures int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}},
		PeriodSeconds: period, FailureThreshold: failures,
	}
}

func getPod(t *testing.T, cs kubernetes.Interface, name string) *corev1.Pod {
	t.Helper()
	p, err := cs.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func podCondition(p *corev1.Pod, ct corev1.PodConditionType) (corev1.PodCondition, bool) {
	for _, c := range p.Status.Conditions {
		if c.Type == ct {
			return c, true
		}
	}
	return corev1.PodCondition{}, false
}

// readyTrail polls pod name until stop says so and returns the Ready
// statuses seen while the pod was Running, without repeats.
func readyTrail(t *testing.T, cs kubernetes.Interface, name string, timeout time.Duration, stop func([]corev1.ConditionStatus) bool) []corev1.ConditionStatus {
	t.Helper()
	var trail []corev1.ConditionStatus
	waitFor(t, name+" Ready trail", timeout, func() bool {
		p := getPod(t, cs, name)
		c, ok := podCondition(p, corev1.PodReady)
		if p.Status.Phase == corev1.PodRunning && ok && (len(trail) == 0 || trail[len(trail)-1] != c.Status) {
			trail = append(trail, c.Status)
		}
		return stop(trail)
	})
	return trail
}

// TestKubeletReadinessProbe: Ready is False before the readiness probe
// succeeds, flips True after ready-after, and back to False once the probe
// fails (LC-7, LC-9); the container keeps running throughout.
func TestKubeletReadinessProbe(t *testing.T) {
	_, ledger, cs := startKubeletCluster(t, 1)
	const readyAfter = 30 * time.Second
	p := scriptedPod("p", "node-0", 5, map[string]string{"app": "ready-after=30s unready-at=90s"}, "app")
	p.Spec.Containers[0].ReadinessProbe = execProbe(1, 1)
	createPod(t, cs, p)
	want := []corev1.ConditionStatus{corev1.ConditionFalse, corev1.ConditionTrue, corev1.ConditionFalse}
	trail := readyTrail(t, cs, "p", 30*time.Second, func(tr []corev1.ConditionStatus) bool { return len(tr) >= len(want) })
	for i := range want {
		if trail[i] != want[i] {
			t.Fatalf("Ready went %v, want %v", trail, want)
		}
	}
	starts := entries(ledger, "p", kubelet.ActionStart)
	if len(starts) != 1 || len(entries(ledger, "p", kubelet.ActionTerm)) != 0 {
		t.Errorf("readiness failure must not restart or kill: %+v", entries(ledger, "p", ""))
	}
	// The True transition happened no sooner than ready-after (conditions
	// carry whole seconds) and the last one is the flip back to False.
	final := getPod(t, cs, "p")
	c, _ := podCondition(final, corev1.PodReady)
	if c.Status != corev1.ConditionFalse || c.Reason == "" {
		t.Errorf("Ready condition %+v, want False with a reason", c)
	}
	if got := c.LastTransitionTime.Sub(starts[0].Scaled); got < readyAfter {
		t.Errorf("Ready went back to False %s after the start, want after ready-after %s", got, readyAfter)
	}
	if cr, _ := podCondition(final, corev1.ContainersReady); cr.Status != corev1.ConditionFalse {
		t.Errorf("ContainersReady %s, want False once the probe fails", cr.Status)
	}
}

// TestKubeletStartupProbeHoldsOthers: until the startup probe succeeds the
// container is not started, not ready, and its failing liveness probe is not
// run; afterwards readiness and liveness take over (LC-9).
func TestKubeletStartupProbeHoldsOthers(t *testing.T) {
	_, ledger, cs := startKubeletCluster(t, 1)
	const startupAfter = 40 * time.Second
	p := scriptedPod("p", "node-0", 5, map[string]string{"app": "startup-after=40s liveness-fail-at=1ms"}, "app")
	c := &p.Spec.Containers[0]
	c.StartupProbe = execProbe(1, 1000)
	c.ReadinessProbe = execProbe(1, 1)
	c.LivenessProbe = execProbe(1, 1)
	c.LivenessProbe.TerminationGracePeriodSeconds = ptr.To[int64](3)
	createPod(t, cs, p)
	// The liveness kill may follow the startup success before a status with
	// Started true is posted, so watch until the kill.
	var sawUnstarted bool
	waitFor(t, "liveness kill", 30*time.Second, func() bool {
		pod := getPod(t, cs, "p")
		if len(pod.Status.ContainerStatuses) == 1 && pod.Status.Phase == corev1.PodRunning {
			st := pod.Status.ContainerStatuses[0]
			if st.State.Running != nil && st.Started != nil && !*st.Started {
				sawUnstarted = true
				if st.Ready {
					t.Errorf("ready before the startup probe succeeded: %+v", st)
				}
			}
		}
		return len(entries(ledger, "p", kubelet.ActionTerm)) > 0
	})
	if !sawUnstarted {
		t.Errorf("never saw the container running but not started")
	}
	start := entries(ledger, "p", kubelet.ActionStart)[0]
	term := entries(ledger, "p", kubelet.ActionTerm)[0]
	if got := term.Scaled.Sub(start.Scaled); got < startupAfter {
		t.Errorf("liveness killed %s after the start, before the startup probe succeeded at %s", got, startupAfter)
	}
	if term.Grace != 3 {
		t.Errorf("kill grace %d, want the liveness probe's 3", term.Grace)
	}
}

// TestKubeletStartupProbeFailureKills: a startup probe that keeps failing
// kills the container with the startup probe's grace (GP-1), not the
// liveness probe's, which never ran (LC-9); with restartPolicy Never the
// pod fails.
func TestKubeletStartupProbeFailureKills(t *testing.T) {
	_, ledger, cs := startKubeletCluster(t, 1)
	p := scriptedPod("p", "node-0", 30, map[string]string{"app": "ignore-term startup-after=1h liveness-fail-at=1ms"}, "app")
	c := &p.Spec.Containers[0]
	c.StartupProbe = execProbe(1, 3)
	c.StartupProbe.TerminationGracePeriodSeconds = ptr.To[int64](4)
	c.LivenessProbe = execProbe(1, 1)
	c.LivenessProbe.TerminationGracePeriodSeconds = ptr.To[int64](7)
	createPod(t, cs, p)
	waitFor(t, "failed", 30*time.Second, func() bool { ph, _ := podPhase(t, cs, "p"); return ph == corev1.PodFailed })
	terms, kills := entries(ledger, "p", kubelet.ActionTerm), entries(ledger, "p", kubelet.ActionKill)
	if len(terms) != 1 || len(kills) != 1 {
		t.Fatalf("want one TERM and one KILL: %+v", entries(ledger, "p", ""))
	}
	if terms[0].Grace != 4 {
		t.Errorf("kill grace %d, want the startup probe's 4", terms[0].Grace)
	}
	if got := kills[0].Scaled.Sub(terms[0].Scaled); got < 4*time.Second {
		t.Errorf("KILL %s after TERM, want at least 4s", got)
	}
}

// TestKubeletReadinessGate: with every container ready but a readiness gate
// condition missing, ContainersReady is True and Ready False (LC-8); once
// the gate's condition is set True, Ready follows.
func TestKubeletReadinessGate(t *testing.T) {
	_, _, cs := startKubeletCluster(t, 1)
	const gate = "example.com/gate"
	p := scriptedPod("p", "node-0", 5, nil, "app")
	p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: gate}}
	createPod(t, cs, p)
	waitFor(t, "containers ready", 30*time.Second, func() bool {
		c, _ := podCondition(getPod(t, cs, "p"), corev1.ContainersReady)
		return c.Status == corev1.ConditionTrue
	})
	// Held for a while: Ready must stay False, whatever the kubelet re-posts.
	for range 10 {
		pod := getPod(t, cs, "p")
		if c, _ := podCondition(pod, corev1.PodReady); c.Status != corev1.ConditionFalse {
			t.Fatalf("Ready %s with the gate condition missing, want False", c.Status)
		}
		time.Sleep(10 * time.Millisecond)
	}
	patch := `{"status":{"conditions":[{"type":"` + gate + `","status":"True"}]}}`
	if _, err := cs.CoreV1().Pods("default").Patch(context.Background(), "p", types.StrategicMergePatchType,
		[]byte(patch), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "ready with the gate True", 30*time.Second, func() bool {
		c, _ := podCondition(getPod(t, cs, "p"), corev1.PodReady)
		return c.Status == corev1.ConditionTrue
	})
	if c, ok := podCondition(getPod(t, cs, "p"), gate); !ok || c.Status != corev1.ConditionTrue {
		t.Errorf("the gate condition was not kept: %+v", c)
	}
}

// TestKubeletProbeKillThenDelete: a pod deleted while a liveness kill is
// under way keeps that one kill: one TERM and one KILL per container. The
// deletion's grace applies only when it is smaller (GP-5, PS-3): a longer one
// leaves the probe's grace in force, a shorter one brings KILL forward.
//
// The cluster runs at time scale 10, not the other kubelet tests' 200: the
// deletion must reach the kubelet before the probe's kill is due (60 s of
// cluster time), and at 200 that is 0.3 s of wall time, which a loaded
// machine's watch delivery can miss; at 10 it is 6 s.
func TestKubeletProbeKillThenDelete(t *testing.T) {
	ledger := &kubelet.MemoryLedger{}
	c := startCluster(t, cluster.Config{Topology: cluster.DefaultTopology(1, 1, 1), TimeScale: 10,
		Kubelets: true, Ledger: ledger})
	cs := clientset(t, c, apiserver.IdentityAdmin, 0)
	cases := []struct {
		name      string
		del       *int64 // nil: the spec's 120
		wantGrace int64
	}{
		{"longer", nil, 60},
		{"shorter", ptr.To[int64](3), 3},
	}
	for _, tc := range cases {
		p := scriptedPod(tc.name, "node-0", 120, map[string]string{"app": "ignore-term liveness-fail-at=2s"}, "app")
		p.Spec.Containers[0].LivenessProbe = execProbe(1, 1)
		p.Spec.Containers[0].LivenessProbe.TerminationGracePeriodSeconds = ptr.To[int64](60)
		createPod(t, cs, p)
	}
	for _, tc := range cases {
		waitFor(t, tc.name+" liveness TERM", 30*time.Second, func() bool {
			return len(entries(ledger, tc.name, kubelet.ActionTerm)) > 0
		})
		deletePod(t, cs, tc.name, tc.del)
	}
	for _, tc := range cases {
		waitFor(t, tc.name+" removed", 30*time.Second, func() bool { _, exists := podPhase(t, cs, tc.name); return !exists })
		terms, kills := entries(ledger, tc.name, kubelet.ActionTerm), entries(ledger, tc.name, kubelet.ActionKill)
		if len(terms) != 1 || len(kills) != 1 {
			t.Errorf("%s: want one TERM and one KILL, ledger: %+v", tc.name, entries(ledger, tc.name, ""))
			continue
		}
		if kills[0].Grace != tc.wantGrace {
			t.Errorf("%s: KILL with grace %d, want %d", tc.name, kills[0].Grace, tc.wantGrace)
		}
		got := kills[0].Scaled.Sub(terms[0].Scaled)
		if got < time.Duration(max(tc.wantGrace, 2))*time.Second {
			t.Errorf("%s: KILL %s after TERM, want at least %ds", tc.name, got, max(tc.wantGrace, 2))
		}
		if tc.wantGrace < 60 && got >= 60*time.Second {
			t.Errorf("%s: KILL %s after TERM: the shorter deletion grace was not applied", tc.name, got)
		}
	}
}
