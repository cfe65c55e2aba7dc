package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/podsafe/podsafe/raftstore"
)

// Pod defaults, as kube-apiserver applies them.
const (
	defaultGracePeriodSeconds = int64(corev1.DefaultTerminationGracePeriodSeconds)
	defaultSchedulerName      = corev1.DefaultSchedulerName
	defaultTerminationMsgPath = corev1.TerminationMessagePathDefault
)

// Priority limits (PR-1): user classes may not exceed HighestUserPriority;
// names starting with "system-" are reserved for system classes.
const (
	HighestUserPriority   = int32(1_000_000_000)
	highestSystemPriority = int32(2_000_001_000)
	systemPriorityPrefix  = "system-"
)

// clearSystemMeta removes what only the store and the server set: a client
// cannot choose a uid, resourceVersion, creation time or deletion state.
func clearSystemMeta(m metav1.Object) {
	m.SetUID("")
	m.SetResourceVersion("")
	m.SetCreationTimestamp(metav1.Time{})
	m.SetDeletionTimestamp(nil)
	m.SetDeletionGracePeriodSeconds(nil)
	m.SetGeneration(0)
	m.SetManagedFields(nil)
	m.SetSelfLink("")
}

// applyDefaults fills in the defaults of a decoded object, on every write
// path, so a client that builds an object from scratch and one that edits the
// stored one write the same thing.
func applyDefaults(obj runtime.Object) {
	if pod, ok := obj.(*corev1.Pod); ok {
		defaultPod(pod)
	}
}

// defaultPod applies the pod defaults that matter to the components:
// restart policy, grace period, scheduler name, container termination
// message and probe defaults, and limits as requests.
func defaultPod(pod *corev1.Pod) {
	spec := &pod.Spec
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	if spec.TerminationGracePeriodSeconds == nil {
		g := defaultGracePeriodSeconds
		spec.TerminationGracePeriodSeconds = &g
	} else if *spec.TerminationGracePeriodSeconds < 0 {
		// As kube-apiserver does since 1.27: a negative grace means "as short
		// as possible", which is 1 s.
		g := int64(1)
		spec.TerminationGracePeriodSeconds = &g
	}
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = corev1.DNSClusterFirst
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = defaultSchedulerName
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	if spec.EnableServiceLinks == nil {
		t := corev1.DefaultEnableServiceLinks
		spec.EnableServiceLinks = &t
	}
	for i := range spec.InitContainers {
		defaultContainer(&spec.InitContainers[i])
	}
	for i := range spec.Containers {
		defaultContainer(&spec.Containers[i])
	}
}

// defaultContainer applies the container defaults.
func defaultContainer(c *corev1.Container) {
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = defaultTerminationMsgPath
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = corev1.PullIfNotPresent
		if tag := imageTag(c.Image); tag == "" || tag == "latest" {
			c.ImagePullPolicy = corev1.PullAlways
		}
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = corev1.ProtocolTCP
		}
	}
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		defaultProbe(p)
	}
	// Limits without requests request the limit.
	for name, limit := range c.Resources.Limits {
		if _, ok := c.Resources.Requests[name]; !ok {
			if c.Resources.Requests == nil {
				c.Resources.Requests = corev1.ResourceList{}
			}
			c.Resources.Requests[name] = limit.DeepCopy()
		}
	}
}

// imageTag returns the tag of an image reference ("" when untagged).
func imageTag(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		return "digest"
	}
	slash := strings.LastIndex(image, "/")
	if colon := strings.LastIndex(image, ":"); colon > slash {
		return image[colon+1:]
	}
	return ""
}

// defaultProbe applies the probe defaults (LC-9).
func defaultProbe(p *corev1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	if p.HTTPGet != nil && p.HTTPGet.Scheme == "" {
		p.HTTPGet.Scheme = corev1.URISchemeHTTP
	}
}

