package controller

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
)

// DeploymentConfig configures a deployment controller. Zero values mean
// defaults.
type DeploymentConfig struct {
	// Client talks to the API as the deployment controller identity.
	// Required.
	Client kubernetes.Interface
	// Clock paces retries, minReadySeconds and progress deadlines (nil:
	// the real clock).
	Clock clock.WithTicker
	// Logger receives the controller's log (nil: discard).
	Logger *slog.Logger
	// Recorder receives the controller's events (nil: none).
	Recorder record.EventRecorder
	// Workers is the number of Deployments synced concurrently (default 2).
	Workers int

	_ struct{}
}

func (c *DeploymentConfig) setDefaults() {
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Workers == 0 {
		c.Workers = 2
	}
}

// Validate reports the first unusable field, after defaults are applied.
func (c DeploymentConfig) Validate() error {
	c.setDefaults()
	switch {
	case c.Client == nil:
		return fmt.Errorf("%w: deployment: Client is nil; pass a clientset for the deployment controller identity", ErrInvalidConfig)
	case c.Workers < 0:
		return fmt.Errorf("%w: deployment: Workers must not be negative", ErrInvalidConfig)
	}
	return nil
}

// Deployment serves apps/v1 Deployments as kube-controller-manager's
// deployment controller does: each template revision is a ReplicaSet named
// after the Deployment and the template's hash, and a rollout scales the
// new set up and the old ones down within maxSurge and maxUnavailable
// (RollingUpdate), or all old ones to zero and, once their pods are gone,
// the new one up (Recreate). It never writes a pod: the ReplicaSet
// controller creates and deletes them as the sets' replicas say (PS-7).
type Deployment struct {
	cfg     DeploymentConfig
	log     *slog.Logger
	queue   *keyQueue
	factory informers.SharedInformerFactory
	deps    appslisters.DeploymentLister
	sets    appslisters.ReplicaSetLister
	pods    corelisters.PodLister
	synced  []cache.InformerSynced
}

// NewDeployment builds the controller; Run starts it.
func NewDeployment(cfg DeploymentConfig) (*Deployment, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	f := informers.NewSharedInformerFactory(cfg.Client, 0)
	depInf, rsInf, podInf := f.Apps().V1().Deployments(), f.Apps().V1().ReplicaSets(), f.Core().V1().Pods()
	dc := &Deployment{
		cfg: cfg, log: cfg.Logger, factory: f,
		deps: depInf.Lister(), sets: rsInf.Lister(), pods: podInf.Lister(),
		synced: []cache.InformerSynced{depInf.Informer().HasSynced, rsInf.Informer().HasSynced, podInf.Informer().HasSynced},
	}
	dc.queue = newKeyQueue("deployment", cfg.Clock, cfg.Logger, dc.sync)
	if err := addHandler(depInf.Informer(), dc.queue.handlerFuncs()); err != nil {
		return nil, err
	}
	rsOwner := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		rs, ok := obj.(*appsv1.ReplicaSet)
		if !ok {
			return
		}
		if key := controllerKey(rs, "Deployment"); key != "" {
			dc.queue.add(key)
			return
		}
		dc.queueAdopters(rs)
	}
	if err := addHandler(rsInf.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc: rsOwner, UpdateFunc: func(_, obj any) { rsOwner(obj) }, DeleteFunc: rsOwner,
	}); err != nil {
		return nil, err
	}
	podOwner := func(obj any) {
		p := podFromObj(obj)
		if p == nil {
			return
		}
		ref := metav1.GetControllerOf(p)
		if ref == nil || ref.Kind != "ReplicaSet" {
			return
		}
		if rs, err := dc.sets.ReplicaSets(p.Namespace).Get(ref.Name); err == nil && rs.UID == ref.UID {
			if key := controllerKey(rs, "Deployment"); key != "" {
				dc.queue.add(key)
			}
		}
	}
	if err := addHandler(podInf.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc: podOwner, UpdateFunc: func(_, obj any) { podOwner(obj) }, DeleteFunc: podOwner,
	}); err != nil {
		return nil, err
	}
	return dc, nil
}

