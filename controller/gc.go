package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// DefaultGCWorkers is how many objects the garbage collector works on at
// once.
const DefaultGCWorkers = 4

// GarbageCollectorConfig configures a GarbageCollector. Zero values mean
// defaults.
type GarbageCollectorConfig struct {
	// Client talks to the API as the garbage collector identity (discovery).
	// Required.
	Client kubernetes.Interface
	// Dynamic is the same identity's dynamic client: it watches, reads,
	// patches and deletes every resource the server serves. Required.
	Dynamic dynamic.Interface
	// Clock paces retries (nil: the real clock).
	Clock clock.WithTicker
	// Logger receives the controller's log (nil: discard).
	Logger *slog.Logger
	// Workers is how many objects are worked on at once (default
	// DefaultGCWorkers).
	Workers int

	_ struct{}
}

func (c *GarbageCollectorConfig) setDefaults() {
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Workers == 0 {
		c.Workers = DefaultGCWorkers
	}
}

// Validate reports the first unusable field, after defaults are applied.
func (c GarbageCollectorConfig) Validate() error {
	c.setDefaults()
	switch {
	case c.Client == nil:
		return fmt.Errorf("%w: garbage collector: Client is nil; pass a clientset for the garbage collector identity", ErrInvalidConfig)
	case c.Dynamic == nil:
		return fmt.Errorf("%w: garbage collector: Dynamic is nil; pass a dynamic client for the garbage collector identity", ErrInvalidConfig)
	case c.Workers < 0:
		return fmt.Errorf("%w: garbage collector: Workers must not be negative", ErrInvalidConfig)
	}
	return nil
}

// GarbageCollector is kube-controller-manager's garbage collector: it keeps
// an ownership graph of every resource the server serves with list, watch
// and delete (events excepted, as upstream) and acts on ownerReferences as
// the DELETE's propagation policy asked:
//   - background: an object none of whose owners exists any more (by UID)
//     is deleted; references to gone owners are removed from objects that
//     still have one;
//   - foreground (the owner carries foregroundDeletion): its dependents are
//     deleted and the finalizer is removed once no dependent whose
//     reference has blockOwnerDeletion is left, so the owner goes last;
//   - orphan (the owner carries orphan): its references are removed from
//     the dependents, then the finalizer.
//
// Deletions are graceful (no grace period is asked for): pods go through
// their kubelets' termination (PS-9). Owners missing from the graph are
// read from the API before anything is deleted for them.
type GarbageCollector struct {
	cfg   GarbageCollectorConfig
	log   *slog.Logger
	graph *gcGraph
	queue *keyQueue
	// kinds resolves an owner reference's kind; filled by Run.
	kinds map[schema.GroupKind]gcResource
}

// gcResource is one watched resource.
type gcResource struct {
	gvr        schema.GroupVersionResource
	namespaced bool
}

// gcIgnored are the resources upstream's collector does not watch.
var gcIgnored = []schema.GroupResource{{Resource: "events"}, {Group: "events.k8s.io", Resource: "events"}}

// gcDiscoveryRetry bounds the wait between discovery attempts at start.
const gcDiscoveryRetry = time.Second

// NewGarbageCollector builds the collector; Run starts it.
func NewGarbageCollector(cfg GarbageCollectorConfig) (*GarbageCollector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	gc := &GarbageCollector{cfg: cfg, log: cfg.Logger, graph: newGCGraph()}
	gc.queue = newKeyQueue("garbage-collector", cfg.Clock, cfg.Logger, gc.sync)
	return gc, nil
}

// Run discovers the served resources, watches them all and collects until
// ctx ends.
func (gc *GarbageCollector) Run(ctx context.Context) error {
	resources, err := gc.discover(ctx)
	if err != nil {
		return err
	}
	factory := dynamicinformer.NewDynamicSharedInformerFactory(gc.cfg.Dynamic, 0)
	defer factory.Shutdown()
	var synced []cache.InformerSynced
	for _, res := range resources {
		inf := factory.ForResource(res.gvr).Informer()
		if err := addHandler(inf, gc.handlers(res)); err != nil {
			return err
		}
		synced = append(synced, inf.HasSynced)
	}
	factory.Start(ctx.Done())
	if err := waitForSync(ctx, "garbage collector", synced...); err != nil {
		return err
	}
	gc.log.Info("garbage collector started", "resources", len(resources))
	gc.queue.run(ctx, gc.cfg.Workers)
	return nil
}

