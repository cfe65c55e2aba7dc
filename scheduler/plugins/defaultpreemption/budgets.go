package defaultpreemption

import (
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/podsafe/podsafe/scheduler/framework"
)

// budget is a PodDisruptionBudget with its selector parsed once per
// preemption; sel is nil for a budget that selects nothing.
type budget struct {
	pdb *policyv1.PodDisruptionBudget
	sel labels.Selector
}

func newBudgets(pdbs []*policyv1.PodDisruptionBudget) []budget {
	out := make([]budget, len(pdbs))
	for i, pdb := range pdbs {
		out[i].pdb = pdb
		if pdb.Spec.Selector == nil {
			continue
		}
		if sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err == nil && !sel.Empty() {
			out[i].sel = sel
		}
	}
	return out
}

// splitByPDB separates the pods whose removal would exceed a budget's
// allowed disruptions from the others, spending the budgets pod by pod in
// the order given, as kube-scheduler's FilterVictimsWithPDBViolation: a
// pod without labels matches no budget (whatever its selector, even one of
// DoesNotExist terms); a pod the budget already counts as disrupted does
// not spend it; and a pod is violating at the first budget it exceeds,
// which ends its turn, so the budgets after it are not spent for it.
func splitByPDB(pods []*framework.PodInfo, budgets []budget) (violating, safe []*framework.PodInfo) {
	if len(budgets) == 0 {
		return nil, pods
	}
	allowed := make([]int32, len(budgets))
	for i, b := range budgets {
		allowed[i] = b.pdb.Status.DisruptionsAllowed
	}
	violates := func(pod *corev1.Pod) bool {
		if len(pod.Labels) == 0 {
			return false
		}
		for i, b := range budgets {
			if b.sel == nil || b.pdb.Namespace != pod.Namespace || !b.sel.Matches(labels.Set(pod.Labels)) {
				continue
			}
			if _, counted := b.pdb.Status.DisruptedPods[pod.Name]; counted {
				continue
			}
			if allowed[i]--; allowed[i] < 0 {
				return true
			}
		}
		return false
	}
	for _, pi := range pods {
		if violates(pi.Pod) {
			violating = append(violating, pi)
		} else {
			safe = append(safe, pi)
		}
	}
	return violating, safe
}
