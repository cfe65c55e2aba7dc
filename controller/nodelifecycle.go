package controller

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/pingcap/failpoint"
	coordinationv1 "k8s.io/api/coordination/v1"
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

// Defaults of NodeLifecycleConfig, as Kubernetes sets them.
const (
	DefaultNodeMonitorGracePeriod       = 50 * time.Second
	DefaultNodeMonitorPeriod            = 5 * time.Second
	DefaultTolerationSeconds      int64 = 300
)

// NodeLeaseNamespace holds the node heart-beat leases, one per node, named
// after the node.
const NodeLeaseNamespace = corev1.NamespaceNodeLease

// ReasonNodeLeaseRenewed is the reason of the Ready=True condition the node
// lifecycle controller restores when a node it marked down renews its lease.
const ReasonNodeLeaseRenewed = "NodeLeaseRenewed"

// NodeLifecycleConfig configures a NodeLifecycle controller. Zero values mean
// defaults.
type NodeLifecycleConfig struct {
	// Client talks to the API as the node controller identity. Required.
	Client kubernetes.Interface
	// Clock measures lease age and toleration (nil: the real clock).
	Clock clock.WithTicker
	// Logger receives the controller's log (nil: discard).
	Logger *slog.Logger
	// NodeMonitorGracePeriod is how long a node may go without renewing its
	// lease before it is marked Ready=Unknown and tainted unreachable
	// (default 50 s).
	NodeMonitorGracePeriod time.Duration
	// NodeMonitorPeriod is how often every node is checked (default 5 s).
	NodeMonitorPeriod time.Duration
	// DefaultTolerationSeconds is how long a pod without a toleration for
	// the unreachable taint stays on a down node, as Kubernetes'
	// DefaultTolerationSeconds admission would give it (default 300).
	DefaultTolerationSeconds int64
	// FailPodsOnLostNode is the LC-4 policy: pods whose toleration expired
	// are set to phase Failed instead of being deleted. A terminal pod has no
	// grace period, so deleting it would remove the object while its
	// processes may still run on the unreachable node; the controller
	// therefore leaves failed pods in place and they are removed once the
	// node is back or deleted.
	FailPodsOnLostNode bool
	// Workers is the number of nodes synced concurrently (default 2).
	Workers int

	_ struct{}
}

func (c *NodeLifecycleConfig) setDefaults() {
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.NodeMonitorGracePeriod == 0 {
		c.NodeMonitorGracePeriod = DefaultNodeMonitorGracePeriod
	}
	if c.NodeMonitorPeriod == 0 {
		c.NodeMonitorPeriod = DefaultNodeMonitorPeriod
	}
	if c.DefaultTolerationSeconds == 0 {
		c.DefaultTolerationSeconds = DefaultTolerationSeconds
	}
	if c.Workers == 0 {
		c.Workers = 2
	}
}

// Validate reports the first unusable field, after defaults are applied.
func (c NodeLifecycleConfig) Validate() error {
	c.setDefaults()
	switch {
	case c.Client == nil:
		return fmt.Errorf("%w: node lifecycle: Client is nil; pass a clientset for the node controller identity", ErrInvalidConfig)
	case c.NodeMonitorGracePeriod < 0 || c.NodeMonitorPeriod < 0:
		return fmt.Errorf("%w: node lifecycle: NodeMonitorGracePeriod and NodeMonitorPeriod must be positive", ErrInvalidConfig)
	case c.NodeMonitorPeriod > c.NodeMonitorGracePeriod:
		return fmt.Errorf("%w: node lifecycle: NodeMonitorPeriod %v exceeds NodeMonitorGracePeriod %v; check more often than the grace period",
			ErrInvalidConfig, c.NodeMonitorPeriod, c.NodeMonitorGracePeriod)
	case c.DefaultTolerationSeconds < 0:
		return fmt.Errorf("%w: node lifecycle: DefaultTolerationSeconds must not be negative", ErrInvalidConfig)
	case c.Workers < 0:
		return fmt.Errorf("%w: node lifecycle: Workers must not be negative", ErrInvalidConfig)
	}
	return nil
}