// discover lists the resources to watch, retrying until discovery answers
// or ctx ends.
func (gc *GarbageCollector) discover(ctx context.Context) ([]gcResource, error) {
	for {
		lists, err := gc.cfg.Client.Discovery().ServerPreferredResources()
		if err == nil || len(lists) > 0 {
			if err != nil {
				gc.log.Warn("partial discovery; collecting what was found", "err", err)
			}
			return gc.resourcesOf(lists), nil
		}
		gc.log.Debug("discovering resources", "err", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("garbage collector: discovering resources: %w", context.Cause(ctx))
		case <-gc.cfg.Clock.After(gcDiscoveryRetry):
		}
	}
}

// resourcesOf picks the watched resources and fills kinds.
func (gc *GarbageCollector) resourcesOf(lists []*metav1.APIResourceList) []gcResource {
	gc.kinds = map[schema.GroupKind]gcResource{}
	var out []gcResource
	for _, l := range discovery.FilteredBy(discovery.SupportsAllVerbs{Verbs: []string{"list", "watch", "delete"}}, lists) {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			res := gcResource{gvr: gv.WithResource(r.Name), namespaced: r.Namespaced}
			gc.kinds[gv.WithKind(r.Kind).GroupKind()] = res
			if !slices.Contains(gcIgnored, res.gvr.GroupResource()) {
				out = append(out, res)
			}
		}
	}
	return out
}

// handlers keep the graph of one resource and queue what a change may
// concern: the object, its owners (a foreground owner waits for it) and,
// once it is deleted or being deleted, its dependents.
func (gc *GarbageCollector) handlers(res gcResource) cache.ResourceEventHandlerFuncs {
	upsert := func(obj any) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		n := gcNodeOf(res, u)
		old := gc.graph.upsert(n)
		if old != nil && sameGCState(old, n) {
			return
		}
		gc.enqueue(n, old, n.deleting)
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    upsert,
		UpdateFunc: func(_, obj any) { upsert(obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			u, ok := obj.(*unstructured.Unstructured)
			if !ok {
				return
			}
			if old := gc.graph.remove(u.GetUID()); old != nil {
				gc.enqueue(old, nil, true)
			}
		},
	}
}

// enqueue queues n (while it exists), its owners old and new, and with
// dependents its dependents.
func (gc *GarbageCollector) enqueue(n, old *gcNode, dependents bool) {
	gc.queue.add(string(n.uid))
	for _, o := range n.owners {
		gc.queue.add(string(o.UID))
	}
	if old != nil {
		for _, o := range old.owners {
			gc.queue.add(string(o.UID))
		}
	}
	if dependents {
		for _, d := range gc.graph.dependentsOf(n.uid) {
			gc.queue.add(string(d.uid))
		}
	}
}

// gcNodeOf is the graph node of an object of res.
func gcNodeOf(res gcResource, u *unstructured.Unstructured) *gcNode {
	return &gcNode{gvr: res.gvr, namespaced: res.namespaced, namespace: u.GetNamespace(), name: u.GetName(), uid: u.GetUID(),
		owners: u.GetOwnerReferences(), deleting: u.GetDeletionTimestamp() != nil, finalizers: u.GetFinalizers()}
}

// sync works on the object of one UID.
func (gc *GarbageCollector) sync(ctx context.Context, key string) error {
	uid := types.UID(key)
	n := gc.graph.get(uid)
	if n == nil {
		return nil
	}
	switch {
	case n.orphaning():
		return gc.orphanDependents(ctx, n)
	case n.waitingForDependents():
		deps := gc.graph.dependentsOf(uid)
		for _, d := range deps {
			gc.queue.add(string(d.uid))
		}
		if len(blocking(uid, deps)) > 0 {
			return nil
		}
		// The graph may not show a blocking dependent yet (see
		// orphanDependents): the API is asked before the owner goes.
		live, err := gc.liveDependents(ctx, n)
		if err != nil {
			return err
		}
		if held := len(blocking(uid, live)); held > 0 {
			return fmt.Errorf("%s waits for %d dependents the collector has not seen yet", objectKey(n), held)
		}
		return gc.removeFinalizer(ctx, n, metav1.FinalizerDeleteDependents)
	case n.deleting:
		return nil
	}
	remove, patch, refs, states, err := gc.decide(ctx, n)
	if err != nil || (!remove && !patch) {
		return err
	}
	// Act only on what the object says now: the graph may lag behind a
	// change of its owners (an orphaning that reached the object before
	// the graph), as upstream's attemptToDeleteItem reads the latest.
	live, err := gc.cfg.Dynamic.Resource(n.gvr).Namespace(n.namespace).Get(ctx, n.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s %s: %w", n.gvr.GroupResource(), objectKey(n), err)
	}
	if live.GetUID() != n.uid || live.GetDeletionTimestamp() != nil {
		return nil
	}
	now := *n
	now.owners = live.GetOwnerReferences()
	if remove, patch, refs, states, err = gc.decide(ctx, &now); err != nil {
		return err
	}
	switch {
	case remove:
		policy := metav1.DeletePropagationBackground
		if slices.Contains(states, ownerWaiting) && len(gc.graph.dependentsOf(uid)) > 0 {
			// Its own dependents go first too, so the owner waiting
			// for it waits for them.
			policy = metav1.DeletePropagationForeground
		}
		return gc.delete(ctx, n, policy)
	case patch:
		return gc.setOwnerRefs(ctx, n, func([]metav1.OwnerReference) []metav1.OwnerReference { return refs })
	}
	return nil
}

