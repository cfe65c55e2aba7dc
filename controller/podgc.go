package controller

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// Defaults of PodGCConfig; the threshold is Kubernetes'.
const (
	DefaultTerminatedPodThreshold = 12500
	DefaultPodGCPeriod            = 20 * time.Second
)

// PodGCConfig configures a PodGC controller. Zero values mean defaults.
type PodGCConfig struct {
	// Client talks to the API as the pod GC identity. Required.
	Client kubernetes.Interface
	// Clock paces the collection (nil: the real clock).
	Clock clock.WithTicker
	// Logger receives the controller's log (nil: discard).
	Logger *slog.Logger
	// TerminatedPodThreshold is how many terminated (Succeeded or Failed)
	// pods may exist before the oldest are deleted (default 12500; LC-14).
	TerminatedPodThreshold int
	// Period is how often pods are collected (default 20 s).
	Period time.Duration

	_ struct{}
}

func (c *PodGCConfig) setDefaults() {
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.TerminatedPodThreshold == 0 {
		c.TerminatedPodThreshold = DefaultTerminatedPodThreshold
	}
	if c.Period == 0 {
		c.Period = DefaultPodGCPeriod
	}
}

// Validate reports the first unusable field, after defaults are applied.
func (c PodGCConfig) Validate() error {
	c.setDefaults()
	switch {
	case c.Client == nil:
		return fmt.Errorf("%w: pod GC: Client is nil; pass a clientset for the pod GC identity", ErrInvalidConfig)
	case c.TerminatedPodThreshold < 0:
		return fmt.Errorf("%w: pod GC: TerminatedPodThreshold must not be negative", ErrInvalidConfig)
	case c.Period < 0:
		return fmt.Errorf("%w: pod GC: Period must not be negative", ErrInvalidConfig)
	}
	return nil
}

// PodGC deletes the oldest terminated pods above a threshold (LC-14) and
// force deletes pods bound to nodes whose Node object is gone (PS-10): a
// deleted Node declares a permanent partition, so nothing of it can still
// run. It does nothing else.
type PodGC struct {
	cfg     PodGCConfig
	log     *slog.Logger
	factory informers.SharedInformerFactory
	pods    corelisters.PodLister
	nodes   corelisters.NodeLister
	synced  []cache.InformerSynced
}

// NewPodGC builds the controller; Run starts it.
func NewPodGC(cfg PodGCConfig) (*PodGC, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	f := informers.NewSharedInformerFactory(cfg.Client, 0)
	podInf, nodeInf := f.Core().V1().Pods(), f.Core().V1().Nodes()
	return &PodGC{
		cfg: cfg, log: cfg.Logger, factory: f,
		pods: podInf.Lister(), nodes: nodeInf.Lister(),
		synced: []cache.InformerSynced{podInf.Informer().HasSynced, nodeInf.Informer().HasSynced},
	}, nil
}

// Run collects every Period until ctx ends.
func (gc *PodGC) Run(ctx context.Context) error {
	gc.factory.Start(ctx.Done())
	defer gc.factory.Shutdown()
	if err := waitForSync(ctx, "pod GC", gc.synced...); err != nil {
		return err
	}
	gc.log.Info("pod GC started", "threshold", gc.cfg.TerminatedPodThreshold, "period", gc.cfg.Period)
	t := gc.cfg.Clock.NewTicker(gc.cfg.Period)
	defer t.Stop()
	for {
		gc.Collect(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}

// Collect runs one collection over the informer caches. Failures are logged
// and retried at the next collection.
func (gc *PodGC) Collect(ctx context.Context) {
	pods, err := gc.pods.List(everything)
	if err != nil {
		return
	}
	nodes, err := gc.nodes.List(everything)
	if err != nil {
		return
	}
	plan := planGC(pods, nodes, gc.cfg.TerminatedPodThreshold)
	for _, p := range plan.terminated {
		// No grace period: the API deletes a terminated pod at once, and
		// pod GC never asks for a force deletion of a pod whose node exists.
		err := gc.cfg.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, preconditionUID(p.UID))
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			gc.log.Warn("deleting terminated pod", "pod", p.Namespace+"/"+p.Name, "err", err)
			continue
		}
		gc.log.Info("terminated pod collected", "pod", p.Namespace+"/"+p.Name, "phase", string(p.Status.Phase))
	}
	for _, p := range plan.orphaned {
		gc.forceDeleteOrphan(ctx, p)
	}
}

// forceDeleteOrphan force deletes p after confirming with a fresh read that
// its node is gone: the informer may lag behind a node that was just
// registered.
func (gc *PodGC) forceDeleteOrphan(ctx context.Context, p *corev1.Pod) {
	_, err := gc.cfg.Client.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		return
	}
	opts := preconditionUID(p.UID)
	opts.GracePeriodSeconds = ptr.To[int64](0)
	err = gc.cfg.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, opts)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		gc.log.Warn("force deleting pod of deleted node", "pod", p.Namespace+"/"+p.Name, "node", p.Spec.NodeName, "err", err)
		return
	}
	gc.log.Warn("pod of deleted node force deleted", "pod", p.Namespace+"/"+p.Name, "node", p.Spec.NodeName)
}

// gcPlan is what one collection deletes.
type gcPlan struct {
	// terminated are the oldest terminated pods above the threshold.
	terminated []*corev1.Pod
	// orphaned are pods bound to nodes that do not exist.
	orphaned []*corev1.Pod
}

// planGC decides a collection; it is a pure function of the caches.
//
// A terminated pod on a node that exists but is not Ready is neither counted
// nor collected: its phase may have been set by the node controller's LC-4
// policy while its processes still run, and deleting it would let a pet
// controller start a second copy.
func planGC(pods []*corev1.Pod, nodes []*corev1.Node, threshold int) gcPlan {
	byName := make(map[string]*corev1.Node, len(nodes))
	for _, n := range nodes {
		byName[n.Name] = n
	}
	var plan gcPlan
	var terminated []*corev1.Pod
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			n, ok := byName[p.Spec.NodeName]
			if !ok {
				plan.orphaned = append(plan.orphaned, p)
				continue
			}
			if podTerminal(p) && !nodeReady(n) {
				continue
			}
		}
		if podTerminal(p) && !podTerminating(p) {
			terminated = append(terminated, p)
		}
	}
	if excess := len(terminated) - threshold; excess > 0 {
		sort.SliceStable(terminated, func(i, j int) bool {
			a, b := terminated[i], terminated[j]
			if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
				return a.CreationTimestamp.Before(&b.CreationTimestamp)
			}
			return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
		})
		plan.terminated = terminated[:excess]
	}
	sort.Slice(plan.orphaned, func(i, j int) bool {
		return plan.orphaned[i].Namespace+"/"+plan.orphaned[i].Name < plan.orphaned[j].Namespace+"/"+plan.orphaned[j].Name
	})
	return plan
}
