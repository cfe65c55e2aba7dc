package apiserver

// Defaulting, as kube-apiserver applies it on create: system metadata a
// client may not choose, pod and container defaults, probes, QoS class.
// The defaults of the apps kinds are in defaults_apps.go, of Services in
// defaults_service.go.

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Pod defaults, as kube-apiserver applies them.
const (
	defaultGracePeriodSeconds = int64(corev1.DefaultTerminationGracePeriodSeconds)
	defaultSchedulerName      = corev1.DefaultSchedulerName
	defaultTerminationMsgPath = corev1.TerminationMessagePathDefault
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
	switch o := obj.(type) {
	case *corev1.Pod:
		defaultPod(o)
	case *corev1.Service:
		defaultService(o)
	case *appsv1.StatefulSet:
		defaultStatefulSet(o)
	case *appsv1.ReplicaSet:
		defaultReplicaSet(o)
	case *appsv1.Deployment:
		defaultDeployment(o)
	case *schedulingv1.PriorityClass:
		defaultPriorityClass(o)
	}
}

// defaultPod applies the pod defaults that matter to the components:
// restart policy, grace period, scheduler name, container termination
// message and probe defaults, and limits as requests.
func defaultPod(pod *corev1.Pod) {
	spec := &pod.Spec
	if g := spec.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		// As kube-apiserver does since 1.27: a negative grace means "as short
		// as possible", which is 1 s. Pods only: a template keeps what it
		// says, as upstream's SetDefaults_Pod is not applied to templates.
		one := int64(1)
		spec.TerminationGracePeriodSeconds = &one
	}
	defaultPodSpec(spec)
	if spec.EnableServiceLinks == nil {
		t := corev1.DefaultEnableServiceLinks
		spec.EnableServiceLinks = &t
	}
	// Limits without requests request the limit (SetDefaults_Pod: pods
	// only, so a template's containers keep their requests unset).
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range list {
			limitsAsRequests(&list[i])
		}
	}
}

// defaultPodSpec applies upstream's SetDefaults_PodSpec and the container
// defaults: what a pod and a pod template (of a StatefulSet or ReplicaSet)
// both get, so a template reads back as the pods made from it will.
func defaultPodSpec(spec *corev1.PodSpec) {
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	if spec.TerminationGracePeriodSeconds == nil {
		g := defaultGracePeriodSeconds
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
}

// limitsAsRequests makes a container's limits without requests request the
// limit.
func limitsAsRequests(c *corev1.Container) {
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

// defaultPriorityClass is upstream's SetDefaults_PriorityClass: a class
// preempts lower priorities unless it says Never.
func defaultPriorityClass(pc *schedulingv1.PriorityClass) {
	if pc.PreemptionPolicy == nil {
		p := corev1.PreemptLowerPriority
		pc.PreemptionPolicy = &p
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
