package apiserver

// Validation of apps/v1 Deployments, as kube-apiserver's
// ValidateDeploymentSpec and ValidateDeploymentUpdate.

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateDeployment is ValidateDeploymentSpec: replicas non-negative, a
// selector that matches the template, a known strategy whose surge and
// unavailability are not both 0 (a rollout could never move), counts
// non-negative and a progress deadline longer than minReadySeconds.
func validateDeployment(d *appsv1.Deployment) field.ErrorList {
	var errs field.ErrorList
	spec, path := &d.Spec, field.NewPath("spec")
	errs = append(errs, validateReplicas(spec.Replicas, path.Child("replicas"))...)
	errs = append(errs, validateWorkloadSelector(spec.Selector, &spec.Template, path, "deployment")...)
	errs = append(errs, validateWorkloadTemplate(&spec.Template, path.Child("template"), "Deployment")...)
	errs = append(errs, validateDeploymentStrategy(&spec.Strategy, path.Child("strategy"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(spec.MinReadySeconds), path.Child("minReadySeconds"))...)
	if spec.RevisionHistoryLimit != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*spec.RevisionHistoryLimit), path.Child("revisionHistoryLimit"))...)
	}
	if p := spec.ProgressDeadlineSeconds; p != nil {
		pp := path.Child("progressDeadlineSeconds")
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*p), pp)...)
		if *p <= spec.MinReadySeconds {
			errs = append(errs, field.Invalid(pp, *p, "must be greater than minReadySeconds"))
		}
	}
	return errs
}

// validateDeploymentStrategy is ValidateDeploymentStrategy.
func validateDeploymentStrategy(s *appsv1.DeploymentStrategy, path *field.Path) field.ErrorList {
	switch s.Type {
	case appsv1.RecreateDeploymentStrategyType:
		if s.RollingUpdate != nil {
			return field.ErrorList{field.Forbidden(path.Child("rollingUpdate"),
				fmt.Sprintf("may not be specified when strategy `type` is '%s'", appsv1.RecreateDeploymentStrategyType))}
		}
		return nil
	case appsv1.RollingUpdateDeploymentStrategyType:
		if s.RollingUpdate == nil {
			return field.ErrorList{field.Required(path.Child("rollingUpdate"), "this should be defaulted and never be nil")}
		}
		return validateRollingUpdateDeployment(s.RollingUpdate, path.Child("rollingUpdate"))
	}
	return field.ErrorList{field.NotSupported(path, *s, []string{
		string(appsv1.RecreateDeploymentStrategyType), string(appsv1.RollingUpdateDeploymentStrategyType)})}
}

// validateRollingUpdateDeployment is ValidateRollingUpdateDeployment:
// maxSurge may exceed 100% (a rollout may double the set and more),
// maxUnavailable may not.
func validateRollingUpdateDeployment(ru *appsv1.RollingUpdateDeployment, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	var unavailable, surge intstr.IntOrString
	if ru.MaxUnavailable != nil {
		unavailable = *ru.MaxUnavailable
	}
	if ru.MaxSurge != nil {
		surge = *ru.MaxSurge
	}
	up, sp := path.Child("maxUnavailable"), path.Child("maxSurge")
	errs = append(errs, validatePositiveIntOrPercent(unavailable, up)...)
	errs = append(errs, validatePositiveIntOrPercent(surge, sp)...)
	u, _ := intOrPercentValue(unavailable)
	s, _ := intOrPercentValue(surge)
	if u == 0 && s == 0 {
		errs = append(errs, field.Invalid(up, unavailable, "may not be 0 when `maxSurge` is 0"))
	}
	if unavailable.Type == intstr.String {
		if n, ok := intOrPercentValue(unavailable); ok && n > 100 {
			errs = append(errs, field.Invalid(up, unavailable, "must not be greater than 100%"))
		}
	}
	return errs
}

// validatePositiveIntOrPercent is ValidatePositiveIntOrPercent: a
// non-negative integer or a well-formed percentage, of any size.
func validatePositiveIntOrPercent(v intstr.IntOrString, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch v.Type {
	case intstr.String:
		for _, msg := range validation.IsValidPercent(v.StrVal) {
			errs = append(errs, field.Invalid(path, v, msg))
		}
	case intstr.Int:
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(v.IntValue()), path)...)
	}
	return errs
}

// validateDeploymentUpdate: the selector is immutable in apps/v1.
func validateDeploymentUpdate(old, d *appsv1.Deployment) field.ErrorList {
	return apivalidation.ValidateImmutableField(d.Spec.Selector, old.Spec.Selector, field.NewPath("spec", "selector"))
}
