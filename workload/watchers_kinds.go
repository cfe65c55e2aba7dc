package workload

import (
	"context"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/podsafe/podsafe/history"
)

// The resources SetWatchers watch, as the store (and its store lines) spell
// them.
const (
	PodResource         = "pods"
	StatefulSetResource = "statefulsets.apps"
	ReplicaSetResource  = "replicasets.apps"
)

// watchKind is how a watcher watches and lists one resource, and reads the
// name, value and resourceVersion it records of an object. The value is
// what the watch checkers compare with the store's committed change at the
// event's resourceVersion (checker/watch_value.go derives it from the store
// line alike): a Lease's spec.holderIdentity; for the other kinds a summary
// of the fields the workloads' guarantees turn on.
type watchKind struct {
	resource string
	watch    func(ctx context.Context, cs kubernetes.Interface, ns string, opts metav1.ListOptions) (watch.Interface, error)
	// list returns the list's resourceVersion and its items, sorted by key.
	list func(ctx context.Context, cs kubernetes.Interface, ns string) (string, []history.Item, error)
	read func(obj runtime.Object) (watchedObject, bool)
}

// watchedObject is what a watch line records of an object.
type watchedObject struct{ name, value, rv string }

// watchKinds are the kinds SetWatchers can watch, by resource.
var watchKinds = map[string]*watchKind{
	LeaseResource:       leaseKind,
	PodResource:         podKind,
	StatefulSetResource: statefulSetKind,
	ReplicaSetResource:  replicaSetKind,
}

var leaseKind = &watchKind{
	resource: LeaseResource,
	watch: func(ctx context.Context, cs kubernetes.Interface, ns string, opts metav1.ListOptions) (watch.Interface, error) {
		return cs.CoordinationV1().Leases(ns).Watch(ctx, opts)
	},
	list: func(ctx context.Context, cs kubernetes.Interface, ns string) (string, []history.Item, error) {
		l, err := cs.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", nil, err
		}
		return l.ResourceVersion, itemsOf(l.Items, func(o *coordinationv1.Lease) (string, string, string) {
			return o.Name, holder(o), o.ResourceVersion
		}), nil
	},
	read: func(obj runtime.Object) (watchedObject, bool) {
		o, ok := obj.(*coordinationv1.Lease)
		if !ok {
			return watchedObject{}, false
		}
		return watchedObject{o.Name, holder(o), o.ResourceVersion}, true
	},
}

var podKind = &watchKind{
	resource: PodResource,
	watch: func(ctx context.Context, cs kubernetes.Interface, ns string, opts metav1.ListOptions) (watch.Interface, error) {
		return cs.CoreV1().Pods(ns).Watch(ctx, opts)
	},
	list: func(ctx context.Context, cs kubernetes.Interface, ns string) (string, []history.Item, error) {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", nil, err
		}
		return l.ResourceVersion, itemsOf(l.Items, func(o *corev1.Pod) (string, string, string) {
			return o.Name, podWatchValue(o), o.ResourceVersion
		}), nil
	},
	read: func(obj runtime.Object) (watchedObject, bool) {
		o, ok := obj.(*corev1.Pod)
		if !ok {
			return watchedObject{}, false
		}
		return watchedObject{o.Name, podWatchValue(o), o.ResourceVersion}, true
	},
}

var statefulSetKind = &watchKind{
	resource: StatefulSetResource,
	watch: func(ctx context.Context, cs kubernetes.Interface, ns string, opts metav1.ListOptions) (watch.Interface, error) {
		return cs.AppsV1().StatefulSets(ns).Watch(ctx, opts)
	},
	list: func(ctx context.Context, cs kubernetes.Interface, ns string) (string, []history.Item, error) {
		l, err := cs.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", nil, err
		}
		return l.ResourceVersion, itemsOf(l.Items, func(o *appsv1.StatefulSet) (string, string, string) {
			return o.Name, setWatchValue(&o.ObjectMeta, o.Spec.Replicas, o.Status.Replicas), o.ResourceVersion
		}), nil
	},
	read: func(obj runtime.Object) (watchedObject, bool) {
		o, ok := obj.(*appsv1.StatefulSet)
		if !ok {
			return watchedObject{}, false
		}
		return watchedObject{o.Name, setWatchValue(&o.ObjectMeta, o.Spec.Replicas, o.Status.Replicas), o.ResourceVersion}, true
	},
}

var replicaSetKind = &watchKind{
	resource: ReplicaSetResource,
	watch: func(ctx context.Context, cs kubernetes.Interface, ns string, opts metav1.ListOptions) (watch.Interface, error) {
		return cs.AppsV1().ReplicaSets(ns).Watch(ctx, opts)
	},
	list: func(ctx context.Context, cs kubernetes.Interface, ns string) (string, []history.Item, error) {
		l, err := cs.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", nil, err
		}
		return l.ResourceVersion, itemsOf(l.Items, func(o *appsv1.ReplicaSet) (string, string, string) {
			return o.Name, setWatchValue(&o.ObjectMeta, o.Spec.Replicas, o.Status.Replicas), o.ResourceVersion
		}), nil
	},
	read: func(obj runtime.Object) (watchedObject, bool) {
		o, ok := obj.(*appsv1.ReplicaSet)
		if !ok {
			return watchedObject{}, false
		}
		return watchedObject{o.Name, setWatchValue(&o.ObjectMeta, o.Spec.Replicas, o.Status.Replicas), o.ResourceVersion}, true
	},
}

// itemsOf is a list's items as a recorded op holds them, sorted by key.
func itemsOf[T any](objs []T, of func(*T) (name, value, rv string)) []history.Item {
	items := make([]history.Item, len(objs))
	for i := range objs {
		name, value, rv := of(&objs[i])
		items[i] = history.Item{Key: name, Value: value, RV: rv}
	}
	sort.Slice(items, func(i, j int) bool { return items[i].Key < items[j].Key })
	return items
}

// podWatchValue is the value a watch line records of a pod: its UID, node,
// phase and whether it is being deleted, what the pod-safety guarantees
// turn on. A watch that delivers a stale or invented pod state at some
// resourceVersion shows as a value no committed change had there.
func podWatchValue(p *corev1.Pod) string {
	v := fmt.Sprintf("uid=%s node=%s phase=%s", p.UID, p.Spec.NodeName, p.Status.Phase)
	if p.DeletionTimestamp != nil {
		v += " deleting"
	}
	return v
}

// setWatchValue is the value a watch line records of a StatefulSet or
// ReplicaSet: its UID, generation, desired and current replicas, and
// whether it is being deleted.
func setWatchValue(m *metav1.ObjectMeta, spec *int32, current int32) string {
	v := fmt.Sprintf("uid=%s generation=%d replicas=%d current=%d", m.UID, m.Generation, ptr.Deref(spec, 1), current)
	if m.DeletionTimestamp != nil {
		v += " deleting"
	}
	return v
}
