package apiserver

// Validation of the apps/v1 kinds, as kube-apiserver's
// pkg/apis/apps/validation: selectors required, non-empty and matching the
// template, counts non-negative, StatefulSet strategies and claim retention,
// and what a StatefulSet or ReplicaSet update may not change.

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateStatefulSet is ValidateStatefulSetSpec for the fields podsafe's
// components and kubectl read.
func validateStatefulSet(set *appsv1.StatefulSet) field.ErrorList {
	var errs field.ErrorList
	spec, path := &set.Spec, field.NewPath("spec")
	switch spec.PodManagementPolicy {
	case "":
		errs = append(errs, field.Required(path.Child("podManagementPolicy"), ""))
	case appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement:
	default:
		errs = append(errs, field.Invalid(path.Child("podManagementPolicy"), spec.PodManagementPolicy,
			fmt.Sprintf("must be '%s' or '%s'", appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement)))
	}
	strategy := path.Child("updateStrategy")
	switch spec.UpdateStrategy.Type {
	case "":
		errs = append(errs, field.Required(strategy, ""))
	case appsv1.OnDeleteStatefulSetStrategyType:
		if spec.UpdateStrategy.RollingUpdate != nil {
			errs = append(errs, field.Invalid(strategy.Child("rollingUpdate"), spec.UpdateStrategy.RollingUpdate,
				fmt.Sprintf("only allowed for updateStrategy '%s'", appsv1.RollingUpdateStatefulSetStrategyType)))
		}
	case appsv1.RollingUpdateStatefulSetStrategyType:
		if ru := spec.UpdateStrategy.RollingUpdate; ru != nil {
			errs = append(errs, validateRollingUpdateStatefulSet(ru, strategy.Child("rollingUpdate"))...)
		}
	default:
		errs = append(errs, field.Invalid(strategy, spec.UpdateStrategy,
			fmt.Sprintf("must be '%s' or '%s'", appsv1.RollingUpdateStatefulSetStrategyType, appsv1.OnDeleteStatefulSetStrategyType)))
	}
	if p := spec.PersistentVolumeClaimRetentionPolicy; p != nil {
		rp := path.Child("persistentVolumeClaimRetentionPolicy")
		errs = append(errs, validateRetentionPolicyType(p.WhenDeleted, rp.Child("whenDeleted"))...)
		errs = append(errs, validateRetentionPolicyType(p.WhenScaled, rp.Child("whenScaled"))...)
	}
	errs = append(errs, validateReplicas(spec.Replicas, path.Child("replicas"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(spec.MinReadySeconds), path.Child("minReadySeconds"))...)
	if spec.Ordinals != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(spec.Ordinals.Start), path.Child("ordinals.start"))...)
	}
	if spec.ServiceName != "" {
		for _, msg := range validation.IsDNS1123Label(spec.ServiceName) {
			errs = append(errs, field.Invalid(path.Child("serviceName"), spec.ServiceName, msg))
		}
	}
	errs = append(errs, validateWorkloadSelector(spec.Selector, &spec.Template, path, "statefulset")...)
	errs = append(errs, validateWorkloadTemplate(&spec.Template, path.Child("template"), "StatefulSet")...)
	return errs
}

// validateRollingUpdateStatefulSet checks the partition and maxUnavailable.
func validateRollingUpdateStatefulSet(ru *appsv1.RollingUpdateStatefulSetStrategy, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if ru.Partition != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*ru.Partition), path.Child("partition"))...)
	}
	if mu := ru.MaxUnavailable; mu != nil {
		p := path.Child("maxUnavailable")
		errs = append(errs, validateIntOrPercent(*mu, p)...)
		if v, _ := intOrPercentValue(*mu); v == 0 {
			errs = append(errs, field.Invalid(p, *mu, "cannot be 0"))
		}
	}
	return errs
}

// validateRetentionPolicyType checks one claim retention policy.
func validateRetentionPolicyType(t appsv1.PersistentVolumeClaimRetentionPolicyType, path *field.Path) field.ErrorList {
	switch t {
	case appsv1.RetainPersistentVolumeClaimRetentionPolicyType, appsv1.DeletePersistentVolumeClaimRetentionPolicyType:
		return nil
	}
	return field.ErrorList{field.NotSupported(path, t, []string{
		string(appsv1.RetainPersistentVolumeClaimRetentionPolicyType), string(appsv1.DeletePersistentVolumeClaimRetentionPolicyType)})}
}

