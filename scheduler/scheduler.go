// Package scheduler is podsafe's pod scheduler: an ordinary client-go
// component that watches pods, nodes, PodDisruptionBudgets, PriorityClasses,
// namespaces and the Services and controllers default spreading groups pods
// by, takes pending pods from a priority queue, runs the filter/score
// plugins of package framework over a snapshot of the cluster, preempts
// lower-priority pods when a pod fits nowhere, and binds through
// pods/binding.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/podsafe/podsafe/scheduler/framework"
	"github.com/podsafe/podsafe/scheduler/plugins/podtopologyspread"
)

// Scheduler places pending pods on nodes. Run it once.
type Scheduler struct {
	cfg       Config
	log       *slog.Logger
	client    kubernetes.Interface
	factory   informers.SharedInformerFactory
	pdbLister policylisters.PodDisruptionBudgetLister
	nsLister  corelisters.NamespaceLister
	// workloads are the listers of the Services and controllers default
	// spread constraints look up, set once Run knows which the API serves.
	workloads atomic.Pointer[podtopologyspread.Workloads]

	queue     *Queue
	cache     *Cache
	nominator *Nominator
	fw        *framework.Framework
	algo      *algorithm
	snapshot  *framework.Snapshot
	binder    *binder
}

// New validates cfg, fills in defaults and builds the scheduler; Run
// starts it.
func New(cfg Config) (*Scheduler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	client := cfg.Client
	if client == nil {
		if cfg.RESTConfig == nil {
			return nil, fmt.Errorf("%w: set Client or RESTConfig", ErrInvalidConfig)
		}
		var err error
		if client, err = kubernetes.NewForConfig(cfg.RESTConfig); err != nil {
			return nil, fmt.Errorf("building scheduler client: %w", err)
		}
	}
	s := &Scheduler{
		cfg:       cfg,
		log:       cfg.Logger,
		client:    client,
		factory:   informers.NewSharedInformerFactory(client, cfg.ResyncPeriod),
		queue:     NewQueue(cfg.Clock, cfg.InitialBackoff, cfg.MaxBackoff),
		cache:     NewCache(),
		nominator: NewNominator(),
		snapshot:  framework.NewEmptySnapshot(),
		binder:    &binder{client: client},
	}
	s.pdbLister = s.factory.Policy().V1().PodDisruptionBudgets().Lister()
	s.nsLister = s.factory.Core().V1().Namespaces().Lister()
	if cfg.PodTopologySpread.DefaultSelector == nil {
		cfg.PodTopologySpread.DefaultSelector = s.workloadSelector
		s.cfg.PodTopologySpread.DefaultSelector = s.workloadSelector
	}
	fw, err := framework.NewFramework(Plugins(cfg), framework.Options{
		PodDisruptionBudgets: s.listPDBs,
		NominatedPods:        s.nominator.ForNode,
		NamespaceLabels:      s.namespaceLabels,
		Clock:                cfg.Clock,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	s.fw = fw
	s.algo = &algorithm{fw: fw, percentage: cfg.PercentageOfNodesToScore}
	return s, nil
}

func (s *Scheduler) listPDBs() []*policyv1.PodDisruptionBudget {
	pdbs, err := s.pdbLister.List(labels.Everything())
	if err != nil {
		return nil
	}
	return pdbs
}

// namespaceLabels returns a namespace's labels from the informer, nil if
// it is not known.
func (s *Scheduler) namespaceLabels(name string) labels.Set {
	ns, err := s.nsLister.Get(name)
	if err != nil {
		return nil
	}
	return ns.Labels
}

// workloadSelector is the default DefaultSelector of topology spreading
// (TS-9): the Services and controllers the pod belongs to, once Run has
// their listers.
func (s *Scheduler) workloadSelector(pod *corev1.Pod) labels.Selector {
	w := s.workloads.Load()
	if w == nil {
		return podtopologyspread.OwnerSelector(pod)
	}
	return w.Selector(pod)
}

// watchWorkloads asks the API which of Services, ReplicationControllers,
// ReplicaSets and StatefulSets it serves, starts listers for those, and
// hands them to default topology spreading. An informer on a kind the API
// does not serve would never sync, so the others stay nil. It retries
// discovery until it answers or ctx ends.
func (s *Scheduler) watchWorkloads(ctx context.Context) error {
	var served map[string]bool
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, 5*time.Second) {
		var err error
		if served, err = servedResources(s.client.Discovery(), "v1", "apps/v1"); err == nil {
			break
		}
		s.log.Debug("discovering served workload kinds", "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("discovering served workload kinds: %w", context.Cause(ctx))
		case <-s.cfg.Clock.After(delay):
		}
	}
	var w podtopologyspread.Workloads
	if served["v1/services"] {
		w.Services = s.factory.Core().V1().Services().Lister()
	}
	if served["v1/replicationcontrollers"] {
		w.ReplicationControllers = s.factory.Core().V1().ReplicationControllers().Lister()
	}
	if served["apps/v1/replicasets"] {
		w.ReplicaSets = s.factory.Apps().V1().ReplicaSets().Lister()
	}
	if served["apps/v1/statefulsets"] {
		w.StatefulSets = s.factory.Apps().V1().StatefulSets().Lister()
	}
	s.workloads.Store(&w)
	return nil
}

// servedResources returns "groupVersion/resource" for every resource the
// API serves in the group versions; a group version it does not serve at
// all is no error.
func servedResources(d discovery.DiscoveryInterface, groupVersions ...string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, gv := range groupVersions {
		list, err := d.ServerResourcesForGroupVersion(gv)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("discovering %s: %w", gv, err)
		}
		for _, r := range list.APIResources {
			out[gv+"/"+r.Name] = true
		}
	}
	return out, nil
}

