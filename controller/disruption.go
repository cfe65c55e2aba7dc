package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// DisruptedPodTimeout bounds how long a pod the eviction API recorded in a
// budget's status.disruptedPods counts as disrupted while its deletion has
// not shown: after that the eviction is taken to have failed and the pod
// counts as healthy again, as in Kubernetes.
const DisruptedPodTimeout = 2 * time.Minute

// ErrUnknownScale means a budget's pods belong to a controller whose scale
// the disruption controller cannot read, so it cannot tell how many pods to
// expect; the budget then allows no disruption.
var ErrUnknownScale = errors.New("expected pod count unknown")

// DisruptionConfig configures a disruption controller. Zero values mean
// defaults.
type DisruptionConfig struct {
	// Client talks to the API as the disruption controller identity.
	// Required.
	Client kubernetes.Interface
	// Clock stamps conditions and expires disrupted pods (nil: the real
	// clock).
	Clock clock.WithTicker
	// Logger receives the controller's log (nil: discard).
	Logger *slog.Logger
	// Workers is the number of budgets synced concurrently (default 2).
	Workers int

	_ struct{}
}

func (c *DisruptionConfig) setDefaults() {
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
func (c DisruptionConfig) Validate() error {
	c.setDefaults()
	switch {
	case c.Client == nil:
		return fmt.Errorf("%w: disruption: Client is nil; pass a clientset for the disruption controller identity", ErrInvalidConfig)
	case c.Workers < 0:
		return fmt.Errorf("%w: disruption: Workers must not be negative", ErrInvalidConfig)
	}
	return nil
}

// Disruption keeps the status of policy/v1 PodDisruptionBudgets: how many
// of the selected pods are healthy (Ready and not terminating), how many
// must stay healthy, how many are expected, and so how many disruptions are
// allowed. The eviction subresource spends that allowance and the
// scheduler's preemption prefers victims whose budget has some left (PR-7).
// It writes only through the status subresource.
type Disruption struct {
	cfg     DisruptionConfig
	log     *slog.Logger
	queue   *keyQueue
	factory informers.SharedInformerFactory
	pdbs    policylisters.PodDisruptionBudgetLister
	pods    corelisters.PodLister
	sets    appslisters.ReplicaSetLister
	pets    appslisters.StatefulSetLister
	synced  []cache.InformerSynced
}

// NewDisruption builds the controller; Run starts it.
func NewDisruption(cfg DisruptionConfig) (*Disruption, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	f := informers.NewSharedInformerFactory(cfg.Client, 0)
	pdbInf, podInf := f.Policy().V1().PodDisruptionBudgets(), f.Core().V1().Pods()
	rsInf, ssInf := f.Apps().V1().ReplicaSets(), f.Apps().V1().StatefulSets()
	dc := &Disruption{
		cfg: cfg, log: cfg.Logger, factory: f,
		pdbs: pdbInf.Lister(), pods: podInf.Lister(), sets: rsInf.Lister(), pets: ssInf.Lister(),
		synced: []cache.InformerSynced{pdbInf.Informer().HasSynced, podInf.Informer().HasSynced,
			rsInf.Informer().HasSynced, ssInf.Informer().HasSynced},
	}
	dc.queue = newKeyQueue("disruption", cfg.Clock, cfg.Logger, dc.sync)
	if err := addHandler(pdbInf.Informer(), dc.queue.handlerFuncs()); err != nil {
		return nil, err
	}
	if err := addHandler(podInf.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc: dc.podChanged,
		UpdateFunc: func(old, cur any) {
			dc.podChanged(old)
			dc.podChanged(cur)
		},
		DeleteFunc: dc.podChanged,
	}); err != nil {
		return nil, err
	}
	// A controller's scale is what percentages and maxUnavailable apply to.
	scaleChanged := cache.ResourceEventHandlerFuncs{
		AddFunc:    dc.namespaceChanged,
		UpdateFunc: func(_, cur any) { dc.namespaceChanged(cur) },
		DeleteFunc: dc.namespaceChanged,
	}
	for _, inf := range []cache.SharedIndexInformer{rsInf.Informer(), ssInf.Informer()} {
		if err := addHandler(inf, scaleChanged); err != nil {
			return nil, err
		}
	}
	return dc, nil
}

// Run runs the controller until ctx ends.
func (dc *Disruption) Run(ctx context.Context) error {
	dc.factory.Start(ctx.Done())
	defer dc.factory.Shutdown()
	if err := waitForSync(ctx, "disruption", dc.synced...); err != nil {
		return err
	}
	dc.log.Info("disruption controller started")
	dc.queue.run(ctx, dc.cfg.Workers)
	return nil
}