// decide judges the dependent n by its owners: remove it, or patch its
// owner references to refs.
func (gc *GarbageCollector) decide(ctx context.Context, n *gcNode) (remove, patch bool, refs []metav1.OwnerReference, states []ownerState, err error) {
	states = make([]ownerState, len(n.owners))
	for i, o := range n.owners {
		s, err := gc.ownerState(ctx, n, o)
		if err != nil {
			return false, false, nil, nil, err
		}
		states[i] = s
	}
	remove, patch, refs = decideDependent(n.owners, states)
	return remove, patch, refs, states, nil
}

// ownerState finds out what became of the owner o of n: from the graph
// when it holds the owner, else by reading it from the API, so an owner
// the informers have not shown yet is never taken for gone.
func (gc *GarbageCollector) ownerState(ctx context.Context, n *gcNode, o metav1.OwnerReference) (ownerState, error) {
	gv, err := schema.ParseGroupVersion(o.APIVersion)
	if err != nil {
		return ownerDangling, nil
	}
	res, ok := gc.kinds[gv.WithKind(o.Kind).GroupKind()]
	if !ok {
		// A kind the server does not serve: never delete on a guess.
		gc.log.Debug("owner of unknown kind", "object", n.namespace+"/"+n.name, "kind", o.Kind, "apiVersion", o.APIVersion)
		return ownerSolid, nil
	}
	if res.namespaced && !n.namespaced {
		// A cluster-scoped object cannot be owned by a namespaced one.
		return ownerDangling, nil
	}
	if owner := gc.graph.get(o.UID); owner != nil {
		if owner.namespaced && owner.namespace != n.namespace {
			return ownerDangling, nil
		}
		if owner.waitingForDependents() {
			return ownerWaiting, nil
		}
		return ownerSolid, nil
	}
	ns := ""
	if res.namespaced {
		ns = n.namespace
	}
	live, err := gc.cfg.Dynamic.Resource(res.gvr).Namespace(ns).Get(ctx, o.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return ownerDangling, nil
	case err != nil:
		return ownerSolid, fmt.Errorf("reading owner %s %s of %s: %w", o.Kind, o.Name, n.name, err)
	case live.GetUID() != o.UID:
		return ownerDangling, nil
	case live.GetDeletionTimestamp() != nil && slices.Contains(live.GetFinalizers(), metav1.FinalizerDeleteDependents):
		return ownerWaiting, nil
	}
	return ownerSolid, nil
}