// podQOS computes a pod's QoS class from its (defaulted) requests and limits.
func podQOS(pod *corev1.Pod) corev1.PodQOSClass {
	any, guaranteed := false, true
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				req, hasReq := c.Resources.Requests[name]
				lim, hasLim := c.Resources.Limits[name]
				any = any || hasReq && !req.IsZero() || hasLim && !lim.IsZero()
				if !hasLim || !hasReq || req.Cmp(lim) != 0 {
					guaranteed = false
				}
			}
		}
	}
	switch {
	case !any:
		return corev1.PodQOSBestEffort
	case guaranteed:
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}

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
	errs := apivalidation.ValidateObjectMetaAccessor(m, res.namespaced, nameValidator(res), field.NewPath("metadata"))
	errs = append(errs, validateSpec(obj)...)
	switch o := old.(type) {
	case *corev1.Pod:
		errs = append(errs, validatePodUpdate(o, obj.(*corev1.Pod))...)
	case *schedulingv1.PriorityClass:
		if n := obj.(*schedulingv1.PriorityClass); n.Value != o.Value {
			errs = append(errs, field.Invalid(field.NewPath("value"), n.Value, "field is immutable"))
		}
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
	}
	return nil
}

// validatePriorityClass enforces PR-1's value range.
func validatePriorityClass(pc *schedulingv1.PriorityClass) field.ErrorList {
	limit := HighestUserPriority
	if strings.HasPrefix(pc.Name, systemPriorityPrefix) {
		limit = highestSystemPriority
	}
	if pc.Value > limit {
		return field.ErrorList{field.Forbidden(field.NewPath("value"),
			fmt.Sprintf("maximum allowed value of a user defined priority is %d", limit))}
	}
	return nil
}

// validatePod checks the pod fields the components rely on.
func validatePod(pod *corev1.Pod) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if len(pod.Spec.Containers) == 0 {
		errs = append(errs, field.Required(spec.Child("containers"), "a pod needs at least one container"))
	}
	names := map[string]bool{}
	for _, group := range []struct {
		path *field.Path
		list []corev1.Container
	}{{spec.Child("initContainers"), pod.Spec.InitContainers}, {spec.Child("containers"), pod.Spec.Containers}} {
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
	switch pod.Spec.RestartPolicy {
	case corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever:
	default:
		errs = append(errs, field.NotSupported(spec.Child("restartPolicy"), pod.Spec.RestartPolicy,
			[]string{string(corev1.RestartPolicyAlways), string(corev1.RestartPolicyOnFailure), string(corev1.RestartPolicyNever)}))
	}
	if p := pod.Status.Phase; p != "" {
		switch p {
		case corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed, corev1.PodUnknown:
		default:
			errs = append(errs, field.NotSupported(field.NewPath("status", "phase"), p,
				[]string{"Pending", "Running", "Succeeded", "Failed", "Unknown"}))
		}
	}
	errs = append(errs, validateSpreadConstraints(pod, spec.Child("topologySpreadConstraints"))...)
	return errs
}

