package apiserver

// Validation of PodDisruptionBudgets, as kube-apiserver's
// pkg/apis/policy/validation: minAvailable and maxUnavailable exclusive,
// each a non-negative integer or a percentage of at most 100%, a valid
// selector and eviction policy. The disruption controller and preemption
// (PR-7) read these budgets; a budget with both counts has no meaning.

import (
	policyv1 "k8s.io/api/policy/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validatePDB is ValidatePodDisruptionBudgetSpec.
func validatePDB(pdb *policyv1.PodDisruptionBudget) field.ErrorList {
	var errs field.ErrorList
	spec, path := pdb.Spec, field.NewPath("spec")
	if spec.MinAvailable != nil && spec.MaxUnavailable != nil {
		errs = append(errs, field.Invalid(path, spec, "minAvailable and maxUnavailable cannot be both set"))
	}
	if spec.MinAvailable != nil {
		errs = append(errs, validateIntOrPercent(*spec.MinAvailable, path.Child("minAvailable"))...)
	}
	if spec.MaxUnavailable != nil {
		errs = append(errs, validateIntOrPercent(*spec.MaxUnavailable, path.Child("maxUnavailable"))...)
	}
	errs = append(errs, metav1validation.ValidateLabelSelector(spec.Selector, metav1validation.LabelSelectorValidationOptions{}, path.Child("selector"))...)
	if p := spec.UnhealthyPodEvictionPolicy; p != nil && *p != policyv1.IfHealthyBudget && *p != policyv1.AlwaysAllow {
		errs = append(errs, field.NotSupported(path.Child("unhealthyPodEvictionPolicy"), *p,
			[]string{string(policyv1.AlwaysAllow), string(policyv1.IfHealthyBudget)}))
	}
	return errs
}