// delete deletes n (UID precondition, never a grace period of its own).
func (gc *GarbageCollector) delete(ctx context.Context, n *gcNode, policy metav1.DeletionPropagation) error {
	uid := n.uid
	err := gc.cfg.Dynamic.Resource(n.gvr).Namespace(n.namespace).Delete(ctx, n.name,
		metav1.DeleteOptions{PropagationPolicy: &policy, Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("deleting %s %s: %w", n.gvr.GroupResource(), objectKey(n), err)
	}
	gc.log.Info("dependent deleted", "resource", n.gvr.GroupResource().String(), "object", objectKey(n), "propagation", string(policy))
	return nil
}

// orphanDependents removes the references to n from its dependents, then
// n's orphan finalizer.
//
// The graph may not show a dependent made just before the owner's deletion
// (its informer lags another's), and once the finalizer is gone such a
// dependent's owner is absent and it would be collected. So the dependents
// are also looked for in the API, by a list of every watched resource in
// the owner's namespace (every namespace for a cluster-scoped owner):
// orphaning is rare, and a dependent that should outlive its owner must.
func (gc *GarbageCollector) orphanDependents(ctx context.Context, n *gcNode) error {
	unref := func(refs []metav1.OwnerReference) []metav1.OwnerReference {
		return slices.DeleteFunc(refs, func(o metav1.OwnerReference) bool { return o.UID == n.uid })
	}
	for _, d := range gc.graph.dependentsOf(n.uid) {
		if err := gc.setOwnerRefs(ctx, d, unref); err != nil {
			return err
		}
	}
	live, err := gc.liveDependents(ctx, n)
	if err != nil {
		return err
	}
	for _, d := range live {
		if err := gc.setOwnerRefs(ctx, d, unref); err != nil {
			return err
		}
	}
	return gc.removeFinalizer(ctx, n, metav1.FinalizerOrphanDependents)
}

// liveDependents lists, from the API, the objects whose owner references
// name n: every watched resource in n's namespace (every namespace for a
// cluster-scoped n). It is for the rare moments an owner is about to go,
// when a dependent the graph has not shown yet must not be missed.
func (gc *GarbageCollector) liveDependents(ctx context.Context, n *gcNode) ([]*gcNode, error) {
	var out []*gcNode
	for _, res := range gc.kinds {
		if n.namespaced && !res.namespaced {
			continue // a cluster-scoped object has no namespaced owner
		}
		list, err := gc.cfg.Dynamic.Resource(res.gvr).Namespace(n.namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing %s for dependents of %s: %w", res.gvr.GroupResource(), objectKey(n), err)
		}
		for i := range list.Items {
			u := &list.Items[i]
			refs := u.GetOwnerReferences()
			if !slices.ContainsFunc(refs, func(o metav1.OwnerReference) bool { return o.UID == n.uid }) {
				continue
			}
			out = append(out, &gcNode{gvr: res.gvr, namespaced: res.namespaced, namespace: u.GetNamespace(), name: u.GetName(),
				uid: u.GetUID(), owners: refs, deleting: u.GetDeletionTimestamp() != nil, finalizers: u.GetFinalizers()})
		}
	}
	return out, nil
}

// setOwnerRefs rewrites n's ownerReferences with change applied to the
// stored ones: a merge patch with the stored resourceVersion as its
// precondition (a conflict retries through the queue).
func (gc *GarbageCollector) setOwnerRefs(ctx context.Context, n *gcNode, change func([]metav1.OwnerReference) []metav1.OwnerReference) error {
	return gc.patchMeta(ctx, n, func(u *unstructured.Unstructured) (string, any, bool) {
		cur := u.GetOwnerReferences()
		next := change(slices.Clone(cur))
		if slices.EqualFunc(cur, next, func(a, b metav1.OwnerReference) bool {
			return a.UID == b.UID && ptrBool(a.BlockOwnerDeletion) == ptrBool(b.BlockOwnerDeletion)
		}) {
			return "", nil, false
		}
		if len(next) == 0 {
			return "ownerReferences", nil, true
		}
		return "ownerReferences", next, true
	})
}

// removeFinalizer removes finalizer f from n.
func (gc *GarbageCollector) removeFinalizer(ctx context.Context, n *gcNode, f string) error {
	return gc.patchMeta(ctx, n, func(u *unstructured.Unstructured) (string, any, bool) {
		cur := u.GetFinalizers()
		if !slices.Contains(cur, f) {
			return "", nil, false
		}
		next := slices.DeleteFunc(slices.Clone(cur), func(s string) bool { return s == f })
		if len(next) == 0 {
			return "finalizers", nil, true
		}
		return "finalizers", next, true
	})
}

// patchMeta reads n and, when decide asks for it, sets one metadata field
// by a merge patch that carries the read resourceVersion (and UID) as
// preconditions.
func (gc *GarbageCollector) patchMeta(ctx context.Context, n *gcNode, decide func(*unstructured.Unstructured) (field string, value any, ok bool)) error {
	client := gc.cfg.Dynamic.Resource(n.gvr).Namespace(n.namespace)
	u, err := client.Get(ctx, n.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s %s: %w", n.gvr.GroupResource(), objectKey(n), err)
	}
	if u.GetUID() != n.uid {
		return nil
	}
	field, value, ok := decide(u)
	if !ok {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		field: value, "resourceVersion": u.GetResourceVersion(), "uid": string(n.uid)}})
	if err != nil {
		return fmt.Errorf("encoding patch of %s: %w", objectKey(n), err)
	}
	_, err = client.Patch(ctx, n.name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("patching %s of %s %s: %w", field, n.gvr.GroupResource(), objectKey(n), err)
	}
	gc.log.Info("metadata updated", "resource", n.gvr.GroupResource().String(), "object", objectKey(n), "field", field)
	return nil
}

// objectKey renders n as namespace/name, or name when cluster-scoped.
func objectKey(n *gcNode) string {
	if n.namespace == "" {
		return n.name
	}
	return n.namespace + "/" + n.name
}
