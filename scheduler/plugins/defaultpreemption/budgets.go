package defaultpreemption

import (
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
// allowed disruptions from the others, spending the budget pod by pod.
func splitByPDB(pods []*framework.PodInfo, budgets []budget) (violating, safe []*framework.PodInfo) {
	if len(budgets) == 0 {
		return nil, pods
	}
	allowed := make([]int32, len(budgets))
	for i, b := range budgets {
		allowed[i] = b.pdb.Status.DisruptionsAllowed
	}
	for _, pi := range pods {
		violates := false
		for i, b := range budgets {
			if b.sel == nil || b.pdb.Namespace != pi.Pod.Namespace || !b.sel.Matches(labels.Set(pi.Pod.Labels)) {
				continue
			}
			if _, counted := b.pdb.Status.DisruptedPods[pi.Pod.Name]; counted {
				continue
			}
			allowed[i]--
			if allowed[i] < 0 {
				violates = true
			}
		}
		if violates {
			violating = append(violating, pi)
		} else {
			safe = append(safe, pi)
		}
	}
	return violating, safe
}
