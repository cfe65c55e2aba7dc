package controller

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// DefaultNamespaceRecheck is how long the namespace controller waits before
// it looks again at a terminating namespace whose content is still going
// (pods in their grace period, objects held by finalizers).
const DefaultNamespaceRecheck = 2 * time.Second

// NamespaceConfig configures a Namespace controller. Zero values mean
// defaults.
type NamespaceConfig struct {
	// Client talks to the API as the namespace controller identity.
	// Required.
	Client kubernetes.Interface
	// Dynamic is the same identity's dynamic client, which lists and
	// deletes every namespaced resource the server serves. Required.
	Dynamic dynamic.Interface
	// Clock paces the rechecks and stamps the conditions (nil: the real
	// clock).
	Clock clock.WithTicker
	// Logger receives the controller's log (nil: discard).
	Logger *slog.Logger
	// Recheck is how long a namespace with content left waits before the
	// next pass (default DefaultNamespaceRecheck).
	Recheck time.Duration

	_ struct{}
}

func (c *NamespaceConfig) setDefaults() {
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Recheck == 0 {
		c.Recheck = DefaultNamespaceRecheck
	}
}

// Validate reports the first unusable field, after defaults are applied.
func (c NamespaceConfig) Validate() error {
	c.setDefaults()
	switch {
	case c.Client == nil:
		return fmt.Errorf("%w: namespace controller: Client is nil; pass a clientset for the namespace controller identity", ErrInvalidConfig)
	case c.Dynamic == nil:
		return fmt.Errorf("%w: namespace controller: Dynamic is nil; pass a dynamic client for the namespace controller identity", ErrInvalidConfig)
	case c.Recheck < 0:
		return fmt.Errorf("%w: namespace controller: Recheck must not be negative", ErrInvalidConfig)
	}
	return nil
}

// Namespace is kube-controller-manager's namespace controller: the content
// of a terminating namespace (every namespaced resource the server serves
// with list and delete) is deleted through the API, gracefully — pods go
// through their kubelets' graceful termination, never a force deletion
// (PS-9) — and once none is left the "kubernetes" finalizer is removed
// through namespaces/{name}/finalize, after which the server removes the
// namespace. The deletion conditions on the namespace say what is left.
type Namespace struct {
	cfg        NamespaceConfig
	log        *slog.Logger
	factory    informers.SharedInformerFactory
	namespaces corelisters.NamespaceLister
	synced     cache.InformerSynced
	queue      *keyQueue
}

// NewNamespace builds the controller; Run starts it.
func NewNamespace(cfg NamespaceConfig) (*Namespace, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	f := informers.NewSharedInformerFactory(cfg.Client, 0)
	inf := f.Core().V1().Namespaces()
	nc := &Namespace{cfg: cfg, log: cfg.Logger, factory: f, namespaces: inf.Lister(), synced: inf.Informer().HasSynced}
	nc.queue = newKeyQueue("namespace", cfg.Clock, cfg.Logger, nc.sync)
	if err := addHandler(inf.Informer(), nc.queue.handlerFuncs()); err != nil {
		return nil, err
	}
	return nc, nil
}

// Run deletes the content of terminating namespaces until ctx ends.
func (nc *Namespace) Run(ctx context.Context) error {
	nc.factory.Start(ctx.Done())
	defer nc.factory.Shutdown()
	if err := waitForSync(ctx, "namespace controller", nc.synced); err != nil {
		return err
	}
	nc.log.Info("namespace controller started")
	nc.queue.run(ctx, 2)
	return nil
}

// sync makes one pass over namespace name: nothing unless it is
// terminating and still carries the "kubernetes" finalizer.
func (nc *Namespace) sync(ctx context.Context, name string) error {
	ns, err := nc.namespaces.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if ns.DeletionTimestamp == nil || !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
		return nil
	}
	report := nc.deleteContent(ctx, name)
	ns = ns.DeepCopy()
	if updateNamespaceConditions(&ns.Status, report.conditions(), metav1.NewTime(nc.cfg.Clock.Now())) {
		updated, err := nc.cfg.Client.CoreV1().Namespaces().UpdateStatus(ctx, ns, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("updating conditions of namespace %s: %w", name, err)
		}
		ns = updated
	}
	if !report.done() {
		nc.log.Debug("namespace content remains", "namespace", name, "remaining", fmt.Sprint(report.remaining))
		nc.queue.addAfter(name, nc.cfg.Recheck)
		return nil
	}
	ns.Spec.Finalizers = slices.DeleteFunc(ns.Spec.Finalizers, func(f corev1.FinalizerName) bool { return f == corev1.FinalizerKubernetes })
	if _, err := nc.cfg.Client.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("finalizing namespace %s: %w", name, err)
	}
	nc.log.Info("namespace finalized", "namespace", name)
	return nil
}

// deleteContent deletes, once, every object in namespace ns that is not
// being deleted already, and reports what is left.
func (nc *Namespace) deleteContent(ctx context.Context, ns string) nsDeletionReport {
	report := nsDeletionReport{remaining: map[schema.GroupVersionResource]int{}, finalizers: map[string]int{}}
	resources, err := namespacedResources(nc.cfg.Client.Discovery())
	if err != nil {
		report.discoveryErr = err
	}
	background := metav1.DeletePropagationBackground
	for _, gvr := range resources {
		client := nc.cfg.Dynamic.Resource(gvr).Namespace(ns)
		list, err := client.List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
			continue
		}
		if err != nil {
			report.deleteErrs = append(report.deleteErrs, fmt.Errorf("listing %s: %w", gvr.GroupResource(), err))
			continue
		}
		for _, item := range list.Items {
			if item.GetDeletionTimestamp() == nil {
				uid := item.GetUID()
				err := client.Delete(ctx, item.GetName(), metav1.DeleteOptions{
					PropagationPolicy: &background, Preconditions: &metav1.Preconditions{UID: &uid}})
				switch {
				case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
				case err != nil:
					report.deleteErrs = append(report.deleteErrs, fmt.Errorf("deleting %s %s: %w", gvr.GroupResource(), item.GetName(), err))
				}
			}
		}
		// What the deletions left: pods in their grace period, objects
		// held by finalizers.
		left, err := client.List(ctx, metav1.ListOptions{})
		if err != nil {
			report.deleteErrs = append(report.deleteErrs, fmt.Errorf("listing %s: %w", gvr.GroupResource(), err))
			continue
		}
		if n := len(left.Items); n > 0 {
			report.remaining[gvr] = n
		}
		for _, item := range left.Items {
			for _, f := range item.GetFinalizers() {
				report.finalizers[f]++
			}
		}
	}
	return report
}

// namespacedResources lists the namespaced resources the server serves
// with list and delete, at their preferred versions. On a partial
// discovery failure it returns what it found with the error.
func namespacedResources(d discovery.DiscoveryInterface) ([]schema.GroupVersionResource, error) {
	lists, err := d.ServerPreferredNamespacedResources()
	lists = discovery.FilteredBy(discovery.SupportsAllVerbs{Verbs: []string{"list", "delete"}}, lists)
	gvrs, perr := discovery.GroupVersionResources(lists)
	if err == nil {
		err = perr
	}
	out := make([]schema.GroupVersionResource, 0, len(gvrs))
	for gvr := range gvrs {
		out = append(out, gvr)
	}
	slices.SortFunc(out, func(a, b schema.GroupVersionResource) int {
		if c := strings.Compare(a.Group, b.Group); c != 0 {
			return c
		}
		return strings.Compare(a.Resource, b.Resource)
	})
	return out, err
}
