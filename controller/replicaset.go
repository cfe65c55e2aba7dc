package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sort"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// DefaultPendingTimeout bounds how long a ReplicaSet controller waits for
// its informer to show a pod it created or deleted before it stops counting
// on it.
const DefaultPendingTimeout = 60 * time.Second

// ReplicaSetConfig configures a ReplicaSet controller. Zero values mean
// defaults.
type ReplicaSetConfig struct {
	// Client talks to the API as the ReplicaSet controller identity.
	// Required.
	Client kubernetes.Interface
	// Clock paces retries and pending timeouts (nil: the real clock).
	Clock clock.WithTicker
	// Logger receives the controller's log (nil: discard).
	Logger *slog.Logger
	// Workers is the number of sets synced concurrently (default 2).
	Workers int
	// PendingTimeout: see DefaultPendingTimeout.
	PendingTimeout time.Duration

	_ struct{}
}

func (c *ReplicaSetConfig) setDefaults() {
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Workers == 0 {
		c.Workers = 2
	}
	if c.PendingTimeout == 0 {
		c.PendingTimeout = DefaultPendingTimeout
	}
}

// Validate reports the first unusable field, after defaults are applied.
func (c ReplicaSetConfig) Validate() error {
	c.setDefaults()
	switch {
	case c.Client == nil:
		return fmt.Errorf("%w: replica set: Client is nil; pass a clientset for the ReplicaSet controller identity", ErrInvalidConfig)
	case c.Workers < 0 || c.PendingTimeout < 0:
		return fmt.Errorf("%w: replica set: Workers and PendingTimeout must not be negative", ErrInvalidConfig)
	}
	return nil
}

// ReplicaSet serves apps/v1 ReplicaSets, availability first (PS-7): only
// active pods count, so a pod that begins graceful deletion is replaced at
// once and two copies may run together until the old one stops. That
// overlap is the documented contract, not a fault.
type ReplicaSet struct {
	cfg     ReplicaSetConfig
	log     *slog.Logger
	queue   *keyQueue
	factory informers.SharedInformerFactory
	sets    appslisters.ReplicaSetLister
	pods    corelisters.PodLister
	synced  []cache.InformerSynced

	mu      sync.Mutex
	pending map[types.UID]*rsPending // set UID -> writes not yet seen
	events  eventRecorder            // events.go
}

// rsPending is what the controller did to one set that its pod informer has
// not shown yet, so a lagging cache does not make it create or delete twice.
type rsPending struct {
	created map[string]time.Time    // pod name -> when created
	deleted map[types.UID]time.Time // pod UID -> when deleted
	// seen: pods of the set the informer delivered while a create was in
	// flight (name -> when), so that a create whose pod the informer
	// showed, or showed and removed, before the call returned is not
	// counted as in flight.
	seen     map[string]bool
	inFlight int // create calls not returned yet
}

func newRSPending() *rsPending {
	return &rsPending{created: map[string]time.Time{}, deleted: map[types.UID]time.Time{}, seen: map[string]bool{}}
}

// observed notes that the pod informer delivered p (added, changed or
// removed): a pod the controller created is then no longer in flight, even
// if the lister no longer shows it by the next sync (created and deleted
// within one sync's lag), which would otherwise leave the set counting a
// pod that will never appear.
func (rc *ReplicaSet) observed(p *corev1.Pod) {
	ref := metav1.GetControllerOf(p)
	if ref == nil {
		return
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	pd := rc.pending[ref.UID]
	if pd == nil {
		return
	}
	if _, ok := pd.created[p.Name]; ok {
		delete(pd.created, p.Name)
		return
	}
	if pd.inFlight > 0 {
		pd.seen[p.Name] = true
	}
}

// NewReplicaSet builds the controller; Run starts it.
func NewReplicaSet(cfg ReplicaSetConfig) (*ReplicaSet, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	f := informers.NewSharedInformerFactory(cfg.Client, 0)
	setInf, podInf := f.Apps().V1().ReplicaSets(), f.Core().V1().Pods()
	rc := &ReplicaSet{
		cfg: cfg, log: cfg.Logger, factory: f,
		sets: setInf.Lister(), pods: podInf.Lister(),
		synced:  []cache.InformerSynced{setInf.Informer().HasSynced, podInf.Informer().HasSynced},
		pending: map[types.UID]*rsPending{},
	}
	rc.queue = newKeyQueue("replicaset", cfg.Clock, cfg.Logger, rc.sync)
	if err := addHandler(setInf.Informer(), rc.queue.handlerFuncs()); err != nil {
		return nil, err
	}
	// A set gone leaves nothing pending.
	if err := addHandler(setInf.Informer(), cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if set, ok := obj.(*appsv1.ReplicaSet); ok {
			rc.mu.Lock()
			delete(rc.pending, set.UID)
			rc.mu.Unlock()
		}
	}}); err != nil {
		return nil, err
	}
	podOwner := func(obj any) {
		if p := podFromObj(obj); p != nil {
			if key := controllerKey(p, "ReplicaSet"); key != "" {
				rc.observed(p)
				rc.queue.add(key)
			}
		}
	}
	if err := addHandler(podInf.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc: podOwner, UpdateFunc: func(_, obj any) { podOwner(obj) }, DeleteFunc: podOwner,
	}); err != nil {
		return nil, err
	}
	return rc, nil
}

