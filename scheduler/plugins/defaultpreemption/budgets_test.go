package defaultpreemption_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsafe/podsafe/scheduler/st"
)

// TestPDBViolations: budgets are spent as kube-scheduler spends them
// (FilterVictimsWithPDBViolation), which decides between candidates that
// differ only in how many budgets they violate.
func TestPDBViolations(t *testing.T) {
	selecting := func(name string, allowed int32, sel metav1.LabelSelector) *policyv1.PodDisruptionBudget {
		return &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &sel},
			Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed},
		}
	}
	noApp := metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpDoesNotExist}}}
	for _, tc := range []struct {
		name  string
		nodes []*corev1.Node
		pods  []*corev1.Pod
		pdbs  []*policyv1.PodDisruptionBudget
		want  outcome
	}{
		{
			// Oracle seeds 100452, 102882, 107519: the unlabelled pod
			// matches the DoesNotExist selector, yet violates nothing.
			name:  "a pod without labels violates no budget",
			nodes: []*corev1.Node{node("n1", "2"), node("n2", "2")},
			pods: []*corev1.Pod{
				st.MakePod().Name("bare").Priority(1).Req("2", "").Node("n1").Obj(),
				st.MakePod().Name("tagged").Label("app", "x").Priority(5).Req("2", "").Node("n2").Obj(),
			},
			pdbs: []*policyv1.PodDisruptionBudget{selecting("no-app", 0, noApp)},
			want: outcome{Node: "n1", Victims: []string{"bare"}},
		},
		{
			name:  "a labelled pod a DoesNotExist selector matches violates it",
			nodes: []*corev1.Node{node("n1", "2"), node("n2", "2")},
			pods: []*corev1.Pod{
				st.MakePod().Name("plain").Label("team", "x").Priority(1).Req("2", "").Node("n1").Obj(),
				st.MakePod().Name("tagged").Label("app", "x").Priority(5).Req("2", "").Node("n2").Obj(),
			},
			pdbs: []*policyv1.PodDisruptionBudget{selecting("no-app", 0, noApp)},
			want: outcome{Node: "n2", Victims: []string{"tagged"}},
		},
		{
			// a exceeds a-only and stops there, leaving team's one
			// disruption to b: n1 violates one budget, as n2 does, and
			// wins on its lower highest victim. Spending team for a too
			// would count two violations on n1 and pick n2.
			name:  "a pod is violating at the first budget it exceeds and spends no later one",
			nodes: []*corev1.Node{node("n1", "2"), node("n2", "2")},
			pods: []*corev1.Pod{
				st.MakePod().Name("a").Label("app", "a").Label("team", "x").Priority(2).Req("1", "").Node("n1").Obj(),
				st.MakePod().Name("b").Label("team", "x").Priority(1).Req("1", "").Node("n1").Obj(),
				st.MakePod().Name("e").Label("app", "a").Priority(3).Req("2", "").Node("n2").Obj(),
			},
			pdbs: []*policyv1.PodDisruptionBudget{budget("a-only", "a", 0),
				selecting("team", 1, metav1.LabelSelector{MatchLabels: map[string]string{"team": "x"}})},
			want: outcome{Node: "n1", Victims: []string{"a", "b"}},
		},
		{
			name:  "a pod the budget already counts as disrupted does not spend it",
			nodes: []*corev1.Node{node("n1", "2"), node("n2", "2")},
			pods: []*corev1.Pod{
				st.MakePod().Name("counted").Label("app", "g").Priority(1).Req("2", "").Node("n1").Obj(),
				st.MakePod().Name("free").Label("app", "f").Priority(5).Req("2", "").Node("n2").Obj(),
			},
			pdbs: func() []*policyv1.PodDisruptionBudget {
				b := budget("g", "g", 0)
				b.Status.DisruptedPods = map[string]metav1.Time{"counted": {}}
				return []*policyv1.PodDisruptionBudget{b}
			}(),
			want: outcome{Node: "n1", Victims: []string{"counted"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := runPreemption(t, tc.nodes, tc.pods, preemptor(10, "2"), tc.pdbs...)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("preemption (-want +got):\n%s", diff)
			}
		})
	}
}
