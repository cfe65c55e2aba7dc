package cluster_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/kubelet"
)

const kubeletScale = 200

func startKubeletCluster(t *testing.T, nodes int) (*cluster.Cluster, *kubelet.MemoryLedger, kubernetes.Interface) {
	t.Helper()
	ledger := &kubelet.MemoryLedger{}
	c := startCluster(t, cluster.Config{Topology: cluster.DefaultTopology(1, nodes, 1), TimeScale: kubeletScale,
		Kubelets: true, Ledger: ledger})
	return c, ledger, clientset(t, c, apiserver.IdentityAdmin, 0)
}

// scriptedPod is bound to node by creating it with spec.nodeName set.
func scriptedPod(name, node string, grace int64, scripts map[string]string, containers ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: map[string]string{}},
		Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr.To(grace),
			RestartPolicy: corev1.RestartPolicyNever},
	}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c, Image: "sim"})
	}
	for c, s := range scripts {
		p.Annotations[kubelet.ScriptAnnotationPrefix+c] = s
	}
	return p
}

// waitFor polls cond until it holds. expected is how long that usually
// takes; it is not a deadline, since a loaded machine only takes longer:
// the wait ends, failing, only when the test binary's own deadline is
// near (go test -timeout), so that the failure names what was awaited.
func waitFor(t *testing.T, what string, expected time.Duration, cond func() bool) {
	t.Helper()
	start := time.Now()
	deadline, bounded := t.Deadline()
	for !cond() {
		if bounded && time.Until(deadline) < 10*time.Second {
			t.Fatalf("gave up waiting for %s after %s (usually within %s): the test binary's deadline is near", what, time.Since(start).Round(time.Second), expected)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func entries(l *kubelet.MemoryLedger, pod string, action kubelet.LedgerAction) []kubelet.LedgerEntry {
	var out []kubelet.LedgerEntry
	for _, e := range l.Entries() {
		if e.Pod == pod && (action == "" || e.Action == action) {
			out = append(out, e)
		}
	}
	return out
}

func podPhase(t *testing.T, cs kubernetes.Interface, name string) (corev1.PodPhase, bool) {
	p, err := cs.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", false
	}
	if err != nil {
		t.Logf("get %s: %v", name, err)
		return "", true
	}
	return p.Status.Phase, true
}

func createPod(t *testing.T, cs kubernetes.Interface, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	created, err := cs.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

func deletePod(t *testing.T, cs kubernetes.Interface, name string, grace *int64) {
	t.Helper()
	err := cs.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: grace})
	if err != nil {
		t.Fatal(err)
	}
}

// TestKubeletRegistersNodeAndLease: kubelets register their Nodes Ready and
// renew their leases.
func TestKubeletRegistersNodeAndLease(t *testing.T) {
	c, _, cs := startKubeletCluster(t, 2)
	for _, n := range c.Config().Topology.Nodes {
		if !c.KubeletRunning(n.Name) {
			t.Errorf("kubelet of %s not running", n.Name)
		}
		waitFor(t, "lease of "+n.Name, 10*time.Second, func() bool {
			l, err := cs.CoordinationV1().Leases(apiserver.KubeLeaseNamespace).Get(context.Background(), n.Name, metav1.GetOptions{})
			return err == nil && l.Spec.RenewTime != nil
		})
	}
}

// TestKubeletGraceFromLedger: from the ledger, KILL never comes sooner than
// the effective grace after the kubelet starts killing, never sooner than
// TERM + 2 s, and preStop comes first; the pod is then removed by the kubelet.
func TestKubeletGraceFromLedger(t *testing.T) {
	_, ledger, cs := startKubeletCluster(t, 1)
	cases := []struct {
		name    string
		grace   int64
		del     *int64
		script  string
		minKill time.Duration // from the first kill action
	}{
		{"plain", 10, nil, "ignore-term", 10 * time.Second},
		{"prestop", 10, nil, "ignore-term prestop=4s", 10 * time.Second},
		// A hook still running at the deadline is abandoned there: TERM at
		// grace, KILL 2 s later (LC-11, as upstream's killContainer).
		{"hang", 6, nil, "ignore-term prestop=hang", 8 * time.Second},
		{"shorter", 30, ptr.To[int64](5), "ignore-term", 5 * time.Second},
	}
	for _, tc := range cases {
		createPod(t, cs, scriptedPod(tc.name, "node-0", tc.grace, map[string]string{"app": tc.script}, "app"))
	}
	for _, tc := range cases {
		waitFor(t, tc.name+" running", 20*time.Second, func() bool {
			p, _ := podPhase(t, cs, tc.name)
			return p == corev1.PodRunning
		})
		deletePod(t, cs, tc.name, tc.del)
	}
	for _, tc := range cases {
		waitFor(t, tc.name+" removed", 30*time.Second, func() bool {
			_, exists := podPhase(t, cs, tc.name)
			return !exists
		})
		var first, term, kill time.Time
		for _, e := range entries(ledger, tc.name, "") {
			switch e.Action {
			case kubelet.ActionPreStopStart, kubelet.ActionTerm:
				if first.IsZero() {
					first = e.Scaled
				}
				if e.Action == kubelet.ActionTerm && term.IsZero() {
					term = e.Scaled
				}
			case kubelet.ActionKill:
				kill = e.Scaled
			}
		}
		if first.IsZero() || term.IsZero() || kill.IsZero() {
			t.Fatalf("%s: ledger lacks kill actions: %+v", tc.name, entries(ledger, tc.name, ""))
		}
		if got := kill.Sub(first); got < tc.minKill {
			t.Errorf("%s: KILL %s after the kill began, want at least %s", tc.name, got, tc.minKill)
		}
		if got := kill.Sub(term); got < 2*time.Second {
			t.Errorf("%s: KILL %s after TERM, want at least 2s", tc.name, got)
		}
		if exits := entries(ledger, tc.name, kubelet.ActionExit); len(exits) != 1 || exits[0].Scaled.Before(kill) {
			t.Errorf("%s: exits %+v, want one after KILL", tc.name, exits)
		}
	}
}

// TestKubeletRestartMidTermination: a kubelet restarted while a pod is
// terminating gives the full grace period again (PS-5, LC-12).
func TestKubeletRestartMidTermination(t *testing.T) {
	c, ledger, cs := startKubeletCluster(t, 1)
	const grace = 20
	createPod(t, cs, scriptedPod("p", "node-0", grace, map[string]string{"app": "ignore-term"}, "app"))
	waitFor(t, "running", 20*time.Second, func() bool { p, _ := podPhase(t, cs, "p"); return p == corev1.PodRunning })
	deletePod(t, cs, "p", nil)
	waitFor(t, "first TERM", 20*time.Second, func() bool { return len(entries(ledger, "p", kubelet.ActionTerm)) == 1 })
	if err := c.StopKubelet("node-0"); err != nil {
		t.Fatal(err)
	}
	rt, _ := c.Runtime("node-0")
	time.Sleep(c.Clock().WallFor(5 * time.Second))
	if rt.Running() != 1 {
		t.Fatalf("the container stopped with the kubelet: running = %d", rt.Running())
	}
	if err := c.StartKubelet("node-0"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "removed", 30*time.Second, func() bool { _, exists := podPhase(t, cs, "p"); return !exists })
	terms, kills := entries(ledger, "p", kubelet.ActionTerm), entries(ledger, "p", kubelet.ActionKill)
	if len(terms) != 2 || len(kills) != 1 {
		t.Fatalf("want two TERMs and one KILL, ledger: %+v", entries(ledger, "p", ""))
	}
	if terms[1].Grace != grace {
		t.Errorf("restarted termination applies grace %d, want the full %d", terms[1].Grace, grace)
	}
	if got := kills[0].Scaled.Sub(terms[1].Scaled); got < grace*time.Second {
		t.Errorf("KILL %s after the restarted TERM, want at least %ds", got, grace)
	}
}

// TestKubeletPartitionedKeepsRunning: a kubelet cut from every API member
// never kills its containers, even when the pod is deleted meanwhile.
func TestKubeletPartitionedKeepsRunning(t *testing.T) {
	c, ledger, cs := startKubeletCluster(t, 1)
	createPod(t, cs, scriptedPod("p", "node-0", 5, nil, "app"))
	waitFor(t, "running", 20*time.Second, func() bool { p, _ := podPhase(t, cs, "p"); return p == corev1.PodRunning })
	for _, h := range c.MemberHosts() {
		c.Network().CutBoth("node-0", h)
	}
	deletePod(t, cs, "p", nil)
	time.Sleep(c.Clock().WallFor(60 * time.Second))
	if got := entries(ledger, "p", kubelet.ActionTerm); len(got) != 0 {
		t.Errorf("a partitioned kubelet signalled: %+v", got)
	}
	rt, _ := c.Runtime("node-0")
	if rt.Running() != 1 {
		t.Errorf("running containers = %d, want 1", rt.Running())
	}
	c.Network().HealAll()
	waitFor(t, "removed after healing", 30*time.Second, func() bool { _, exists := podPhase(t, cs, "p"); return !exists })
}

// TestKubeletPhasesAndInitOrder: init containers run one after another
// before the app container (LC-10), and the observed phases never go back
// (LC-2).
func TestKubeletPhasesAndInitOrder(t *testing.T) {
	_, ledger, cs := startKubeletCluster(t, 1)
	p := scriptedPod("p", "node-0", 5, map[string]string{"i1": "run=2s", "i2": "run=2s", "app": "run=5s exit=0"}, "app")
	p.Spec.InitContainers = []corev1.Container{{Name: "i1", Image: "sim"}, {Name: "i2", Image: "sim"}}
	p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/gate"}}
	createPod(t, cs, p)
	var phases []corev1.PodPhase
	waitFor(t, "succeeded", 30*time.Second, func() bool {
		ph, _ := podPhase(t, cs, "p")
		if ph != "" && (len(phases) == 0 || phases[len(phases)-1] != ph) {
			phases = append(phases, ph)
		}
		return ph == corev1.PodSucceeded
	})
	rank := map[corev1.PodPhase]int{corev1.PodPending: 0, corev1.PodRunning: 1, corev1.PodSucceeded: 2}
	for i := 1; i < len(phases); i++ {
		if rank[phases[i]] < rank[phases[i-1]] {
			t.Errorf("phase went back: %v", phases)
		}
	}
	var got []string
	for _, e := range entries(ledger, "p", "") {
		got = append(got, fmt.Sprintf("%s:%s", e.Container, e.Action))
	}
	want := []string{"i1:start", "i1:exit", "i2:start", "i2:exit", "app:start", "app:exit"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ledger order %v, want %v", got, want)
	}
	final, err := cs.CoreV1().Pods("default").Get(context.Background(), "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conds := map[corev1.PodConditionType]corev1.ConditionStatus{}
	for _, c := range final.Status.Conditions {
		conds[c.Type] = c.Status
		if c.LastTransitionTime.IsZero() {
			t.Errorf("condition %s has no lastTransitionTime", c.Type)
		}
	}
	if conds[corev1.PodInitialized] != corev1.ConditionTrue || conds[corev1.PodReady] != corev1.ConditionFalse {
		t.Errorf("conditions %v", conds)
	}
	if cs := final.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode != 0 {
		t.Errorf("container statuses %+v", cs)
	}
}

// TestKubeletLivenessKillAndBackoff: a failing liveness probe kills the
// container with the probe's grace period (GP-1, LC-9), and restartPolicy
// Always restarts it after the back-off (LC-6).
// livenessKilledPod is pod p on node-0, restarted always, whose container
// ignores TERM and fails its liveness probe (grace 3 s) 3 s after each start.
func livenessKilledPod() *corev1.Pod {
	p := scriptedPod("p", "node-0", 30, map[string]string{"app": "ignore-term liveness-fail-at=3s"}, "app")
	p.Spec.RestartPolicy = corev1.RestartPolicyAlways
	p.Spec.Containers[0].LivenessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}},
		PeriodSeconds: 1, FailureThreshold: 1, TerminationGracePeriodSeconds: ptr.To[int64](3),
	}
	return p
}