// Run starts the informers, waits for them to sync and schedules pods until
// ctx ends; it then returns nil.
func (s *Scheduler) Run(ctx context.Context) error {
	pods := s.factory.Core().V1().Pods().Informer()
	nodes := s.factory.Core().V1().Nodes().Informer()
	podsReg, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.onPod(obj) },
		UpdateFunc: func(_, obj any) { s.onPod(obj) },
		DeleteFunc: s.onPodDelete,
	})
	if err != nil {
		return fmt.Errorf("watching pods: %w", err)
	}
	nodesReg, err := nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.onNode(obj) },
		UpdateFunc: func(_, obj any) { s.onNode(obj) },
		DeleteFunc: s.onNodeDelete,
	})
	if err != nil {
		return fmt.Errorf("watching nodes: %w", err)
	}
	s.factory.Policy().V1().PodDisruptionBudgets().Informer()
	s.factory.Scheduling().V1().PriorityClasses().Informer()
	s.factory.Core().V1().Namespaces().Informer()
	if err := s.watchWorkloads(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	s.factory.Start(ctx.Done())
	defer s.factory.Shutdown()
	defer s.queue.Close()
	for typ, ok := range s.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("syncing informer %v: %w", typ, ctx.Err())
		}
	}
	// The informers' stores are synced; wait until the handlers have seen
	// every initial pod and node too, so that the first pod popped is the
	// most important of all pending ones (PR-3), not of those queued so far.
	if !cache.WaitForCacheSync(ctx.Done(), podsReg.HasSynced, nodesReg.HasSynced) {
		return nil
	}
	s.log.Info("scheduler started", "scheduler_name", s.cfg.SchedulerName, "preemption", !s.cfg.DisablePreemption)
	for ctx.Err() == nil {
		s.ScheduleOne(ctx)
	}
	return nil
}

func (s *Scheduler) responsible(pod *corev1.Pod) bool {
	return pod.Spec.SchedulerName == "" || pod.Spec.SchedulerName == s.cfg.SchedulerName
}

func (s *Scheduler) onPod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	terminal := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
	switch {
	case pod.Spec.NodeName != "":
		s.queue.Delete(pod.UID)
		s.nominator.Delete(pod.UID)
		if terminal {
			// A finished pod holds nothing on its node.
			s.cache.RemovePod(pod.UID)
		} else {
			s.cache.SetPod(pod, pod.Spec.NodeName)
		}
	case pod.DeletionTimestamp != nil || terminal || !s.responsible(pod):
		s.queue.Delete(pod.UID)
		s.nominator.Delete(pod.UID)
	default:
		s.queue.AddOrUpdate(pod)
		node := pod.Status.NominatedNodeName
		if node == "" {
			// Nominations are this scheduler's to clear (clearLowerNominations,
			// binding): a version from before its own nominatedNodeName patch
			// must not drop the nomination.
			node = s.nominator.NodeOf(pod.UID)
		}
		s.nominator.Set(pod, node)
	}
}

func (s *Scheduler) onPodDelete(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	s.queue.Delete(pod.UID)
	s.nominator.Delete(pod.UID)
	s.cache.RemovePod(pod.UID)
}

func (s *Scheduler) onNode(obj any) {
	if node, ok := obj.(*corev1.Node); ok {
		s.cache.SetNode(node)
	}
}

func (s *Scheduler) onNodeDelete(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if node, ok := obj.(*corev1.Node); ok {
		s.cache.RemoveNode(node.Name)
	}
}

