package apiserver

// Validation of created and updated objects, as kube-apiserver validates
// them: names, pod specs, topology spread constraints, what a pod update may
// change, priority classes. The apps kinds are in validation_apps.go,
// disruption budgets in validation_policy.go, Services in
// validation_service.go.

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// prepareCreate readies a decoded object for creation: system metadata
// cleared, defaults applied, status reset where the owner reports it.
func prepareCreate(res *resourceInfo, obj runtime.Object) {
	if m, err := metaOf(obj); err == nil {
		clearSystemMeta(m)
	}
	applyDefaults(obj)
	if res.resetStatusOnCreate {
		setStatus(obj, nil)
	}
	if m, err := metaOf(obj); err == nil && hasSpec(obj) {
		m.SetGeneration(1)
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		o.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: podQOS(o)}
	case *corev1.Namespace:
		o.Status.Phase = corev1.NamespaceActive
	}
}

// nameValidator returns the metadata.name rule of a resource. A
// generateName is judged by the names made from it: kube-apiserver's check
// masks only a trailing "-", which refuses prefixes such as "pod." whose
// generated names ("pod.x7k2q") are perfectly valid.
func nameValidator(res *resourceInfo) apivalidation.ValidateNameFunc {
	valid := apivalidation.NameIsDNSSubdomain
	if res.resource == "namespaces" {
		valid = apivalidation.NameIsDNSLabel
	}
	return func(name string, prefix bool) []string {
		if prefix {
			return valid(generatedName(name, generatedNameSample), false)
		}
		return valid(name, false)
	}
}

// validateCreate checks a prepared object before it is created (422).
func validateCreate(res *resourceInfo, obj runtime.Object) error {
	m, err := metaOf(obj)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	errs := apivalidation.ValidateObjectMetaAccessor(m, res.namespaced, nameValidator(res), field.NewPath("metadata"))
	errs = append(errs, validateSpec(obj)...)
	if len(errs) > 0 {
		return apierrors.NewInvalid(res.gvk.GroupKind(), m.GetName(), errs)
	}
	return nil
}

// validateUpdate checks an object about to replace old (422).
func validateUpdate(res *resourceInfo, old, obj runtime.Object) error {
	m, err := metaOf(obj)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	if o, ok := old.(*corev1.Service); ok {
		keepAllocated(o, obj.(*corev1.Service))
	}
	errs := apivalidation.ValidateObjectMetaAccessor(m, res.namespaced, nameValidator(res), field.NewPath("metadata"))
	if _, pod := obj.(*corev1.Pod); pod || specChanged(old, obj) {
		// A write that leaves the spec as stored (a status or metadata
		// write) is not judged by rules the stored spec may predate:
		// kube-apiserver validates only the status on /status.
		errs = append(errs, validateSpec(obj)...)
	}
	switch o := old.(type) {
	case *corev1.Pod:
		errs = append(errs, validatePodUpdate(o, obj.(*corev1.Pod))...)
	case *schedulingv1.PriorityClass:
		errs = append(errs, validatePriorityClassUpdate(o, obj.(*schedulingv1.PriorityClass))...)
	case *appsv1.StatefulSet:
		errs = append(errs, validateStatefulSetUpdate(o, obj.(*appsv1.StatefulSet))...)
	case *appsv1.Deployment:
		errs = append(errs, validateDeploymentUpdate(o, obj.(*appsv1.Deployment))...)
	case *appsv1.ReplicaSet:
		errs = append(errs, apivalidation.ValidateImmutableField(obj.(*appsv1.ReplicaSet).Spec.Selector, o.Spec.Selector,
			field.NewPath("spec", "selector"))...)
	case *corev1.Service:
		errs = append(errs, validateServiceUpdate(o, obj.(*corev1.Service))...)
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(res.gvk.GroupKind(), m.GetName(), errs)
	}
	return nil
}

// validateSpec validates the type-specific parts of an object.
func validateSpec(obj runtime.Object) field.ErrorList {
	switch o := obj.(type) {
	case *corev1.Pod:
		return validatePod(o)
	case *schedulingv1.PriorityClass:
		return validatePriorityClass(o)
	case *appsv1.StatefulSet:
		return validateStatefulSet(o)
	case *appsv1.ReplicaSet:
		return validateReplicaSet(o)
	case *appsv1.Deployment:
		return validateDeployment(o)
	case *policyv1.PodDisruptionBudget:
		return validatePDB(o)
	case *corev1.Service:
		return validateService(o)
	}
	return nil
}