// Run runs the controller until ctx ends.
func (rc *ReplicaSet) Run(ctx context.Context) error {
	rc.events.start(ctx, rc.cfg.Client, rc.cfg.Clock)
	rc.factory.Start(ctx.Done())
	defer rc.factory.Shutdown()
	if err := waitForSync(ctx, "replica set", rc.synced...); err != nil {
		return err
	}
	rc.log.Info("replica set controller started")
	rc.queue.run(ctx, rc.cfg.Workers)
	return nil
}

// sync reconciles one set's pods and status.
func (rc *ReplicaSet) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	set, err := rc.sets.ReplicaSets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading replica set %s: %w", key, err)
	}
	sel, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err != nil {
		return fmt.Errorf("replica set %s selector: %w", key, err)
	}
	all, err := rc.pods.Pods(ns).List(sel)
	if err != nil {
		return fmt.Errorf("listing pods of replica set %s: %w", key, err)
	}
	var owned []*corev1.Pod
	for _, p := range all {
		if ownedBy(p, set.UID) {
			owned = append(owned, p)
		}
	}
	active, inFlight, waiting := rc.reconcilePending(set.UID, owned)
	want := int(ptr.Deref(set.Spec.Replicas, 1))
	if set.DeletionTimestamp != nil {
		// Being deleted (foreground or orphan): the garbage collector
		// decides about its pods, and none is made or removed, as
		// upstream's ReplicaSet controller stops at a deleted set.
		want = len(active) + inFlight
	}
	var errs []error
	diff := want - len(active) - inFlight
	if waiting || diff != 0 {
		// A write the informer never shows (its pod created and removed
		// between two looks, or an event lost) is forgotten after
		// PendingTimeout: look again then, so that the set is not left
		// short until some unrelated event comes.
		rc.queue.addAfter(key, rc.cfg.PendingTimeout)
	}
	switch {
	case diff > 0:
		for range diff {
			if err := rc.createPod(ctx, set); err != nil {
				errs = append(errs, err)
			}
		}
	case diff < 0 && inFlight == 0:
		for _, p := range scaleDownOrder(active)[:-diff] {
			if err := rc.deletePod(ctx, set, p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := rc.updateStatus(ctx, set, owned); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// reconcilePending forgets writes the cache now shows (or that timed out)
// and returns the active pods, minus those it deleted, the number of pods
// it created that the cache does not show yet, and whether some write is
// still pending (the set must then be synced again once it times out).
func (rc *ReplicaSet) reconcilePending(uid types.UID, owned []*corev1.Pod) ([]*corev1.Pod, int, bool) {
	now := rc.cfg.Clock.Now()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	pd := rc.pending[uid]
	if pd == nil {
		pd = newRSPending()
		rc.pending[uid] = pd
	}
	var active []*corev1.Pod
	for _, p := range owned {
		delete(pd.created, p.Name)
		if !podActive(p) {
			delete(pd.deleted, p.UID)
			continue
		}
		if at, ok := pd.deleted[p.UID]; ok && now.Sub(at) < rc.cfg.PendingTimeout {
			continue
		}
		delete(pd.deleted, p.UID)
		active = append(active, p)
	}
	for name, at := range pd.created {
		if now.Sub(at) >= rc.cfg.PendingTimeout {
			delete(pd.created, name)
		}
	}
	for uid := range pd.deleted {
		found := false
		for _, p := range owned {
			found = found || p.UID == uid
		}
		if !found {
			delete(pd.deleted, uid)
		}
	}
	return active, len(pd.created), len(pd.created)+len(pd.deleted) > 0
}

// createPod creates one pod from the set's template with a generated name.
func (rc *ReplicaSet) createPod(ctx context.Context, set *appsv1.ReplicaSet) error {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: set.Name + "-", Namespace: set.Namespace,
			Labels:          maps.Clone(set.Spec.Template.Labels),
			Annotations:     maps.Clone(set.Spec.Template.Annotations),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(set, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))},
		},
		Spec: *set.Spec.Template.Spec.DeepCopy(),
	}
	rc.mu.Lock()
	pd := rc.pending[set.UID] // made by reconcilePending in this sync
	if pd == nil {
		pd = newRSPending() // the set went meanwhile: kept by no one
	}
	pd.inFlight++
	rc.mu.Unlock()
	created, err := rc.cfg.Client.CoreV1().Pods(set.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	rc.mu.Lock()
	pd.inFlight--
	if err == nil {
		if _, ok := pd.seen[created.Name]; ok {
			delete(pd.seen, created.Name) // the informer was first
		} else {
			pd.created[created.Name] = rc.cfg.Clock.Now()
		}
	}
	if pd.inFlight == 0 {
		clear(pd.seen)
	}
	rc.mu.Unlock()
	rc.createdEvent(set, created, err)
	if err != nil {
		return fmt.Errorf("creating pod of replica set %s/%s: %w", set.Namespace, set.Name, err)
	}
	rc.log.Info("replica created", "pod", created.Namespace+"/"+created.Name, "replicaset", set.Name)
	return nil
}