// validateStatefulSetUpdate: the selector, claim templates, service name
// and pod management policy are immutable (ValidateStatefulSetUpdate since
// 1.35 names each field; the older "updates to statefulset spec for fields
// other than ..." message is gone upstream).
func validateStatefulSetUpdate(old, set *appsv1.StatefulSet) field.ErrorList {
	path := field.NewPath("spec")
	var errs field.ErrorList
	errs = append(errs, apivalidation.ValidateImmutableField(set.Spec.Selector, old.Spec.Selector, path.Child("selector"))...)
	errs = append(errs, apivalidation.ValidateImmutableField(set.Spec.VolumeClaimTemplates, old.Spec.VolumeClaimTemplates, path.Child("volumeClaimTemplates"))...)
	errs = append(errs, apivalidation.ValidateImmutableField(set.Spec.ServiceName, old.Spec.ServiceName, path.Child("serviceName"))...)
	errs = append(errs, apivalidation.ValidateImmutableField(set.Spec.PodManagementPolicy, old.Spec.PodManagementPolicy, path.Child("podManagementPolicy"))...)
	return errs
}

// validateReplicaSet is ValidateReplicaSetSpec.
func validateReplicaSet(rs *appsv1.ReplicaSet) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("spec")
	errs = append(errs, validateReplicas(rs.Spec.Replicas, path.Child("replicas"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(rs.Spec.MinReadySeconds), path.Child("minReadySeconds"))...)
	// "deployment": kube-apiserver's message for a ReplicaSet says so too.
	errs = append(errs, validateWorkloadSelector(rs.Spec.Selector, &rs.Spec.Template, path, "deployment")...)
	errs = append(errs, validateWorkloadTemplate(&rs.Spec.Template, path.Child("template"), "ReplicaSet")...)
	return errs
}

// validateReplicas: a defaulted replicas is never nil; it must not be
// negative.
func validateReplicas(r *int32, path *field.Path) field.ErrorList {
	if r == nil {
		return nil
	}
	return apivalidation.ValidateNonnegativeField(int64(*r), path)
}

// validateWorkloadSelector checks spec.selector: required, a valid and
// non-empty selector, and matching the template's labels. what names the
// kind in the empty-selector message, as upstream words it.
func validateWorkloadSelector(sel *metav1.LabelSelector, tmpl *corev1.PodTemplateSpec, path *field.Path, what string) field.ErrorList {
	var errs field.ErrorList
	sp := path.Child("selector")
	if sel == nil {
		return field.ErrorList{field.Required(sp, "")}
	}
	errs = append(errs, metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, sp)...)
	if len(sel.MatchLabels)+len(sel.MatchExpressions) == 0 {
		errs = append(errs, field.Invalid(sp, sel, "empty selector is invalid for "+what))
	}
	selector, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return append(errs, field.Invalid(sp, sel, "invalid label selector"))
	}
	if !selector.Empty() && !selector.Matches(labels.Set(tmpl.Labels)) {
		errs = append(errs, field.Invalid(path.Child("template", "metadata", "labels"), tmpl.Labels,
			"`selector` does not match template `labels`"))
	}
	return errs
}

// validateWorkloadTemplate checks a controller's pod template: its labels
// and annotations, its pod spec as a pod's, restartPolicy Always and no
// activeDeadlineSeconds (the controller replaces pods; they never finish).
func validateWorkloadTemplate(tmpl *corev1.PodTemplateSpec, path *field.Path, kind string) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, metav1validation.ValidateLabels(tmpl.Labels, path.Child("metadata", "labels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(tmpl.Annotations, path.Child("metadata", "annotations"))...)
	spec := path.Child("spec")
	errs = append(errs, validatePodSpec(&tmpl.Spec, spec)...)
	if tmpl.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(spec.Child("restartPolicy"), tmpl.Spec.RestartPolicy, []string{string(corev1.RestartPolicyAlways)}))
	}
	if tmpl.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(spec.Child("activeDeadlineSeconds"), "activeDeadlineSeconds in "+kind+" is not Supported"))
	}
	return errs
}

// validateIntOrPercent is ValidatePositiveIntOrPercent and
// IsNotMoreThan100Percent: a non-negative integer, or a percentage of at
// most 100%.
func validateIntOrPercent(v intstr.IntOrString, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch v.Type {
	case intstr.String:
		for _, msg := range validation.IsValidPercent(v.StrVal) {
			errs = append(errs, field.Invalid(path, v, msg))
		}
		if n, ok := intOrPercentValue(v); ok && n > 100 {
			errs = append(errs, field.Invalid(path, v, "must not be greater than 100%"))
		}
	case intstr.Int:
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(v.IntValue()), path)...)
	default:
		errs = append(errs, field.Invalid(path, v, "must be an integer or percentage (e.g '5%')"))
	}
	return errs
}

// intOrPercentValue returns the number of v: the integer, or the percentage
// without its sign (ok false for a malformed percentage).
func intOrPercentValue(v intstr.IntOrString) (n int, ok bool) {
	if v.Type != intstr.String {
		return v.IntValue(), true
	}
	if len(validation.IsValidPercent(v.StrVal)) != 0 {
		return 0, false
	}
	_, err := fmt.Sscanf(v.StrVal, "%d%%", &n)
	return n, err == nil
}