// validateSpreadConstraints rejects invalid topology spread constraints (TS-1).
func validateSpreadConstraints(pod *corev1.Pod, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, c := range pod.Spec.TopologySpreadConstraints {
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

// admitPodPriority resolves a new pod's priority from its PriorityClass
// (PR-2): an unknown class is refused, no class means the global default
// class or 0, and a client-chosen integer must agree with the class.
func (s *Server) admitPodPriority(ctx context.Context, pod *corev1.Pod) error {
	class, err := s.podPriorityClass(ctx, pod)
	if err != nil {
		return err
	}
	var priority int32
	policy := corev1.PreemptLowerPriority
	if class != nil {
		priority = class.Value
		pod.Spec.PriorityClassName = class.Name
		if class.PreemptionPolicy != nil {
			policy = *class.PreemptionPolicy
		}
	}
	if pod.Spec.Priority != nil && *pod.Spec.Priority != priority {
		return apierrors.NewForbidden(grPods, pod.Name, fmt.Errorf(
			"the integer value of priority (%d) must not be provided in pod spec; the server computed %d from the PriorityClass name",
			*pod.Spec.Priority, priority))
	}
	pod.Spec.Priority = &priority
	if class != nil && class.PreemptionPolicy != nil || pod.Spec.PreemptionPolicy == nil {
		pod.Spec.PreemptionPolicy = &policy
	}
	return nil
}

// podPriorityClass returns the class a new pod gets: the one it names, or
// the global default (nil when there is none). It reads the server's class
// cache (see priorityClassCache for what that guarantees) and the store when
// the cache cannot answer.
func (s *Server) podPriorityClass(ctx context.Context, pod *corev1.Pod) (*schedulingv1.PriorityClass, error) {
	s.classes.ensureStarted(s.ctx)
	name := pod.Spec.PriorityClassName
	if name == "" {
		if class, synced := s.classes.globalDefault(); synced {
			return class, nil
		}
		objs, _, err := s.store.List(ctx, pcResource, "")
		if err != nil {
			return nil, storeError(err, grPriorityClasses, "")
		}
		var class *schedulingv1.PriorityClass
		for _, o := range objs {
			pc := &schedulingv1.PriorityClass{}
			if err := json.Unmarshal(o.Data, pc); err != nil {
				return nil, apierrors.NewInternalError(err)
			}
			if pc.GlobalDefault && (class == nil || pc.Value < class.Value) {
				class = pc
			}
		}
		return class, nil
	}
	if class, _ := s.classes.get(name); class != nil {
		return class, nil
	}
	stored, err := s.store.Get(ctx, raftstore.Key{Resource: pcResource, Name: name})
	if errors.Is(err, raftstore.ErrNotFound) {
		return nil, apierrors.NewForbidden(grPods, pod.Name, fmt.Errorf("no PriorityClass with name %s was found", name))
	}
	if err != nil {
		return nil, storeError(err, grPriorityClasses, name)
	}
	class := &schedulingv1.PriorityClass{}
	if err := json.Unmarshal(stored.Data, class); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return class, nil
}

// admitPriorityClass refuses a second global default class (PR-1).
func (s *Server) admitPriorityClass(ctx context.Context, pc *schedulingv1.PriorityClass) error {
	if !pc.GlobalDefault {
		return nil
	}
	objs, _, err := s.store.List(ctx, pcResource, "")
	if err != nil {
		return storeError(err, grPriorityClasses, "")
	}
	for _, o := range objs {
		other := &schedulingv1.PriorityClass{}
		if err := json.Unmarshal(o.Data, other); err != nil {
			return apierrors.NewInternalError(err)
		}
		if other.GlobalDefault && other.Name != pc.Name {
			return apierrors.NewInvalid(schedulingv1.SchemeGroupVersion.WithKind("PriorityClass").GroupKind(), pc.Name,
				field.ErrorList{field.Forbidden(field.NewPath("globalDefault"),
					fmt.Sprintf("PriorityClass %s is already the global default; at most one can be", other.Name))})
		}
	}
	return nil
}

var grPriorityClasses = schedulingv1.SchemeGroupVersion.WithResource("priorityclasses").GroupResource()

// specOf returns obj's Spec field, or an invalid Value when its kind has
// none. Reflection, not encoding: it runs on every create and update.
func specOf(obj runtime.Object) reflect.Value {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return reflect.Value{}
	}
	return v.Elem().FieldByName("Spec")
}

// hasSpec reports whether obj has a spec whose changes metadata.generation
// counts (every served kind with a spec; pods too, as kube-apiserver does).
func hasSpec(obj runtime.Object) bool { return specOf(obj).IsValid() }

// bumpGeneration increments out's metadata.generation when its spec differs
// from cur's, as kube-apiserver does, so controllers can report
// status.observedGeneration.
func bumpGeneration(cur, out runtime.Object) {
	a, b := specOf(cur), specOf(out)
	if !a.IsValid() || !b.IsValid() || apiequality.Semantic.DeepEqual(a.Interface(), b.Interface()) {
		return
	}
	cm, err1 := metaOf(cur)
	om, err2 := metaOf(out)
	if err1 != nil || err2 != nil {
		return
	}
	om.SetGeneration(cm.GetGeneration() + 1)
}