// specChanged reports whether obj's spec differs from old's (kinds without
// a spec: always, so they are always validated).
func specChanged(old, obj runtime.Object) bool {
	a, b := specOf(old), specOf(obj)
	return !a.IsValid() || !b.IsValid() || !apiequality.Semantic.DeepEqual(a.Interface(), b.Interface())
}

// validatePriorityClass enforces PR-1's value range and the preemption
// policies there are.
func validatePriorityClass(pc *schedulingv1.PriorityClass) field.ErrorList {
	var errs field.ErrorList
	limit := HighestUserPriority
	if strings.HasPrefix(pc.Name, systemPriorityPrefix) {
		limit = highestSystemPriority
	}
	if pc.Value > limit {
		errs = append(errs, field.Forbidden(field.NewPath("value"),
			fmt.Sprintf("maximum allowed value of a user defined priority is %d", limit)))
	}
	if p := pc.PreemptionPolicy; p != nil && *p != corev1.PreemptLowerPriority && *p != corev1.PreemptNever {
		errs = append(errs, field.NotSupported(field.NewPath("preemptionPolicy"), *p,
			[]string{string(corev1.PreemptLowerPriority), string(corev1.PreemptNever)}))
	}
	return errs
}

// validatePriorityClassUpdate: a class's value and preemption policy never
// change (PR-2: pods resolved from it keep what they got), with
// kube-apiserver's messages.
func validatePriorityClassUpdate(old, pc *schedulingv1.PriorityClass) field.ErrorList {
	var errs field.ErrorList
	if pc.Value != old.Value {
		errs = append(errs, field.Forbidden(field.NewPath("value"), "may not be changed in an update."))
	}
	return append(errs, apivalidation.ValidateImmutableField(pc.PreemptionPolicy, old.PreemptionPolicy, field.NewPath("preemptionPolicy"))...)
}

// validatePod checks the pod fields the components rely on.
func validatePod(pod *corev1.Pod) field.ErrorList {
	errs := validatePodSpec(&pod.Spec, field.NewPath("spec"))
	if p := pod.Status.Phase; p != "" {
		switch p {
		case corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed, corev1.PodUnknown:
		default:
			errs = append(errs, field.NotSupported(field.NewPath("status", "phase"), p,
				[]string{"Pending", "Running", "Succeeded", "Failed", "Unknown"}))
		}
	}
	return errs
}

// validatePodSpec checks a pod spec at path, a pod's or a template's.
func validatePodSpec(podSpec *corev1.PodSpec, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(podSpec.Containers) == 0 {
		errs = append(errs, field.Required(spec.Child("containers"), "a pod needs at least one container"))
	}
	names := map[string]bool{}
	for _, group := range []struct {
		path *field.Path
		list []corev1.Container
	}{{spec.Child("initContainers"), podSpec.InitContainers}, {spec.Child("containers"), podSpec.Containers}} {
		for i, c := range group.list {
			p := group.path.Index(i)
			switch msgs := apivalidation.NameIsDNSLabel(c.Name, false); {
			case c.Name == "":
				errs = append(errs, field.Required(p.Child("name"), ""))
			case len(msgs) > 0:
				errs = append(errs, field.Invalid(p.Child("name"), c.Name, strings.Join(msgs, "; ")))
			case names[c.Name]:
				errs = append(errs, field.Duplicate(p.Child("name"), c.Name))
			}
			names[c.Name] = true
			if c.Image == "" {
				errs = append(errs, field.Required(p.Child("image"), ""))
			}
		}
	}
	switch podSpec.RestartPolicy {
	case corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever:
	default:
		errs = append(errs, field.NotSupported(spec.Child("restartPolicy"), podSpec.RestartPolicy,
			[]string{string(corev1.RestartPolicyAlways), string(corev1.RestartPolicyOnFailure), string(corev1.RestartPolicyNever)}))
	}
	errs = append(errs, validateSpreadConstraints(podSpec, spec.Child("topologySpreadConstraints"))...)
	return errs
}