// ScheduleOne takes the next pod from the queue and tries to place it: bind
// it, or preempt for it and requeue it, or requeue it after back-off.
func (s *Scheduler) ScheduleOne(ctx context.Context) {
	qp, err := s.queue.Pop(ctx)
	if err != nil {
		return
	}
	pod := qp.Pod
	if _, counted := s.cache.PodNode(pod.UID); counted {
		s.queue.Done(pod.UID)
		return
	}
	if node := s.nominator.NodeOf(pod.UID); node != "" && pod.Status.NominatedNodeName != node {
		// The informer has not shown this scheduler's nomination yet; the
		// cycle must see it, or preemption would choose victims again while
		// the first ones are still terminating.
		pod = pod.DeepCopy()
		pod.Status.NominatedNodeName = node
	}
	s.cache.UpdateSnapshot(s.snapshot)
	s.fw.SetSnapshot(s.snapshot)
	state := framework.NewCycleState()
	res, err := s.algo.schedule(ctx, state, pod)
	if err != nil {
		s.handleFailure(ctx, state, pod, err)
		return
	}
	// Count the pod on its node before the binding lands, so the next cycle
	// sees the room as taken.
	s.cache.SetPod(pod, res.Node)
	if err := s.binder.bind(ctx, pod, res.Node); err != nil {
		s.cache.RemovePod(pod.UID)
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			// Bound already, being deleted, or gone: nothing left to do.
			s.log.Info("pod not bound", "pod", klogRef(pod), "node", res.Node, "err", err)
			s.queue.Done(pod.UID)
			return
		}
		s.log.Warn("binding failed", "pod", klogRef(pod), "node", res.Node, "err", err)
		s.queue.Requeue(pod.UID)
		return
	}
	s.queue.Done(pod.UID)
	s.nominator.Delete(pod.UID)
	s.log.Debug("pod bound", "pod", klogRef(pod), "node", res.Node,
		"evaluated_nodes", res.EvaluatedNodes, "feasible_nodes", res.FeasibleNodes)
	// A higher-priority pod took the node: lower-priority nominations there
	// are void and those pods may look elsewhere (PR-5).
	s.clearLowerNominations(ctx, pod, res.Node)
}

func (s *Scheduler) handleFailure(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, err error) {
	defer s.queue.Requeue(pod.UID)
	var fe *FitError
	if !errors.As(err, &fe) {
		s.log.Warn("scheduling failed", "pod", klogRef(pod), "err", err)
		return
	}
	msg := fe.Error()
	if s.fw.HasPostFilterPlugins() {
		res, st := s.fw.RunPostFilterPlugins(ctx, state, pod, fe.Statuses)
		if st.IsSuccess() && res != nil {
			s.preempt(ctx, pod, res)
			return
		}
		msg += "; " + st.Message()
	}
	s.log.Debug("pod unschedulable", "pod", klogRef(pod), "reason", msg)
	if err := s.binder.setUnschedulable(ctx, pod, msg, metav1.NewTime(s.cfg.Clock.Now())); err != nil && ctx.Err() == nil {
		s.log.Debug("writing unschedulable condition", "pod", klogRef(pod), "err", err)
	}
}

// preempt carries out a preemption decision: delete each victim gracefully
// and record an Event on it, nominate the node for the preemptor, and void
// lower-priority nominations to the same node.
func (s *Scheduler) preempt(ctx context.Context, pod *corev1.Pod, res *framework.PostFilterResult) {
	node := res.NominatedNodeName
	prio := corev1helpers.PodPriority(pod)
	s.nominator.Set(pod, node)
	now := metav1.NewTime(s.cfg.Clock.Now())
	for _, v := range res.Victims {
		if corev1helpers.PodPriority(v) >= framework.PreemptableBelow(prio) {
			// Never reached: candidates hold only lower-priority pods (PR-10).
			s.log.Error("refusing to preempt a pod of equal or higher priority", "victim", klogRef(v), "preemptor", klogRef(pod))
			continue
		}
		if err := s.binder.evict(ctx, v); err != nil && !apierrors.IsNotFound(err) {
			s.log.Warn("preempting victim", "victim", klogRef(v), "err", err)
			continue
		}
		s.log.Info("preempted", "victim", klogRef(v), "victim_priority", corev1helpers.PodPriority(v),
			"preemptor", klogRef(pod), "preemptor_priority", prio, "node", node)
		if err := s.binder.recordPreempted(ctx, v, pod, node, now); err != nil {
			s.log.Warn("recording preemption event", "victim", klogRef(v), "err", err)
		}
	}
	if pod.Status.NominatedNodeName != node {
		if err := s.binder.setNominatedNode(ctx, pod, node); err != nil {
			s.log.Warn("nominating node", "pod", klogRef(pod), "node", node, "err", err)
		}
	}
	s.clearLowerNominations(ctx, pod, node)
}

func (s *Scheduler) clearLowerNominations(ctx context.Context, pod *corev1.Pod, node string) {
	prio := corev1helpers.PodPriority(pod)
	for _, np := range s.nominator.ForNode(node) {
		if np.Pod.UID == pod.UID || np.Priority >= prio {
			continue
		}
		s.nominator.Delete(np.Pod.UID)
		if err := s.binder.setNominatedNode(ctx, np.Pod, ""); err != nil && !apierrors.IsNotFound(err) {
			s.log.Warn("clearing nomination", "pod", klogRef(np.Pod), "node", node, "err", err)
		}
		s.queue.Activate(np.Pod.UID)
	}
}

func klogRef(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }
