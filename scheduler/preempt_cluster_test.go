package scheduler_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/scheduler/plugins/defaultpreemption"
	"github.com/podsafe/podsafe/scheduler/st"
)

// markSeen is what the test's informer saw of a victim.
type markSeen struct {
	mu sync.Mutex
	// marked is the DisruptionTarget condition of the first version
	// carrying one; terminatingMarked is set once a version was both
	// being deleted and marked (defaultpreemption.TerminatingByPreemption).
	marked            *corev1.PodCondition
	terminatingMarked bool
	deletedUnmarked   bool
	preemptorNode     string
}

func (m *markSeen) observe(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if pod.Name == "pre" {
		m.preemptorNode = pod.Spec.NodeName
		return
	}
	for i, c := range pod.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && m.marked == nil {
			m.marked = &pod.Status.Conditions[i]
		}
	}
	switch {
	case defaultpreemption.TerminatingByPreemption(pod):
		m.terminatingMarked = true
	case pod.DeletionTimestamp != nil:
		m.deletedUnmarked = true
	}
}

// TestPreemptionMarksVictims runs a preemption through the real API
// server: the API accepts the scheduler's DisruptionTarget status patch on
// a bound victim, the victim is marked before its deletion begins (no
// version is being deleted without the mark), and the preemptor ends on
// the victim's node.
func TestPreemptionMarksVictims(t *testing.T) {
	c := cluster.StartForTest(t, cluster.Config{
		Topology:  cluster.DefaultTopology(1, 1, 1),
		Kubelets:  true,
		Scheduler: true,
		// The victim's 30 s of grace take 1.5 s.
		TimeScale: 20,
		Logger:    slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	cs, err := c.Clientset(apiserver.IdentityAdmin, cluster.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := &markSeen{}
	observePods(t, cs, seen.observe)

	high := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000}
	if _, err := cs.SchedulingV1().PriorityClasses().Create(ctx, high, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	victim := st.MakePod().Name("victim").Req("6", "").Obj()
	victim.UID = ""
	if _, err := cs.CoreV1().Pods("default").Create(ctx, victim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the victim bound", func() bool {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "victim", metav1.GetOptions{})
		return err == nil && p.Spec.NodeName != ""
	})
	pre := st.MakePod().Name("pre").Req("4", "").Obj()
	pre.UID = ""
	pre.Spec.PriorityClassName = "high"
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pre, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the preemptor bound", func() bool {
		seen.mu.Lock()
		defer seen.mu.Unlock()
		return seen.preemptorNode != ""
	})
	seen.mu.Lock()
	defer seen.mu.Unlock()
	if seen.marked == nil {
		t.Fatal("the victim never carried a DisruptionTarget condition")
	}
	if seen.marked.Status != corev1.ConditionTrue || seen.marked.Reason != corev1.PodReasonPreemptionByScheduler ||
		!strings.Contains(seen.marked.Message, "preempting to accommodate a higher priority pod default/pre") {
		t.Errorf("DisruptionTarget condition %+v, want True, reason %s, a message naming default/pre", *seen.marked, corev1.PodReasonPreemptionByScheduler)
	}
	if !seen.terminatingMarked {
		t.Error("no version of the victim was both being deleted and marked")
	}
	if seen.deletedUnmarked {
		t.Error("a version of the victim was being deleted without the mark: it was deleted before its status patch")
	}
	if seen.preemptorNode != "node-0" {
		t.Errorf("preemptor bound to %q, want node-0", seen.preemptorNode)
	}
}