// validateSpreadConstraints rejects invalid topology spread constraints (TS-1).
func validateSpreadConstraints(podSpec *corev1.PodSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, c := range podSpec.TopologySpreadConstraints {
		p := path.Index(i)
		if c.MaxSkew <= 0 {
			errs = append(errs, field.Invalid(p.Child("maxSkew"), c.MaxSkew, "must be greater than zero"))
		}
		if c.TopologyKey == "" {
			errs = append(errs, field.Required(p.Child("topologyKey"), "can not be empty"))
		}
		switch c.WhenUnsatisfiable {
		case corev1.DoNotSchedule, corev1.ScheduleAnyway:
		default:
			errs = append(errs, field.NotSupported(p.Child("whenUnsatisfiable"), c.WhenUnsatisfiable,
				[]string{string(corev1.DoNotSchedule), string(corev1.ScheduleAnyway)}))
		}
		if c.MinDomains != nil {
			if *c.MinDomains <= 0 {
				errs = append(errs, field.Invalid(p.Child("minDomains"), *c.MinDomains, "must be greater than zero"))
			}
			if c.WhenUnsatisfiable != corev1.DoNotSchedule {
				errs = append(errs, field.Invalid(p.Child("minDomains"), *c.MinDomains,
					"can only use minDomains if whenUnsatisfiable=DoNotSchedule"))
			}
		}
		for _, pol := range []struct {
			name string
			v    *corev1.NodeInclusionPolicy
		}{{"nodeAffinityPolicy", c.NodeAffinityPolicy}, {"nodeTaintsPolicy", c.NodeTaintsPolicy}} {
			if pol.v != nil && *pol.v != corev1.NodeInclusionPolicyHonor && *pol.v != corev1.NodeInclusionPolicyIgnore {
				errs = append(errs, field.NotSupported(p.Child(pol.name), *pol.v, []string{"Honor", "Ignore"}))
			}
		}
		if len(c.MatchLabelKeys) > 0 {
			if c.LabelSelector == nil {
				errs = append(errs, field.Forbidden(p.Child("matchLabelKeys"), "must not be specified when labelSelector is not set"))
			} else {
				inSelector := map[string]bool{}
				for k := range c.LabelSelector.MatchLabels {
					inSelector[k] = true
				}
				for _, e := range c.LabelSelector.MatchExpressions {
					inSelector[e.Key] = true
				}
				for j, k := range c.MatchLabelKeys {
					if inSelector[k] {
						errs = append(errs, field.Invalid(p.Child("matchLabelKeys").Index(j), k,
							"exists in both matchLabelKeys and labelSelector"))
					}
				}
			}
		}
	}
	return errs
}

// validatePodUpdate enforces what may change in a pod: spec.nodeName never
// (binding sets it, once), a terminal phase never, and otherwise only the
// spec fields kube-apiserver lets an update change.
func validatePodUpdate(old, pod *corev1.Pod) field.ErrorList {
	var errs field.ErrorList
	if old.Spec.NodeName != pod.Spec.NodeName {
		errs = append(errs, field.Invalid(field.NewPath("spec", "nodeName"), pod.Spec.NodeName,
			"field is immutable: a pod is bound once, through pods/NAME/binding"))
	} else {
		a, b := old.Spec.DeepCopy(), pod.Spec.DeepCopy()
		for _, s := range []*corev1.PodSpec{a, b} {
			for i := range s.Containers {
				s.Containers[i].Image = ""
			}
			for i := range s.InitContainers {
				s.InitContainers[i].Image = ""
			}
			s.ActiveDeadlineSeconds = nil
			s.Tolerations = nil
			s.SchedulingGates = nil
		}
		if !apiequality.Semantic.DeepEqual(a, b) {
			errs = append(errs, field.Forbidden(field.NewPath("spec"),
				"pod updates may not change fields other than container images, activeDeadlineSeconds, tolerations and schedulingGates"))
		}
	}
	if podTerminal(old) && pod.Status.Phase != old.Status.Phase {
		errs = append(errs, field.Forbidden(field.NewPath("status", "phase"),
			fmt.Sprintf("may not change from terminal phase %s to %s", old.Status.Phase, pod.Status.Phase)))
	}
	return errs
}