func TestKubeletLivenessKillAndBackoff(t *testing.T) {
	_, ledger, cs := startKubeletCluster(t, 1)
	createPod(t, cs, livenessKilledPod())
	waitFor(t, "second start", 30*time.Second, func() bool { return len(entries(ledger, "p", kubelet.ActionStart)) >= 2 })
	starts := entries(ledger, "p", kubelet.ActionStart)
	terms, kills := entries(ledger, "p", kubelet.ActionTerm), entries(ledger, "p", kubelet.ActionKill)
	if len(terms) < 1 || len(kills) < 1 {
		t.Fatalf("ledger: %+v", entries(ledger, "p", ""))
	}
	if terms[0].Grace != 3 {
		t.Errorf("liveness kill grace %d, want the probe's 3", terms[0].Grace)
	}
	if got := kills[0].Scaled.Sub(terms[0].Scaled); got < 3*time.Second {
		t.Errorf("KILL %s after TERM, want at least 3s", got)
	}
	if got := starts[1].Scaled.Sub(kills[0].Scaled); got < kubelet.BackoffInitial {
		t.Errorf("restarted %s after the kill, want at least the %s back-off", got, kubelet.BackoffInitial)
	}
}

// TestKubeletFinalStatusShowsExits: the status a kubelet posts when a
// deleted pod's containers have stopped shows them terminated, never a
// terminal phase beside a container still running (LC-2, LC-5). The
// containers stop at once on TERM, inside the same sync that terminates
// them.
func TestKubeletFinalStatusShowsExits(t *testing.T) {
	_, _, cs := startKubeletCluster(t, 1)
	var mu sync.Mutex
	var bad []string
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := cs.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || (p.Status.Phase != corev1.PodFailed && p.Status.Phase != corev1.PodSucceeded) {
				continue
			}
			for _, c := range p.Status.ContainerStatuses {
				if c.State.Running != nil {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("%s %s with container %s running", p.Name, p.Status.Phase, c.Name))
					mu.Unlock()
				}
			}
		}
	}()
	var names []string
	for i := range 24 {
		names = append(names, fmt.Sprintf("p%d", i))
	}
	for _, n := range names {
		createPod(t, cs, scriptedPod(n, "node-0", 5, map[string]string{"app": ""}, "app"))
	}
	for _, n := range names {
		waitFor(t, n+" running", 20*time.Second, func() bool { p, _ := podPhase(t, cs, n); return p == corev1.PodRunning })
		deletePod(t, cs, n, nil)
	}
	for _, n := range names {
		waitFor(t, n+" removed", 30*time.Second, func() bool { _, exists := podPhase(t, cs, n); return !exists })
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 {
		t.Errorf("terminal phase beside running containers: %v", bad)
	}
}
