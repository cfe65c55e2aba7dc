package clientconf

import (
	"context"
	"fmt"
	"slices"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
)

// watched is one kind an informer factory watches: its informer, what its
// handler was told, and how to LIST it from the server.
type watched struct {
	kind     string
	informer toolscache.SharedIndexInformer
	notes    *notes
	list     func(context.Context) (view, error)
}

// holders records the manager Lease's holder as the lease informer's
// notifications tell it, in resourceVersion order.
type holders struct {
	mu      sync.Mutex
	changes []string // "holder@rv"
	last    string
}

func (h *holders) observe(cur metav1.Object) {
	l, ok := cur.(*coordinationv1.Lease)
	if !ok || l.Namespace != testNamespace || l.Name != leaseName || l.Spec.HolderIdentity == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if *l.Spec.HolderIdentity != h.last {
		h.last = *l.Spec.HolderIdentity
		h.changes = append(h.changes, h.last+"@"+l.ResourceVersion)
	}
}

func (h *holders) get() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.changes...)
}

// watchAll builds a shared informer factory on cs with informers for pods,
// nodes, StatefulSets, ReplicaSets, Leases and Events in every namespace
// (or only the kinds named), each with a recording handler, and the server
// LIST (through check) each is held to. Start the factory to run them.
func watchAll(cs, check kubernetes.Interface, h *holders, only ...string) (informers.SharedInformerFactory, []*watched, error) {
	f := informers.NewSharedInformerFactory(cs, 0)
	ws := []*watched{
		{kind: "pods", informer: f.Core().V1().Pods().Informer(), list: func(ctx context.Context) (view, error) {
			l, err := check.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			return viewOf(l.Items)
		}},
		{kind: "nodes", informer: f.Core().V1().Nodes().Informer(), list: func(ctx context.Context) (view, error) {
			l, err := check.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			return viewOf(l.Items)
		}},
		{kind: "statefulsets", informer: f.Apps().V1().StatefulSets().Informer(), list: func(ctx context.Context) (view, error) {
			l, err := check.AppsV1().StatefulSets("").List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			return viewOf(l.Items)
		}},
		{kind: "replicasets", informer: f.Apps().V1().ReplicaSets().Informer(), list: func(ctx context.Context) (view, error) {
			l, err := check.AppsV1().ReplicaSets("").List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			return viewOf(l.Items)
		}},
		{kind: "leases", informer: f.Coordination().V1().Leases().Informer(), list: func(ctx context.Context) (view, error) {
			l, err := check.CoordinationV1().Leases("").List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			return viewOf(l.Items)
		}},
		{kind: "events", informer: f.Core().V1().Events().Informer(), list: func(ctx context.Context) (view, error) {
			l, err := check.CoreV1().Events("").List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			return viewOf(l.Items)
		}},
	}
	if len(only) > 0 {
		ws = slices.DeleteFunc(ws, func(w *watched) bool { return !slices.Contains(only, w.kind) })
	}
	for _, w := range ws {
		w.notes = newNotes(w.kind)
		if w.kind == "leases" {
			w.notes.onChange = h.observe
		}
		if _, err := w.informer.AddEventHandler(w.notes); err != nil {
			return nil, nil, fmt.Errorf("adding the %s handler: %w", w.kind, err)
		}
	}
	return f, ws, nil
}