// podChanged queues the budgets selecting the pod.
func (dc *Disruption) podChanged(obj any) {
	p := podFromObj(obj)
	if p == nil {
		return
	}
	pdbs, err := dc.pdbs.PodDisruptionBudgets(p.Namespace).List(everything)
	if err != nil {
		return
	}
	for _, pdb := range pdbs {
		if sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err == nil && sel.Matches(labels.Set(p.Labels)) {
			dc.queue.add(p.Namespace + "/" + pdb.Name)
		}
	}
}

// namespaceChanged queues every budget of obj's namespace.
func (dc *Disruption) namespaceChanged(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	m, err := apimeta.Accessor(obj)
	if err != nil {
		return
	}
	pdbs, err := dc.pdbs.PodDisruptionBudgets(m.GetNamespace()).List(everything)
	if err != nil {
		return
	}
	for _, pdb := range pdbs {
		dc.queue.add(pdb.Namespace + "/" + pdb.Name)
	}
}

// sync recomputes one budget's status and writes it when it changed.
func (dc *Disruption) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pdb, err := dc.pdbs.PodDisruptionBudgets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading budget %s: %w", key, err)
	}
	pods, err := dc.podsOf(pdb)
	if err != nil {
		return err
	}
	now := dc.cfg.Clock.Now()
	status, recheck := BudgetStatus(pdb, pods, dc.expectedScale, now)
	if !recheck.IsZero() {
		dc.queue.addAfter(key, recheck.Sub(now))
	}
	if apiequality.Semantic.DeepEqual(pdb.Status, status) {
		return nil
	}
	upd := pdb.DeepCopy()
	upd.Status = status
	if _, err := dc.cfg.Client.PolicyV1().PodDisruptionBudgets(ns).UpdateStatus(ctx, upd, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		// A conflict means an eviction spent an allowance meanwhile: the
		// retry starts from the budget the informer shows next.
		return fmt.Errorf("updating status of budget %s: %w", key, err)
	}
	dc.log.Debug("budget status", "pdb", key, "current_healthy", status.CurrentHealthy,
		"desired_healthy", status.DesiredHealthy, "expected_pods", status.ExpectedPods,
		"disruptions_allowed", status.DisruptionsAllowed)
	return nil
}

// podsOf lists the pods of the budget's namespace its selector matches. A
// null selector matches none and an empty one all, as in policy/v1.
func (dc *Disruption) podsOf(pdb *policyv1.PodDisruptionBudget) ([]*corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		// The API refuses such selectors; nothing to count.
		return nil, nil
	}
	pods, err := dc.pods.Pods(pdb.Namespace).List(sel)
	if err != nil {
		return nil, fmt.Errorf("listing pods of budget %s/%s: %w", pdb.Namespace, pdb.Name, err)
	}
	return pods, nil
}

// expectedScale sums the replicas of the ReplicaSets and StatefulSets
// controlling pods, each counted once. A pod without a controller expects
// itself: it counts 1. (Kubernetes ignores such pods, which makes
// maxUnavailable allow every one of them to go; counting them is the safe
// side.) A controller of another kind, or one the informer does not show,
// is an error, and the budget then allows no disruption.
func (dc *Disruption) expectedScale(pods []*corev1.Pod) (int32, error) {
	seen := map[types.UID]bool{}
	var total int32
	for _, p := range pods {
		ref := metav1.GetControllerOfNoCopy(p)
		if ref == nil {
			total++
			continue
		}
		if seen[ref.UID] {
			continue
		}
		seen[ref.UID] = true
		var replicas *int32
		var uid types.UID
		switch ref.Kind {
		case "ReplicaSet":
			if rs, err := dc.sets.ReplicaSets(p.Namespace).Get(ref.Name); err == nil {
				replicas, uid = rs.Spec.Replicas, rs.UID
			}
		case "StatefulSet":
			if ss, err := dc.pets.StatefulSets(p.Namespace).Get(ref.Name); err == nil {
				replicas, uid = ss.Spec.Replicas, ss.UID
			}
		default:
			return 0, fmt.Errorf("%w: pod %s/%s is controlled by %s %s, whose scale is unknown",
				ErrUnknownScale, p.Namespace, p.Name, ref.Kind, ref.Name)
		}
		if uid == "" || uid != ref.UID {
			return 0, fmt.Errorf("%w: controller %s %s of pod %s/%s not found",
				ErrUnknownScale, ref.Kind, ref.Name, p.Namespace, p.Name)
		}
		total += ptr.Deref(replicas, 1)
	}
	return total, nil
}

// Reasons of the DisruptionAllowed condition.
const (
	ReasonSufficientPods   = policyv1.SufficientPodsReason
	ReasonInsufficientPods = policyv1.InsufficientPodsReason
	ReasonSyncFailed       = policyv1.SyncFailedReason
)