// NodeLifecycle watches node leases. A node that has not renewed its lease
// for the grace period is marked Ready=Unknown and tainted unreachable
// (NoExecute); the pods on it whose toleration of that taint runs out get the
// NodeDown condition and a graceful delete, which the unreachable kubelet
// cannot finish, so the pod objects stay until the node comes back or is
// deleted (PS-9, PS-12, PS-13). It never force deletes.
type NodeLifecycle struct {
	cfg   NodeLifecycleConfig
	log   *slog.Logger
	queue *keyQueue

	factory      informers.SharedInformerFactory
	leaseFactory informers.SharedInformerFactory
	nodes        corelisters.NodeLister
	pods         cache.Indexer
	synced       []cache.InformerSynced

	mu     sync.Mutex
	probes map[string]leaseProbe // node -> last renewal seen
	events eventRecorder         // events.go
}

// leaseProbe is the last lease renewal the controller saw for a node, timed
// by the controller's own clock so that a node's clock skew cannot keep it
// alive or kill it.
type leaseProbe struct {
	renew    time.Time // the lease's spec.renewTime
	observed time.Time // controller clock when that renewal was seen
}

// podNodeIndex indexes pods by spec.nodeName.
const podNodeIndex = "spec.nodeName"

// NewNodeLifecycle builds the controller; Run starts it.
func NewNodeLifecycle(cfg NodeLifecycleConfig) (*NodeLifecycle, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	nl := &NodeLifecycle{
		cfg:          cfg,
		log:          cfg.Logger,
		factory:      informers.NewSharedInformerFactory(cfg.Client, 0),
		leaseFactory: informers.NewSharedInformerFactoryWithOptions(cfg.Client, 0, informers.WithNamespace(NodeLeaseNamespace)),
		probes:       map[string]leaseProbe{},
	}
	nl.queue = newKeyQueue("node-lifecycle", cfg.Clock, cfg.Logger, nl.syncNode)

	nodeInf := nl.factory.Core().V1().Nodes()
	podInf := nl.factory.Core().V1().Pods().Informer()
	leaseInf := nl.leaseFactory.Coordination().V1().Leases().Informer()
	if err := podInf.AddIndexers(cache.Indexers{podNodeIndex: indexPodByNode}); err != nil {
		return nil, fmt.Errorf("indexing pods by node: %w", err)
	}
	nl.nodes = nodeInf.Lister()
	nl.pods = podInf.GetIndexer()
	nl.synced = []cache.InformerSynced{nodeInf.Informer().HasSynced, podInf.HasSynced, leaseInf.HasSynced}

	if err := addHandler(nodeInf.Informer(), nl.queue.handlerFuncs()); err != nil {
		return nil, err
	}
	if err := addHandler(leaseInf, cache.ResourceEventHandlerFuncs{
		AddFunc:    nl.leaseChanged,
		UpdateFunc: func(_, obj any) { nl.leaseChanged(obj) },
	}); err != nil {
		return nil, err
	}
	// A pod landing on a node already down must be considered for eviction.
	if err := addHandler(podInf, cache.ResourceEventHandlerFuncs{
		AddFunc: nl.podChanged,
		UpdateFunc: func(old, obj any) {
			if podFromObj(old).Spec.NodeName != podFromObj(obj).Spec.NodeName {
				nl.podChanged(obj)
			}
		},
	}); err != nil {
		return nil, err
	}
	return nl, nil
}

// Run runs the controller until ctx ends.
func (nl *NodeLifecycle) Run(ctx context.Context) error {
	nl.events.start(ctx, nl.cfg.Client, nl.cfg.Clock)
	nl.factory.Start(ctx.Done())
	nl.leaseFactory.Start(ctx.Done())
	defer nl.factory.Shutdown()
	defer nl.leaseFactory.Shutdown()
	if err := waitForSync(ctx, "node lifecycle", nl.synced...); err != nil {
		return err
	}
	nl.log.Info("node lifecycle controller started", "grace", nl.cfg.NodeMonitorGracePeriod,
		"toleration_seconds", nl.cfg.DefaultTolerationSeconds, "fail_pods", nl.cfg.FailPodsOnLostNode)
	go nl.monitor(ctx)
	nl.queue.run(ctx, nl.cfg.Workers)
	return nil
}

// monitor queues every node each NodeMonitorPeriod, so a node whose lease
// silently stopped changing is noticed.
func (nl *NodeLifecycle) monitor(ctx context.Context) {
	t := nl.cfg.Clock.NewTicker(nl.cfg.NodeMonitorPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		nodes, err := nl.nodes.List(everything)
		if err != nil {
			continue
		}
		for _, n := range nodes {
			nl.queue.add(n.Name)
		}
	}
}

func (nl *NodeLifecycle) leaseChanged(obj any) {
	l, ok := obj.(*coordinationv1.Lease)
	if !ok || l.Spec.RenewTime == nil {
		return
	}
	renew := l.Spec.RenewTime.Time
	nl.mu.Lock()
	p, seen := nl.probes[l.Name]
	renewed := !seen || !p.renew.Equal(renew)
	if renewed {
		nl.probes[l.Name] = leaseProbe{renew: renew, observed: nl.cfg.Clock.Now()}
	}
	nl.mu.Unlock()
	if renewed && seen {
		nl.queue.add(l.Name)
	}
}

func (nl *NodeLifecycle) podChanged(obj any) {
	if p := podFromObj(obj); p != nil && p.Spec.NodeName != "" {
		nl.queue.add(p.Spec.NodeName)
	}
}

// leaseAge is how long ago, on the controller's clock, node's lease was last
// seen renewed. A node whose lease was never seen ages from the first time
// the controller saw the node, so a restarted controller gives every node a
// full grace period.
func (nl *NodeLifecycle) leaseAge(node string) time.Duration {
	now := nl.cfg.Clock.Now()
	nl.mu.Lock()
	defer nl.mu.Unlock()
	p, ok := nl.probes[node]
	if !ok {
		p = leaseProbe{observed: now}
		nl.probes[node] = p
	}
	return now.Sub(p.observed)
}

// syncNode brings one node's Ready condition, taint and pods in line with
// its lease.
func (nl *NodeLifecycle) syncNode(ctx context.Context, name string) error {
	node, err := nl.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		nl.mu.Lock()
		delete(nl.probes, name)
		nl.mu.Unlock()
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading node %s: %w", name, err)
	}
	age := nl.leaseAge(name)
	grace := nl.cfg.NodeMonitorGracePeriod
	if age <= grace {
		nl.queue.addAfter(name, grace-age+time.Millisecond)
		return nl.markUp(ctx, node)
	}
	if err := nl.markDown(ctx, node, age); err != nil {
		return err
	}
	return nl.evictPods(ctx, name)
}

// markDown sets Ready=Unknown (first: the API lets the node controller write
// pod status only while the node is not Ready) and then the taint.
func (nl *NodeLifecycle) markDown(ctx context.Context, node *corev1.Node, age time.Duration) error {
	now := metav1.NewTime(nl.cfg.Clock.Now())
	if c := nodeCondition(node, corev1.NodeReady); c == nil || c.Status != corev1.ConditionUnknown {
		n := node.DeepCopy()
		setNodeCondition(n, corev1.NodeCondition{
			Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: ReasonNodeDown,
			Message:            fmt.Sprintf("kubelet stopped renewing its lease (last seen %v ago)", age.Round(time.Second)),
			LastTransitionTime: now,
		})
		updated, err := nl.cfg.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("marking node %s Ready=Unknown: %w", node.Name, err)
		}
		node = updated
		nl.nodeStatusEvent(node.Name, EventNodeNotReady)
		nl.log.Warn("node down", "node", node.Name, "lease_age", age)
	}
	if unreachableTaint(node) == nil {
		n := node.DeepCopy()
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{
			Key: TaintUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: &now,
		})
		if _, err := nl.cfg.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("tainting node %s unreachable: %w", node.Name, err)
		}
	}
	return nil
}

// markUp removes the taint and restores Ready=True on a node this controller
// marked down whose lease is fresh again.
func (nl *NodeLifecycle) markUp(ctx context.Context, node *corev1.Node) error {
	if unreachableTaint(node) != nil {
		n := node.DeepCopy()
		var kept []corev1.Taint
		for _, t := range n.Spec.Taints {
			if !(t.Key == TaintUnreachable && t.Effect == corev1.TaintEffectNoExecute) {
				kept = append(kept, t)
			}
		}
		n.Spec.Taints = kept
		updated, err := nl.cfg.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("removing unreachable taint of node %s: %w", node.Name, err)
		}
		node = updated
		nl.log.Info("node back", "node", node.Name)
	}
	if c := nodeCondition(node, corev1.NodeReady); c != nil && c.Status == corev1.ConditionUnknown && c.Reason == ReasonNodeDown {
		n := node.DeepCopy()
		setNodeCondition(n, corev1.NodeCondition{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: ReasonNodeLeaseRenewed,
			Message:            "kubelet renews its lease again",
			LastTransitionTime: metav1.NewTime(nl.cfg.Clock.Now()),
		})
		if _, err := nl.cfg.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("marking node %s Ready again: %w", node.Name, err)
		}
		nl.nodeStatusEvent(node.Name, EventNodeReady)
	}
	return nil
}

// evictPods gives every pod on a tainted node whose toleration ran out the
// NodeDown condition and a graceful delete, and requeues the node for the
// earliest toleration still running.
func (nl *NodeLifecycle) evictPods(ctx context.Context, nodeName string) error {
	node, err := nl.nodes.Get(nodeName)
	if err != nil {
		return fmt.Errorf("reading node %s: %w", nodeName, err)
	}
	taint := unreachableTaint(node)
	if taint == nil || taint.TimeAdded == nil {
		return nil // the taint update is still on its way to the informer
	}
	objs, err := nl.pods.ByIndex(podNodeIndex, nodeName)
	if err != nil {
		return fmt.Errorf("listing pods of node %s: %w", nodeName, err)
	}
	now := nl.cfg.Clock.Now()
	force := false
	// Failpoint nodeControllerForceDeletes is a PLANTED BUG for the bug zoo,
	// inert unless a scenario switches it on: the pods of the down node,
	// terminating ones included, are force deleted (grace 0) instead of
	// deleted gracefully, so their replacements may start while they still
	// run there (breaks PS-9, PS-11).
	failpoint.InjectContext(nl.queue.fp, "nodeControllerForceDeletes", func() { force = true })
	var next time.Duration
	var errs []error
	for _, obj := range objs {
		pod := obj.(*corev1.Pod)
		if podTerminal(pod) || (podTerminating(pod) && !force) {
			continue
		}
		tol, forever := tolerationFor(pod, taint, nl.cfg.DefaultTolerationSeconds)
		if forever {
			continue
		}
		if wait := taint.TimeAdded.Add(tol).Sub(now); wait > 0 {
			if next == 0 || wait < next {
				next = wait
			}
			continue
		}
		if err := nl.evict(ctx, pod, force); err != nil {
			errs = append(errs, err)
		}
	}
	if next > 0 {
		nl.queue.addAfter(nodeName, next+time.Millisecond)
	}
	if len(errs) > 0 {
		return fmt.Errorf("evicting pods of node %s: %w", nodeName, errs[0])
	}
	return nil
}

// evict marks pod NodeDown (and Failed under the LC-4 policy) and, unless it
// was failed, deletes it gracefully with its own grace period; force (only
// ever set by a planted bug) deletes it with grace 0 instead.
func (nl *NodeLifecycle) evict(ctx context.Context, pod *corev1.Pod, force bool) error {
	p := pod.DeepCopy()
	setPodCondition(p, corev1.PodCondition{
		Type: PodConditionNodeDown, Status: corev1.ConditionTrue, Reason: ReasonNodeDown,
		Message:            fmt.Sprintf("node %s stopped renewing its lease; the pod is terminated because of a node partition", pod.Spec.NodeName),
		LastTransitionTime: metav1.NewTime(nl.cfg.Clock.Now()),
	})
	if nl.cfg.FailPodsOnLostNode {
		p.Status.Phase = corev1.PodFailed
		p.Status.Reason = "NodeLost"
		p.Status.Message = fmt.Sprintf("node %s which was running the pod is unresponsive", pod.Spec.NodeName)
	}
	_, err := nl.cfg.Client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsForbidden(err):
		// The node is Ready again: nothing to evict.
		nl.log.Info("pod status refused, node is back", "pod", pod.Namespace+"/"+pod.Name, "err", err)
		return nil
	case err != nil:
		return fmt.Errorf("marking pod %s/%s NodeDown: %w", pod.Namespace, pod.Name, err)
	}
	if nl.cfg.FailPodsOnLostNode {
		nl.log.Warn("pod failed, node lost", "pod", pod.Namespace+"/"+pod.Name, "node", pod.Spec.NodeName)
		return nil
	}
	opts := preconditionUID(p.UID)
	if force {
		opts.GracePeriodSeconds = ptr.To[int64](0)
	}
	nl.evictionEvent(p)
	err = nl.cfg.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, opts)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting pod %s/%s of down node %s: %w", pod.Namespace, pod.Name, pod.Spec.NodeName, err)
	}
	nl.log.Warn("pod evicted, node down", "pod", pod.Namespace+"/"+pod.Name, "node", pod.Spec.NodeName)
	return nil
}

// tolerationFor returns how long pod tolerates taint, or forever. A pod with
// no matching toleration gets def seconds, as Kubernetes' admission adds.
func tolerationFor(pod *corev1.Pod, taint *corev1.Taint, def int64) (d time.Duration, forever bool) {
	matched := false
	var least int64
	for _, t := range pod.Spec.Tolerations {
		if !toleratesTaint(t, taint) {
			continue
		}
		if t.TolerationSeconds == nil {
			return 0, true
		}
		s := max(*t.TolerationSeconds, 0)
		if !matched || s < least {
			least = s
		}
		matched = true
	}
	if !matched {
		least = def
	}
	return time.Duration(least) * time.Second, false
}

// toleratesTaint reports whether t matches taint by key, value and effect.
func toleratesTaint(t corev1.Toleration, taint *corev1.Taint) bool {
	if t.Effect != "" && t.Effect != taint.Effect {
		return false
	}
	if t.Key == "" {
		return t.Operator == corev1.TolerationOpExists
	}
	if t.Key != taint.Key {
		return false
	}
	switch t.Operator {
	case corev1.TolerationOpExists:
		return true
	case corev1.TolerationOpEqual, "":
		return t.Value == taint.Value
	}
	return false
}

// unreachableTaint returns node's unreachable NoExecute taint, or nil.
func unreachableTaint(node *corev1.Node) *corev1.Taint {
	for i := range node.Spec.Taints {
		t := &node.Spec.Taints[i]
		if t.Key == TaintUnreachable && t.Effect == corev1.TaintEffectNoExecute {
			return t
		}
	}
	return nil
}

// setNodeCondition replaces or appends c, keeping the heart-beat time.
func setNodeCondition(n *corev1.Node, c corev1.NodeCondition) {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == c.Type {
			c.LastHeartbeatTime = n.Status.Conditions[i].LastHeartbeatTime
			n.Status.Conditions[i] = c
			return
		}
	}
	n.Status.Conditions = append(n.Status.Conditions, c)
}

// setPodCondition replaces or appends c.
func setPodCondition(p *corev1.Pod, c corev1.PodCondition) {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == c.Type {
			p.Status.Conditions[i] = c
			return
		}
	}
	p.Status.Conditions = append(p.Status.Conditions, c)
}

// indexPodByNode is the podNodeIndex index function.
func indexPodByNode(obj any) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Spec.NodeName == "" {
		return nil, nil
	}
	return []string{p.Spec.NodeName}, nil
}
