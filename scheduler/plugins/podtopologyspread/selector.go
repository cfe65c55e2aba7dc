package podtopologyspread

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// workloadKind is a controller kind whose pods get default constraints.
type workloadKind int

const (
	notWorkload workloadKind = iota
	kindReplicaSet
	kindStatefulSet
	kindReplicationController
)

// controllerKind classifies the pod's controller reference and returns it.
// Like kube-scheduler, it knows apps/v1 ReplicaSets and StatefulSets and
// v1 ReplicationControllers only: a reference at another version (say
// apps/v1beta2) is no workload.
func controllerKind(pod *corev1.Pod) (workloadKind, *metav1.OwnerReference) {
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil {
		return notWorkload, nil
	}
	switch {
	case ref.APIVersion == "apps/v1" && ref.Kind == "ReplicaSet":
		return kindReplicaSet, ref
	case ref.APIVersion == "apps/v1" && ref.Kind == "StatefulSet":
		return kindStatefulSet, ref
	case ref.APIVersion == "v1" && ref.Kind == "ReplicationController":
		return kindReplicationController, ref
	}
	return notWorkload, nil
}

// OwnerSelector is the default workload selector when no listers are at
// hand (Args.DefaultSelector nil): a pod controlled by a ReplicaSet,
// StatefulSet or ReplicationController is grouped with the pods carrying
// all of its labels, which a workload's pods share through its template.
// It cannot see Services: the scheduler passes Workloads.Selector instead.
func OwnerSelector(pod *corev1.Pod) labels.Selector {
	if kind, _ := controllerKind(pod); kind == notWorkload || len(pod.Labels) == 0 {
		return nil
	}
	return labels.SelectorFromSet(labels.Set(pod.Labels))
}

// Workloads finds the Services and controllers a pod belongs to through
// informer listers. A nil lister means the API does not serve that kind.
// Safe for concurrent use, as the listers are.
type Workloads struct {
	Services               corelisters.ServiceLister
	ReplicationControllers corelisters.ReplicationControllerLister
	ReplicaSets            appslisters.ReplicaSetLister
	StatefulSets           appslisters.StatefulSetLister

	_ struct{}
}

// Selector is the selector default constraints count pods with (an
// Args.DefaultSelector, TS-9): the selectors of every Service in the pod's
// namespace that selects the pod, ANDed with the selector of the
// ReplicaSet, StatefulSet or ReplicationController controlling it. It is
// nil when the pod belongs to none of them. A controller whose kind the API
// does not serve is stood in for by the pod's own labels, as OwnerSelector
// does; one the lister does not (or no longer) know adds nothing. As in
// kube-scheduler, the controller is looked up by name: its UID is not
// compared with the reference's.
func (w Workloads) Selector(pod *corev1.Pod) labels.Selector {
	set := labels.Set{}
	belongs := false
	if w.Services != nil {
		services, err := w.Services.Services(pod.Namespace).List(labels.Everything())
		if err == nil {
			for _, svc := range services {
				// A Service without a selector selects no pods: its
				// endpoints are managed by hand.
				if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels)) {
					continue
				}
				// Every selector matches the pod, so their labels agree.
				set = labels.Merge(set, svc.Spec.Selector)
				belongs = true
			}
		}
	}
	sel := labels.SelectorFromSet(set)
	kind, ref := controllerKind(pod)
	var owner *metav1.LabelSelector
	switch kind {
	case kindReplicaSet:
		if w.ReplicaSets == nil {
			return withPodLabels(sel, pod)
		}
		if rs, err := w.ReplicaSets.ReplicaSets(pod.Namespace).Get(ref.Name); err == nil {
			owner = rs.Spec.Selector
		}
	case kindStatefulSet:
		if w.StatefulSets == nil {
			return withPodLabels(sel, pod)
		}
		if ss, err := w.StatefulSets.StatefulSets(pod.Namespace).Get(ref.Name); err == nil {
			owner = ss.Spec.Selector
		}
	case kindReplicationController:
		if w.ReplicationControllers == nil {
			return withPodLabels(sel, pod)
		}
		if rc, err := w.ReplicationControllers.ReplicationControllers(pod.Namespace).Get(ref.Name); err == nil && len(rc.Spec.Selector) > 0 {
			owner = &metav1.LabelSelector{MatchLabels: rc.Spec.Selector}
		}
	}
	if owner != nil {
		if os, err := metav1.LabelSelectorAsSelector(owner); err == nil && !os.Empty() {
			if reqs, selectable := os.Requirements(); selectable {
				sel = and(sel, reqs)
				belongs = true
			}
		}
	}
	if !belongs {
		return nil
	}
	return sel
}

// withPodLabels adds the pod's labels to sel: the stand-in for a controller
// the API does not serve.
func withPodLabels(sel labels.Selector, pod *corev1.Pod) labels.Selector {
	if len(pod.Labels) == 0 {
		if sel.Empty() {
			return nil
		}
		return sel
	}
	reqs, _ := labels.SelectorFromSet(labels.Set(pod.Labels)).Requirements()
	return and(sel, reqs)
}

// and adds to sel the requirements it does not have yet, so a Service and
// a controller selecting by the same label make one requirement of it.
func and(sel labels.Selector, reqs labels.Requirements) labels.Selector {
	have := map[string]bool{}
	if cur, ok := sel.Requirements(); ok {
		for _, r := range cur {
			have[r.String()] = true
		}
	}
	for _, r := range reqs {
		if !have[r.String()] {
			have[r.String()] = true
			sel = sel.Add(r)
		}
	}
	return sel
}
