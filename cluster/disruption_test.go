package cluster_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/kubelet"
)

// waitBudget waits until the budget's status satisfies ok and returns it.
func waitBudget(t *testing.T, cs kubernetes.Interface, name string, ok func(policyv1.PodDisruptionBudgetStatus) bool) *policyv1.PodDisruptionBudget {
	t.Helper()
	var last *policyv1.PodDisruptionBudget
	waitFor(t, "status of budget "+name, 20*time.Second, func() bool {
		pdb, err := cs.PolicyV1().PodDisruptionBudgets("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		last = pdb
		return ok(pdb.Status)
	})
	return last
}

// TestPreemptionFollowsBudgetStatus runs the disruption controller with
// the scheduler and kubelets. Two nodes are full: one with a priority-0 pod
// under a PodDisruptionBudget, one with an unbudgeted priority-100 pod. A
// priority-1000 pod preempts one of them. Preemption reads only the
// budget's status.disruptionsAllowed, which the controller computes: when
// it says the budget has a disruption to spare, the lowest-priority pod
// goes (PR-11); when it says none, the other pod goes instead (PR-7). The
// status then follows the budget's pods.
func TestPreemptionFollowsBudgetStatus(t *testing.T) {
	for _, tc := range []struct {
		name         string
		minAvailable int32
		wantAllowed  int32
		wantVictim   string
	}{
		{name: "no disruption allowed", minAvailable: 1, wantAllowed: 0, wantVictim: "free"},
		{name: "one disruption allowed", minAvailable: 0, wantAllowed: 1, wantVictim: "guarded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ledger := &kubelet.MemoryLedger{}
			c := startCluster(t, cluster.Config{Topology: cluster.DefaultTopology(1, 2, 1), TimeScale: kubeletScale,
				Kubelets: true, Scheduler: true, Ledger: ledger})
			if err := c.StartController(cluster.ControllerDisruption); err != nil {
				t.Fatal(err)
			}
			cs := clientset(t, c, apiserver.IdentityAdmin, 0)
			ctx := context.Background()
			for name, value := range map[string]int32{"mid": 100, "high": 1000} {
				if _, err := cs.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{
					ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			pdb := &policyv1.PodDisruptionBudget{
				ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "guarded"},
				Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(tc.minAvailable)),
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}},
			}
			if _, err := cs.PolicyV1().PodDisruptionBudgets("default").Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			createPod(t, cs, schedPod("guarded", "8", map[string]string{"app": "guarded"}))
			guarded := waitPod(t, cs, "guarded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
			free := schedPod("free", "8", map[string]string{"app": "free"})
			free.Spec.PriorityClassName = "mid"
			createPod(t, cs, free)
			freeRunning := waitPod(t, cs, "free", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
			if freeRunning.Spec.NodeName == guarded.Spec.NodeName {
				t.Fatalf("both pods on %s", guarded.Spec.NodeName)
			}
			nodeOf := map[string]string{"guarded": guarded.Spec.NodeName, "free": freeRunning.Spec.NodeName}

			st := waitBudget(t, cs, "guarded", func(s policyv1.PodDisruptionBudgetStatus) bool { return s.CurrentHealthy == 1 }).Status
			want := budgetCounts{Current: 1, Desired: tc.minAvailable, Expected: 1, Allowed: tc.wantAllowed}
			if got := countsOfBudget(st); got != want {
				t.Errorf("budget status %+v, want %+v", got, want)
			}

			high := schedPod("high", "8", nil)
			high.Spec.PriorityClassName = "high"
			createPod(t, cs, high)
			final := waitPod(t, cs, "high", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
			if final.Spec.NodeName != nodeOf[tc.wantVictim] {
				t.Errorf("preemptor runs on %s, want %s where %s was", final.Spec.NodeName, nodeOf[tc.wantVictim], tc.wantVictim)
			}
			for _, name := range []string{"guarded", "free"} {
				_, exists := podPhase(t, cs, name)
				if gone := !exists; gone != (name == tc.wantVictim) {
					t.Errorf("pod %s gone = %v, want the victim %s gone and the other kept", name, gone, tc.wantVictim)
				}
			}
			if tc.wantVictim == "guarded" {
				waitBudget(t, cs, "guarded", func(s policyv1.PodDisruptionBudgetStatus) bool {
					return countsOfBudget(s) == budgetCounts{Current: 0, Desired: 0, Expected: 0, Allowed: 0}
				})
				return
			}
			// A second pod of the budget (asking for no CPU, so it fits
			// beside the others) gives it one disruption to spare.
			createPod(t, cs, schedPod("guarded-2", "0", map[string]string{"app": "guarded"}))
			waitBudget(t, cs, "guarded", func(s policyv1.PodDisruptionBudgetStatus) bool {
				return countsOfBudget(s) == budgetCounts{Current: 2, Desired: 1, Expected: 2, Allowed: 1}
			})
		})
	}
}

// budgetCounts are the counts of a budget's status.
type budgetCounts struct {
	Current, Desired, Expected, Allowed int32
}

func countsOfBudget(s policyv1.PodDisruptionBudgetStatus) budgetCounts {
	return budgetCounts{Current: s.CurrentHealthy, Desired: s.DesiredHealthy, Expected: s.ExpectedPods, Allowed: s.DisruptionsAllowed}
}