// queueAdopters queues the Deployments whose selector matches an orphaned
// ReplicaSet, so one of them adopts it.
func (dc *Deployment) queueAdopters(rs *appsv1.ReplicaSet) {
	deps, err := dc.deps.Deployments(rs.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, d := range deps {
		if sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err == nil && !sel.Empty() && sel.Matches(labels.Set(rs.Labels)) {
			dc.queue.add(d.Namespace + "/" + d.Name)
		}
	}
}

// Run runs the controller until ctx ends.
func (dc *Deployment) Run(ctx context.Context) error {
	dc.factory.Start(ctx.Done())
	defer dc.factory.Shutdown()
	if err := waitForSync(ctx, "deployment", dc.synced...); err != nil {
		return err
	}
	dc.log.Info("deployment controller started")
	dc.queue.run(ctx, dc.cfg.Workers)
	return nil
}

// event records an event about obj when a recorder is configured.
func (dc *Deployment) event(obj *appsv1.Deployment, reason, format string, args ...any) {
	if dc.cfg.Recorder != nil {
		dc.cfg.Recorder.Eventf(obj, corev1.EventTypeNormal, reason, format, args...)
	}
}

// sync is syncDeployment: one Deployment's sets brought a step closer to
// its spec, and its status written.
func (dc *Deployment) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	cached, err := dc.deps.Deployments(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading deployment %s: %w", key, err)
	}
	d := cached.DeepCopy()
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || sel.Empty() {
		// Validation refuses such a selector; a Deployment selecting every
		// pod would take them all over.
		return nil
	}
	sets, err := dc.claimReplicaSets(ctx, d, sel)
	if err != nil {
		return err
	}
	counts, recheck, err := dc.countPods(d, sets)
	if err != nil {
		return err
	}
	if recheck > 0 {
		dc.queue.addAfter(key, recheck)
	}
	r := &rollout{dc: dc, d: d, sets: sets, counts: counts, now: dc.cfg.Clock.Now()}
	if d.DeletionTimestamp != nil {
		return r.syncStatusOnly(ctx)
	}
	if err := r.checkPausedConditions(ctx); err != nil {
		return err
	}
	if d.Spec.Paused || r.isScalingEvent() {
		return r.syncScale(ctx)
	}
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		return r.rolloutRecreate(ctx)
	}
	return r.rolloutRolling(ctx)
}

// claimReplicaSets lists d's ReplicaSets: those it controls, and orphans
// its selector matches, which it adopts as upstream's ref manager does. A
// set it controls that no longer matches is left alone (upstream releases
// it; podsafe's GC may then collect it) and not counted.
func (dc *Deployment) claimReplicaSets(ctx context.Context, d *appsv1.Deployment, sel labels.Selector) ([]*appsv1.ReplicaSet, error) {
	all, err := dc.sets.ReplicaSets(d.Namespace).List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing replica sets of deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	var out []*appsv1.ReplicaSet
	for _, rs := range all {
		ref := metav1.GetControllerOf(rs)
		switch {
		case ref != nil && ref.UID == d.UID:
			if sel.Matches(labels.Set(rs.Labels)) {
				out = append(out, rs)
			}
		case ref == nil && rs.DeletionTimestamp == nil && d.DeletionTimestamp == nil && sel.Matches(labels.Set(rs.Labels)):
			adopted := rs.DeepCopy()
			adopted.OwnerReferences = append(adopted.OwnerReferences, *metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment")))
			got, err := dc.cfg.Client.AppsV1().ReplicaSets(rs.Namespace).Update(ctx, adopted, metav1.UpdateOptions{})
			if err != nil {
				return nil, fmt.Errorf("adopting replica set %s/%s into deployment %s: %w", rs.Namespace, rs.Name, d.Name, err)
			}
			out = append(out, got)
		}
	}
	return out, nil
}

// rsCounts are one ReplicaSet's pods as the rollout counts them.
type rsCounts struct {
	// replicas are the active pods (not terminating, not terminated).
	replicas, ready, available int32
	// existing are the pods that may still run: every pod not
	// Succeeded or Failed, terminating ones too (Recreate waits for them).
	existing int32
}

// countPods counts each set's pods. A pod is available once it has been
// Ready for the Deployment's minReadySeconds; recheck is how long until the
// next pod becomes available (0: none is waiting).
func (dc *Deployment) countPods(d *appsv1.Deployment, sets []*appsv1.ReplicaSet) (map[types.UID]*rsCounts, time.Duration, error) {
	counts := map[types.UID]*rsCounts{}
	for _, rs := range sets {
		counts[rs.UID] = &rsCounts{}
	}
	pods, err := dc.pods.Pods(d.Namespace).List(labels.Everything())
	if err != nil {
		return nil, 0, fmt.Errorf("listing pods of deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	now := dc.cfg.Clock.Now()
	minReady := time.Duration(d.Spec.MinReadySeconds) * time.Second
	var recheck time.Duration
	for _, p := range pods {
		ref := metav1.GetControllerOf(p)
		if ref == nil {
			continue
		}
		c := counts[ref.UID]
		if c == nil {
			continue
		}
		if !podTerminal(p) {
			c.existing++
		}
		if !podActive(p) {
			continue
		}
		c.replicas++
		if !podReady(p) {
			continue
		}
		c.ready++
		if wait := availableIn(p, minReady, now); wait <= 0 {
			c.available++
		} else if recheck == 0 || wait < recheck {
			recheck = wait
		}
	}
	return counts, recheck, nil
}

// availableIn is how long until a Ready pod has been Ready for minReady
// (≤ 0: it is available), as upstream's IsPodAvailable judges it.
func availableIn(p *corev1.Pod, minReady time.Duration, now time.Time) time.Duration {
	if minReady == 0 {
		return 0
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Add(minReady).Sub(now) + time.Millisecond
		}
	}
	return minReady
}
