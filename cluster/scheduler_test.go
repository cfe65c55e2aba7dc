package cluster_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/kubelet"
)

func schedPod(name string, cpu string, labels map[string]string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}},
	}
	return p
}

func waitPod(t *testing.T, cs kubernetes.Interface, name string, ok func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err == nil && ok(p) {
			return p
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for pod %s: %v (last %+v, err %v)", name, ctx.Err(), p, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestSchedulerInCluster binds pods through the API respecting a zone
// spread constraint, then preempts a low-priority pod for a high-priority
// one: the victim is deleted gracefully (it stays terminating: no kubelet
// finishes it) and the preemptor is nominated to its node.
func TestSchedulerInCluster(t *testing.T) {
	c := startCluster(t, cluster.Config{Topology: cluster.DefaultTopology(1, 4, 2), Scheduler: true, TimeScale: 10,
		Logger: slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	cs := clientset(t, c, apiserver.IdentityAdmin, 0)
	ctx := context.Background()
	if !c.SchedulerRunning() {
		t.Fatal("scheduler not running")
	}

	// Spread: four pods, maxSkew 1 over two zones: two per zone.
	perZone := map[string]int{}
	for i := 0; i < 4; i++ {
		p := schedPod(fmt.Sprintf("web-%d", i), "100m", map[string]string{"app": "web"})
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: cluster.LabelZone, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		}}
		if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		bound := waitPod(t, cs, p.Name, func(p *corev1.Pod) bool { return p.Spec.NodeName != "" })
		node, err := cs.CoreV1().Nodes().Get(ctx, bound.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		perZone[node.Labels[cluster.LabelZone]]++
	}
	if perZone["zone-a"] != 2 || perZone["zone-b"] != 2 {
		t.Errorf("pods per zone %v, want 2 and 2", perZone)
	}

	// Preemption: fill every node with a low-priority pod, then ask for a
	// whole node at high priority.
	if _, err := cs.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{
		ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		p := schedPod(fmt.Sprintf("low-%d", i), "7", nil)
		if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitPod(t, cs, p.Name, func(p *corev1.Pod) bool { return p.Spec.NodeName != "" })
	}
	high := schedPod("high", "7", nil)
	high.Spec.PriorityClassName = "high"
	if _, err := cs.CoreV1().Pods("default").Create(ctx, high, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nominated := waitPod(t, cs, "high", func(p *corev1.Pod) bool { return p.Status.NominatedNodeName != "" })
	node := nominated.Status.NominatedNodeName
	pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var victims []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			continue
		}
		victims = append(victims, p.Name)
		if p.Spec.NodeName != node {
			t.Errorf("victim %s on %s, not on the nominated node %s (PR-9)", p.Name, p.Spec.NodeName, node)
		}
		if p.Spec.Priority != nil && *p.Spec.Priority >= 1000 {
			t.Errorf("victim %s has priority %d (PR-10)", p.Name, *p.Spec.Priority)
		}
		if p.DeletionGracePeriodSeconds == nil || *p.DeletionGracePeriodSeconds != 30 {
			t.Errorf("victim %s deleted with grace %v, want its own 30 s (PR-6)", p.Name, p.DeletionGracePeriodSeconds)
		}
	}
	if len(victims) != 1 {
		t.Errorf("victims %v, want exactly one low pod", victims)
	}
	evs, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range evs.Items {
		if e.Reason == "Preempted" && len(victims) == 1 && e.InvolvedObject.Name == victims[0] {
			found = true
		}
	}
	if !found {
		t.Errorf("no Preempted event on the victim (PR-15)")
	}
	if err := c.StopScheduler(); err != nil {
		t.Fatal(err)
	}
	if err := c.StartScheduler(); err != nil {
		t.Fatal(err)
	}
}

// podWatch records every version of the pods of a namespace it sees, from
// before they exist, so a test can ask what was true meanwhile.
type podWatch struct {
	mu   sync.Mutex
	seen []*corev1.Pod
}

func watchPods(t *testing.T, cs kubernetes.Interface) *podWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := cs.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	pw := &podWatch{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok {
				pw.mu.Lock()
				pw.seen = append(pw.seen, p)
				pw.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		w.Stop()
		cancel()
		<-done
	})
	return pw
}

// versions returns the recorded versions of the named pod, oldest first.
func (pw *podWatch) versions(name string) []*corev1.Pod {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	var out []*corev1.Pod
	for _, p := range pw.seen {
		if p.Name == name {
			out = append(out, p)
		}
	}
	return out
}

// TestPreemptionGraceFromLedger preempts, on a cluster with kubelets, a
// low-priority pod whose container ignores TERM: the ledger shows the
// victim got its whole 30 s grace period between TERM and KILL (PR-6), the
// victim has a Preempted event (PR-15), the preemptor is nominated to the
// node while the victim terminates (PR-4) and then runs there, starting only
// after the victim's container exited.
func TestPreemptionGraceFromLedger(t *testing.T) {
	ledger := &kubelet.MemoryLedger{}
	c := startCluster(t, cluster.Config{Topology: cluster.DefaultTopology(1, 1, 1), TimeScale: kubeletScale,
		Kubelets: true, Scheduler: true, Ledger: ledger})
	cs := clientset(t, c, apiserver.IdentityAdmin, 0)
	ctx := context.Background()
	watch := watchPods(t, cs)
	if _, err := cs.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{
		ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	const grace = 30
	victim := schedPod("victim", "8", map[string]string{"app": "victim"})
	victim.Spec.TerminationGracePeriodSeconds = ptr.To[int64](grace)
	victim.Annotations = map[string]string{kubelet.ScriptAnnotationPrefix + "c": "ignore-term"}
	createPod(t, cs, victim)
	running := waitPod(t, cs, "victim", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	node := running.Spec.NodeName

	high := schedPod("high", "8", nil)
	high.Spec.PriorityClassName = "high"
	createPod(t, cs, high)
	final := waitPod(t, cs, "high", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	if final.Spec.NodeName != node {
		t.Errorf("preemptor runs on %s, want the victim's node %s", final.Spec.NodeName, node)
	}
	if _, exists := podPhase(t, cs, "victim"); exists {
		t.Errorf("the victim still exists while the preemptor runs")
	}

	// PR-4: nominated to the node while not yet bound.
	nominated := false
	for _, p := range watch.versions("high") {
		if p.Spec.NodeName == "" && p.Status.NominatedNodeName == node {
			nominated = true
		}
	}
	if !nominated {
		t.Errorf("the preemptor was never seen nominated to %s before binding", node)
	}

	// PR-6: from the ledger, KILL came no sooner than the grace after TERM.
	terms, kills := entries(ledger, "victim", kubelet.ActionTerm), entries(ledger, "victim", kubelet.ActionKill)
	exits := entries(ledger, "victim", kubelet.ActionExit)
	if len(terms) != 1 || len(kills) != 1 || len(exits) != 1 {
		t.Fatalf("victim ledger: %+v, want one TERM, KILL and exit", entries(ledger, "victim", ""))
	}
	if terms[0].Grace != grace {
		t.Errorf("victim TERM with grace %d, want its own %d", terms[0].Grace, grace)
	}
	if got := kills[0].Scaled.Sub(terms[0].Scaled); got < grace*time.Second {
		t.Errorf("victim KILL %s after TERM, want at least %ds (PR-6)", got, grace)
	}
	// The preemptor's container started only once the victim's had exited.
	starts := entries(ledger, "high", kubelet.ActionStart)
	if len(starts) != 1 || starts[0].Scaled.Before(exits[0].Scaled) {
		t.Errorf("preemptor starts %+v, want one after the victim exited at %v", starts, exits[0].Scaled)
	}

	// PR-15: the victim has its Preempted event.
	evs, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=victim,reason=Preempted"})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs.Items) != 1 || evs.Items[0].InvolvedObject.UID != running.UID {
		t.Errorf("Preempted events of the victim: %+v, want one naming its UID %s", evs.Items, running.UID)
	}
}

// tWriter sends log lines to the test log.
type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }
