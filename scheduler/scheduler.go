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
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/podsafe/podsafe/scheduler/framework"
	"github.com/podsafe/podsafe/scheduler/plugins/podtopologyspread"
)

// Scheduler places pending pods on nodes. Run it once.
type Scheduler struct {
	cfg       Config
	log       *slog.Logger
	client    kubernetes.Interface
	factory   informers.SharedInformerFactory
	podLister corelisters.PodLister
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
	s.podLister = s.factory.Core().V1().Pods().Lister()
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

func klogRef(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }
