package cluster_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/cluster"
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

// tWriter sends log lines to the test log.
type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }
