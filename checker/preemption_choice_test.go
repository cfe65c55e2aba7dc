package checker

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/podsafe/podsafe/history"
)

// choiceCase: nodes n1 and n2 of one CPU each; on n1 "high" (priority
// 1000) and "low" (priority 0), on n2 "mid" (priority 100); "low" and "mid"
// are each selected by a PodDisruptionBudget that allows no disruption
// (kubernetes#128307's and #129136's shape). The preemptor (priority
// 10000, cpu CPU) comes at 10 s; the scheduler deletes victims at 10.99 s
// and nominates the preemptor to their node.
type choiceCase struct {
	cpu, highCPU, lowCPU string
	victims              []string // names of the pods the scheduler deletes
	// churn, when set, changes "high"'s labels at 9 s: inside the window.
	churn bool
	// hostPort gives "high" a host port; twoBudgets adds a second budget
	// selecting "low"; lateBind binds another pod to n2 right after the
	// decision.
	hostPort, twoBudgets, lateBind bool
	// tolerant gives the preemptor a toleration with tolerationSeconds
	// and a status change at 10.5 s: two versions of it in the window.
	tolerant bool
}

func (c choiceCase) history(t *testing.T) *history.History {
	b := newSchedHist(t)
	b.node(0, smallNode("n1"))
	b.node(0, smallNode("n2"))
	high := prioPod("high", 1000, c.highCPU)
	if c.hostPort {
		high.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
	}
	pods := map[string]*corev1.Pod{
		"high": onNode(high, "n1"),
		"low":  onNode(prioPod("low", 0, c.lowCPU), "n1"),
		"mid":  onNode(prioPod("mid", 100, "1"), "n2"),
	}
	for _, name := range []string{"high", "low", "mid"} {
		b.pod(1, pods[name])
	}
	budgets := []string{"low", "mid"}
	if c.twoBudgets {
		budgets = append(budgets, "low")
	}
	for i, name := range budgets {
		pdb := &policyv1.PodDisruptionBudget{
			TypeMeta:   metav1.TypeMeta{Kind: "PodDisruptionBudget", APIVersion: "policy/v1"},
			ObjectMeta: metav1.ObjectMeta{Namespace: prioNS, Name: "pdb-" + name},
			Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptrIntStr(intstr.FromInt32(1)),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}},
			Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 0, CurrentHealthy: 1, DesiredHealthy: 1, ExpectedPods: 1},
		}
		if i > 1 {
			pdb.Name += "-again"
		}
		b.store(1.5, history.StoreAdded, "poddisruptionbudgets.policy", prioNS, pdb.Name, pdb)
	}
	if c.churn {
		q := pods["high"].DeepCopy()
		q.Labels["tier"] = "changed"
		b.pod(9, q)
		pods["high"] = q
	}
	p := prioPod("preemptor", 10000, c.cpu)
	if c.tolerant {
		p.Spec.Tolerations = []corev1.Toleration{{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists,
			Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptrInt64(300)}}
	}
	b.pod(10, p)
	if c.tolerant {
		q := p.DeepCopy()
		q.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable"}}
		b.pod(10.5, q)
	}
	node := ""
	for i, name := range c.victims {
		v := pods[name]
		node = v.Spec.NodeName
		b.preempted(10.9+0.03*float64(i), v)
	}
	if c.lateBind {
		late := prioPod("late", 0, "100m")
		b.pod(5, late)
		b.pod(10.95, onNode(late, "n2"))
	}
	b.call(11.03, identityScheduler, "create", "events", "", p.Namespace, p.Name+".2b", history.StatusOK, "")
	b.call(11.04, identityScheduler, "patch", "pods", "status", p.Namespace, p.Name, history.StatusOK, string(p.UID))
	b.pod(11.045, nominated(p, node))
	for _, name := range c.victims {
		b.podGone(12, pods[name])
	}
	h := b.history()
	h.End = schedSec(60)
	return h
}

func ptrIntStr(v intstr.IntOrString) *intstr.IntOrString { return &v }

// TestPreemptionNodeChoice: the node choice of a preemption is judged by
// the rules kube-scheduler applies (PR-7 then PR-11), where the window
// pins the state.
func TestPreemptionNodeChoice(t *testing.T) {
	tests := []struct {
		name string
		c    choiceCase
		want Verdict
		// words the summary (Ok) or the first evidence (Illegal) holds
		words []string
	}{
		// #128307: the preemptor needs all of n1, so "low" cannot be
		// kept: both nodes cost one budget, and n2's highest victim (100)
		// is lower than n1's (1000).
		{"128307: n2 is right", choiceCase{cpu: "1", highCPU: "500m", lowCPU: "500m", victims: []string{"mid"}}, Ok,
			[]string{"node choice judged for 1 preemption"}},
		{"128307: n1 is wrong (PR-11)", choiceCase{cpu: "1", highCPU: "500m", lowCPU: "500m", victims: []string{"high", "low"}}, Illegal,
			[]string{"PR-11", "highest-priority victim has priority 1000", "node n2", "prio/mid (priority 100)"}},
		// #129136: half of n1 is enough, so "low" is kept and n1 costs no
		// budget: n1 is right though its victim has the higher priority.
		{"129136: n1 is right", choiceCase{cpu: "500m", highCPU: "500m", lowCPU: "500m", victims: []string{"high"}}, Ok,
			[]string{"node choice judged for 1 preemption"}},
		{"129136: n2 is wrong (PR-7)", choiceCase{cpu: "500m", highCPU: "500m", lowCPU: "500m", victims: []string{"mid"}}, Illegal,
			[]string{"PR-7", "violates 1 PodDisruptionBudget", "node n1 with 1 victim (prio/high (priority 1000)), 0 PodDisruptionBudget violations"}},
		// Victims on n1 that the rules do not give there (low could be
		// kept): the checker does not trust its replay and leaves it.
		{"victims the rules do not give", choiceCase{cpu: "500m", highCPU: "500m", lowCPU: "500m", victims: []string{"high", "low"}}, Ok,
			[]string{"node choice judged for 0 preemptions", "not the ones the rules give"}},
		// Each version of the preemptor decodes its own tolerationSeconds
		// pointer: the same spec all the same.
		{"a preemptor whose status changed", choiceCase{cpu: "1", highCPU: "500m", lowCPU: "500m", victims: []string{"high", "low"}, tolerant: true}, Illegal,
			[]string{"PR-11"}},
		{"a victim with a host port", choiceCase{cpu: "1", highCPU: "500m", lowCPU: "500m", victims: []string{"high", "low"}, hostPort: true}, Ok,
			[]string{"node choice judged for 0 preemptions", "uses host ports or claims"}},
		{"a pod two budgets select", choiceCase{cpu: "1", highCPU: "500m", lowCPU: "500m", victims: []string{"high", "low"}, twoBudgets: true}, Ok,
			[]string{"node choice judged for 0 preemptions", "cannot decide"}},
		{"another pod bound right after the decision", choiceCase{cpu: "1", highCPU: "500m", lowCPU: "500m", victims: []string{"high", "low"}, lateBind: true}, Ok,
			[]string{"node choice judged for 0 preemptions", "pod prio/late was bound or nominated right after the decision"}},
		// A change inside the window: the state is not pinned.
		{"unquiet window", choiceCase{cpu: "1", highCPU: "500m", lowCPU: "500m", victims: []string{"high", "low"}, churn: true}, Ok,
			[]string{"node choice judged for 0 preemptions", "pod prio/high changed in the window"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := CheckPreemption(t.Context(), tc.c.history(t), Options{})
			if res.Verdict != tc.want {
				t.Fatalf("verdict %s, want %s: %s; evidence %+v", res.Verdict, tc.want, res.Summary, res.Evidence)
			}
			text := res.Summary
			if tc.want == Illegal {
				ev := res.Evidence[0]
				if len(ev.API) == 0 || ev.API[0].Verb != "delete" {
					t.Errorf("evidence does not start with the victim's deletion: %+v", ev.API)
				}
				text = ev.Description
			}
			for _, w := range tc.words {
				if !strings.Contains(text, w) {
					t.Errorf("%q does not say %q", text, w)
				}
			}
		})
	}
}