// BudgetStatus computes the status of pdb from pods, the pods of its
// namespace its selector matches, at now. scale returns the number of pods
// the pods' controllers want, which maxUnavailable and a percentage
// minAvailable apply to. It also returns when the status must be looked at
// again because a disrupted pod's entry expires (zero: no need). It is pure.
//
//   - currentHealthy: pods Ready and not terminating, not counting pods the
//     eviction API disrupted in the last DisruptedPodTimeout;
//   - desiredHealthy: minAvailable (a percentage of the expected pods,
//     rounded up), or the expected pods minus maxUnavailable (rounded up),
//     never below 0; with neither set, 0;
//   - expectedPods: the selected pods that have not finished for an integer
//     minAvailable (or neither field), the controllers' scale otherwise;
//   - disruptionsAllowed: currentHealthy − desiredHealthy, never below 0,
//     and 0 when the expected pods cannot be known.
func BudgetStatus(pdb *policyv1.PodDisruptionBudget, pods []*corev1.Pod, scale func([]*corev1.Pod) (int32, error), now time.Time) (policyv1.PodDisruptionBudgetStatus, time.Time) {
	st := *pdb.Status.DeepCopy()
	st.ObservedGeneration = pdb.Generation
	var recheck time.Time
	st.DisruptedPods, recheck = liveDisruptions(pdb.Status.DisruptedPods, pods, now)
	st.CurrentHealthy = 0
	for _, p := range pods {
		if _, disrupted := st.DisruptedPods[p.Name]; !disrupted && !podTerminating(p) && podReady(p) {
			st.CurrentHealthy++
		}
	}
	expected, desired, err := expectation(pdb, pods, scale)
	if err != nil {
		// Fail safe: with the expected pods unknown, allow no disruption and
		// keep the last known counts.
		st.DisruptionsAllowed = 0
		setDisruptionCondition(&st, metav1.ConditionFalse, ReasonSyncFailed, err.Error(), now)
		return st, recheck
	}
	st.ExpectedPods, st.DesiredHealthy = expected, desired
	st.DisruptionsAllowed = max(0, st.CurrentHealthy-desired)
	if st.DisruptionsAllowed > 0 {
		setDisruptionCondition(&st, metav1.ConditionTrue, ReasonSufficientPods, "", now)
	} else {
		setDisruptionCondition(&st, metav1.ConditionFalse, ReasonInsufficientPods, "", now)
	}
	return st, recheck
}

// expectation returns the expected pods and the healthy pods desired.
func expectation(pdb *policyv1.PodDisruptionBudget, pods []*corev1.Pod, scale func([]*corev1.Pod) (int32, error)) (expected, desired int32, err error) {
	minAvail, maxUnavail := pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable
	if maxUnavail == nil && (minAvail == nil || minAvail.Type == intstr.Int) {
		for _, p := range pods {
			if !podTerminal(p) {
				expected++
			}
		}
		if minAvail != nil {
			desired = minAvail.IntVal
		}
		return expected, desired, nil
	}
	if expected, err = scale(pods); err != nil {
		return 0, 0, err
	}
	if maxUnavail != nil {
		n, err := intstr.GetScaledValueFromIntOrPercent(maxUnavail, int(expected), true)
		if err != nil {
			return 0, 0, fmt.Errorf("maxUnavailable %s: %w", maxUnavail.String(), err)
		}
		return expected, max(0, expected-int32(n)), nil
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(minAvail, int(expected), true)
	if err != nil {
		return 0, 0, fmt.Errorf("minAvailable %s: %w", minAvail.String(), err)
	}
	return expected, int32(n), nil
}

// liveDisruptions keeps the entries of disruptedPods whose pod is still
// selected, not yet terminating and disrupted less than DisruptedPodTimeout
// ago; it returns them and the earliest time one of them expires.
func liveDisruptions(disrupted map[string]metav1.Time, pods []*corev1.Pod, now time.Time) (map[string]metav1.Time, time.Time) {
	if len(disrupted) == 0 {
		return nil, time.Time{}
	}
	byName := make(map[string]*corev1.Pod, len(pods))
	for _, p := range pods {
		byName[p.Name] = p
	}
	var live map[string]metav1.Time
	var recheck time.Time
	for name, at := range disrupted {
		p, ok := byName[name]
		expires := at.Add(DisruptedPodTimeout)
		if !ok || podTerminating(p) || !expires.After(now) {
			continue
		}
		if live == nil {
			live = map[string]metav1.Time{}
		}
		live[name] = at
		if recheck.IsZero() || expires.Before(recheck) {
			recheck = expires
		}
	}
	return live, recheck
}

// setDisruptionCondition sets the DisruptionAllowed condition, moving its
// transition time only when its status changes.
func setDisruptionCondition(st *policyv1.PodDisruptionBudgetStatus, status metav1.ConditionStatus, reason, msg string, now time.Time) {
	apimeta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: policyv1.DisruptionAllowedCondition, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: st.ObservedGeneration, LastTransitionTime: metav1.NewTime(now),
	})
}