// deletePod gracefully deletes one of the set's pods.
func (rc *ReplicaSet) deletePod(ctx context.Context, set *appsv1.ReplicaSet, p *corev1.Pod) error {
	err := rc.cfg.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, preconditionUID(p.UID))
	rc.deletedEvent(set, p, err)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting pod %s/%s of replica set %s: %w", p.Namespace, p.Name, set.Name, err)
	}
	rc.mu.Lock()
	if pd := rc.pending[set.UID]; pd != nil {
		pd.deleted[p.UID] = rc.cfg.Clock.Now()
	}
	rc.mu.Unlock()
	rc.log.Info("replica deleted", "pod", p.Namespace+"/"+p.Name, "replicaset", set.Name)
	return nil
}

// scaleDownOrder sorts pods so the cheapest to lose come first: unscheduled,
// then not ready, then the newest.
func scaleDownOrder(pods []*corev1.Pod) []*corev1.Pod {
	out := append([]*corev1.Pod(nil), pods...)
	rank := func(p *corev1.Pod) int {
		switch {
		case p.Spec.NodeName == "":
			return 0
		case !podReady(p):
			return 1
		}
		return 2
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra < rb
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return b.CreationTimestamp.Before(&a.CreationTimestamp)
		}
		return a.Name > b.Name
	})
	return out
}

// updateStatus writes the counts when they changed.
func (rc *ReplicaSet) updateStatus(ctx context.Context, set *appsv1.ReplicaSet, owned []*corev1.Pod) error {
	st := appsv1.ReplicaSetStatus{ObservedGeneration: set.Generation}
	for _, p := range owned {
		if !podActive(p) {
			continue
		}
		st.Replicas++
		st.FullyLabeledReplicas++
		if podReady(p) {
			st.ReadyReplicas++
			st.AvailableReplicas++
		}
	}
	old := set.Status
	if old.ObservedGeneration == st.ObservedGeneration && old.Replicas == st.Replicas &&
		old.ReadyReplicas == st.ReadyReplicas && old.AvailableReplicas == st.AvailableReplicas &&
		old.FullyLabeledReplicas == st.FullyLabeledReplicas {
		return nil
	}
	s := set.DeepCopy()
	s.Status.ObservedGeneration, s.Status.Replicas = st.ObservedGeneration, st.Replicas
	s.Status.FullyLabeledReplicas = st.FullyLabeledReplicas
	s.Status.ReadyReplicas, s.Status.AvailableReplicas = st.ReadyReplicas, st.AvailableReplicas
	if _, err := rc.cfg.Client.AppsV1().ReplicaSets(s.Namespace).UpdateStatus(ctx, s, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating status of replica set %s/%s: %w", s.Namespace, s.Name, err)
	}
	return nil
}
