// Package kubelet is podsafe's node agent: an ordinary client-go controller,
// identity kubelet:NODE, that registers its Node, renews its Lease, watches
// the pods bound to its node and runs each through the lifecycle of
// GUARANTEES.md (LC-*, PS-2..PS-8, GP-*) on a container Runtime. The runtime
// writes what really ran to a Ledger, the oracle the checkers trust.
//
//	rt := kubelet.NewSimRuntime("node-0", clk, ledger) // outlives the kubelet
//	k, err := kubelet.New(kubelet.Config{Client: cs, NodeName: "node-0", Runtime: rt, Clock: clk})
//	go k.Run(ctx) // cancel ctx to stop (a crash: containers keep running)
//
// Termination follows PS-4/LC-11 as GP-R settles it: preStop (only with grace
// > 0, abandoned at the grace deadline), TERM, KILL at max(grace deadline,
// TERM + 2 s), so a hanging hook gets TERM at the deadline and KILL 2 s later
// (LC-11's one 2 s extension);
// a shorter grace arriving mid-way shortens it, a longer one never lengthens
// it; once every container is confirmed dead the kubelet posts the final
// status and deletes the pod with grace 0 and a UID precondition (PS-8). A
// restarted kubelet restarts a termination from the beginning with the full
// grace period (PS-5, LC-12). A kubelet that cannot reach the API keeps its
// containers running; containers of a pod gone from the API are killed after
// Config.OrphanGrace (LC-13).
package kubelet

import (
	"context"
	"fmt"
	coordinationv1 "k8s.io/api/coordination/v1"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// Defaults of Config.
const (
	DefaultLeaseDuration   = 40 * time.Second
	DefaultLeaseRenew      = 10 * time.Second
	DefaultNodeStatusEvery = 60 * time.Second
	DefaultOrphanGrace     = 2 * time.Second
	DefaultRequestTimeout  = 10 * time.Second
	// DefaultEventRecordQPS and DefaultEventBurst are upstream's
	// eventRecordQPS and eventBurst: Event writes per second of clock time,
	// and the burst above it.
	DefaultEventRecordQPS = 50
	DefaultEventBurst     = 100
	// DefaultVersion is the kubelet version podsafe's nodes report unless
	// told otherwise: the Kubernetes release its client-go matches.
	DefaultVersion = "v1.37.2"
)

// Config configures one kubelet. Zero values mean defaults.
type Config struct {
	// Client talks to the API as kubelet:NodeName. Required.
	Client kubernetes.Interface
	// NodeName is the node this kubelet runs. Required.
	NodeName string
	Labels   map[string]string
	Taints   []corev1.Taint
	// Capacity of the node (default 8 CPUs, 32Gi memory, 110 pods).
	Capacity corev1.ResourceList
	// Clock is the (scaled) clock every duration is measured on; nil is the
	// real clock.
	Clock clock.WithTicker
	// Runtime runs the containers. Required; it outlives the kubelet.
	Runtime Runtime
	// Logger receives the kubelet's log (nil: discard).
	Logger *slog.Logger
	// LeaseDuration is the lease's leaseDurationSeconds (default 40 s);
	// LeaseRenew how often it is renewed (default 10 s); NodeStatusEvery how
	// often the Ready condition is re-posted (default 60 s). Clock time.
	LeaseDuration   time.Duration
	LeaseRenew      time.Duration
	NodeStatusEvery time.Duration
	// OrphanGrace is the short grace before KILL for containers of a pod
	// that vanished from the API (LC-13; default 2 s of clock time).
	OrphanGrace time.Duration
	// RequestTimeout bounds each API request in wall time (default 10 s).
	RequestTimeout time.Duration
	// EvictionHard and EvictionSoft are memory thresholds in bytes: when
	// the containers together use more, the node reports MemoryPressure and
	// one pod is evicted per EvictionEvery (default 10 s of clock time),
	// ranked by RankForEviction; hard eviction kills at once, soft eviction
	// with EvictionMaxPodGracePeriod seconds (GP-7), and only once usage
	// has stayed above EvictionSoft for EvictionSoftGracePeriod (clock
	// time; zero: at once). Each eviction waits at most
	// EvictionKillTimeout for the kill to be confirmed. Zero disables a
	// threshold; eviction needs a Runtime that is a MemoryReporter.
	EvictionHard              int64
	EvictionSoft              int64
	EvictionSoftGracePeriod   time.Duration
	EvictionMaxPodGracePeriod int64
	EvictionEvery             time.Duration
	// GetVolumeAttachments makes the kubelet get each VolumeAttachment it
	// needs by name when a pod's worker looks, instead of watching them
	// all: on a cluster with the Node authorizer a node may get the
	// attachments of its pods' volumes but not list them.
	GetVolumeAttachments bool
	// CSIAttachments: the pods' claims are bound to CSI persistent volumes
	// that Kubernetes' attach/detach controller attaches, one
	// VolumeAttachment per volume and node named by CSIAttachmentName (a
	// real control plane), instead of podsafe's one attachment per volume
	// named by VolumeID. The node is registered with
	// ControllerManagedAttachAnnotation and reports the volumes its pods use
	// in status.volumesInUse before their containers start, as the real
	// kubelet does.
	CSIAttachments bool
	// PodList is how the kubelet's pod reflector syncs: PodListRV0,
	// PodListWatchList, or "" (PodListAsVersion): as the real kubelet of
	// Version does (PodListModeFor).
	PodList string
	// EventRecordQPS bounds the kubelet's Event writes per second of clock
	// time, with bursts of EventBurst, as upstream's --event-qps and
	// --event-burst (defaults 50 and 100). Events beyond the limit wait in
	// the recorder's queue, which drops the newest when full, as
	// upstream's does. A negative EventRecordQPS lifts the limit (upstream's
	// 0).
	EventRecordQPS float32
	EventBurst     int
	// Version is the kubelet version the node reports
	// (status.nodeInfo.kubeletVersion; default DefaultVersion). On a real
	// control plane it is the control plane's, so version-skew rules hold.
	Version string

	_ struct{}
}

// Validate reports the first problem with c, naming the field.
func (c *Config) Validate() error {
	switch {
	case c.Client == nil:
		return fmt.Errorf("%w: Client is required", ErrInvalidConfig)
	case c.NodeName == "":
		return fmt.Errorf("%w: NodeName is required", ErrInvalidConfig)
	case ValidPodList(c.PodList) != nil:
		return ValidPodList(c.PodList)
	case c.Runtime == nil:
		return fmt.Errorf("%w: Runtime is required (NewSimRuntime for the in-process cluster)", ErrInvalidConfig)
	case c.LeaseDuration < 0 || c.LeaseRenew < 0 || c.NodeStatusEvery < 0 || c.OrphanGrace < 0 || c.RequestTimeout < 0 || c.EvictionEvery < 0 || c.EvictionSoftGracePeriod < 0:
		return fmt.Errorf("%w: durations must not be negative", ErrInvalidConfig)
	case c.EventBurst < 0:
		return fmt.Errorf("%w: EventBurst %d must not be negative", ErrInvalidConfig, c.EventBurst)
	case c.EvictionHard < 0 || c.EvictionSoft < 0 || c.EvictionMaxPodGracePeriod < 0:
		return fmt.Errorf("%w: eviction thresholds and EvictionMaxPodGracePeriod must not be negative", ErrInvalidConfig)
	case c.LeaseRenew > 0 && c.LeaseDuration > 0 && c.LeaseRenew >= c.LeaseDuration:
		return fmt.Errorf("%w: LeaseRenew %s must be shorter than LeaseDuration %s", ErrInvalidConfig, c.LeaseRenew, c.LeaseDuration)
	}
	return nil
}

func (c *Config) setDefaults() {
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Capacity == nil {
		c.Capacity = corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("8"),
			corev1.ResourceMemory: resource.MustParse("32Gi"),
			corev1.ResourcePods:   resource.MustParse("110"),
		}
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if c.Version == "" {
		c.Version = DefaultVersion
	}
	def(&c.LeaseDuration, DefaultLeaseDuration)
	def(&c.LeaseRenew, DefaultLeaseRenew)
	def(&c.NodeStatusEvery, DefaultNodeStatusEvery)
	def(&c.OrphanGrace, DefaultOrphanGrace)
	def(&c.RequestTimeout, DefaultRequestTimeout)
	def(&c.EvictionEvery, DefaultEvictionEvery)
	if c.EventRecordQPS == 0 {
		c.EventRecordQPS = DefaultEventRecordQPS
	}
	if c.EventBurst == 0 {
		c.EventBurst = DefaultEventBurst
	}
}

// Kubelet is one node agent. Run it once; stop it by cancelling Run's
// context.
type Kubelet struct {
	cfg   Config
	log   *slog.Logger
	clock clock.WithTicker
	rt    Runtime

	mu       sync.Mutex
	workers  map[types.UID]*podWorker
	finished map[types.UID]bool
	adopted  map[types.UID][]ContainerStatus
	wg       sync.WaitGroup
	ctx      context.Context
	mem      memoryPressure
	vaLister storagelisters.VolumeAttachmentLister // set in Run before any worker starts
	// inUse are the CSI volumes each pod's worker uses (CSIAttachments);
	// reportedInUse those the node's status last posted in use; statusKick
	// asks for the status to be posted now.
	inUse         map[types.UID][]string
	reportedInUse map[string]bool
	// csiResolved are each pod's claims resolved to their CSI volumes.
	csiResolved map[types.UID][]csiVolume
	statusKick  chan struct{}
	// lastLease is the node's Lease as runLease last wrote it (only its
	// goroutine uses it).
	lastLease *coordinationv1.Lease
	// registered is closed once the node's status was first posted
	// (Registered).
	registered     chan struct{}
	registeredOnce sync.Once
	events         kubeletEvents // events.go
}

// Registered returns a channel closed once this kubelet has first posted its
// node's status (the Node exists and says Ready): what a cluster starting
// thousands of kubelets waits for, without listing every Node again and
// again.
func (k *Kubelet) Registered() <-chan struct{} { return k.registered }

// New validates cfg and returns a kubelet ready to Run.
func New(cfg Config) (*Kubelet, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	return &Kubelet{
		cfg: cfg, log: cfg.Logger.With("component", "kubelet", "node", cfg.NodeName),
		clock: cfg.Clock, rt: cfg.Runtime,
		workers: map[types.UID]*podWorker{}, finished: map[types.UID]bool{},
		statusKick: make(chan struct{}, 1), registered: make(chan struct{}),
	}, nil
}

// Run registers the node, renews its lease and runs the pods bound to it
// until ctx ends. Stopping is a crash as far as containers go: they keep
// running in the runtime, and the next kubelet on this node adopts them. Run
// returns nil once every goroutine it started has ended.
func (k *Kubelet) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	existing, err := k.rt.List(ctx)
	if err != nil {
		return fmt.Errorf("listing runtime containers of %s: %w", k.cfg.NodeName, err)
	}
	k.mu.Lock()
	k.ctx = ctx
	k.adopted = map[types.UID][]ContainerStatus{}
	for _, c := range existing {
		uid := types.UID(c.UID)
		k.adopted[uid] = append(k.adopted[uid], c)
	}
	k.mu.Unlock()
	k.log.Info("kubelet starting", "containers", len(existing))

	k.goFunc(func() { k.runNode(ctx) })
	k.goFunc(func() { k.runLease(ctx) })
	k.goFunc(func() { k.runEviction(ctx) })

	mode := k.PodListMode()
	k.log.Info("pod reflector", "list", mode)
	inf := cache.NewSharedIndexInformer(newPodListWatch(k.cfg.Client, k.cfg.NodeName, mode), &corev1.Pod{}, 0, cache.Indexers{})
	// The kubelet never reads managedFields (its status writes are patches),
	// so its cache drops them, as kube-scheduler's and
	// kube-controller-manager's informers do: a pod's field sets are most
	// of its decoded size once a few managers have written it.
	if err := inf.SetTransform(stripManagedFields); err != nil {
		return fmt.Errorf("watching pods of %s: %w", k.cfg.NodeName, err)
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { k.podSeen(obj) },
		UpdateFunc: func(_, obj any) { k.podSeen(obj) },
		DeleteFunc: func(obj any) { k.podDeleted(obj) },
	})
	if err != nil {
		return fmt.Errorf("watching pods of %s: %w", k.cfg.NodeName, err)
	}
	// PS-15: containers of a pod with RWO volumes start only once the
	// volumes are attached to this node; every attachment change wakes the
	// workers to look again.
	var vaFactory informers.SharedInformerFactory
	if k.cfg.GetVolumeAttachments {
		k.vaLister = volumeAttachmentGetter{k}
	} else {
		vaFactory = informers.NewSharedInformerFactory(k.cfg.Client, 0)
		k.vaLister = &lazyAttachments{k: k, ctx: ctx, factory: vaFactory}
	}
	k.goFunc(func() { inf.RunWithContext(ctx) })
	k.goFunc(func() {
		// Every pod of the first list has reached podSeen once the handler
		// has synced: what is left in adopted has no pod in the API. The
		// wait is on the registration's channel, not a poll every 100 ms
		// (cache.WaitForCacheSync): thousands of kubelets wait at once.
		select {
		case <-reg.HasSyncedChecker().Done():
			k.killOrphans()
		case <-ctx.Done():
		}
	})
	<-ctx.Done()
	if vaFactory != nil {
		vaFactory.Shutdown()
	}
	k.wg.Wait()
	k.log.Info("kubelet stopped")
	return nil
}

// stripManagedFields is the pod informer's transform: the object without
// its managedFields.
func stripManagedFields(obj any) (any, error) {
	if p, ok := obj.(*corev1.Pod); ok {
		p.ManagedFields = nil
	}
	return obj, nil
}

func (k *Kubelet) goFunc(f func()) {
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		f()
	}()
}

// podSeen hands the newest version of a pod to its worker, starting one for
// a pod not seen before.
func (k *Kubelet) podSeen(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName != k.cfg.NodeName {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ctx == nil || k.ctx.Err() != nil || k.finished[pod.UID] {
		return
	}
	w := k.workers[pod.UID]
	if w == nil {
		w = newPodWorker(k, pod.UID, pod.Namespace, pod.Name, k.adopted[pod.UID])
		delete(k.adopted, pod.UID)
		k.workers[pod.UID] = w
		k.goFunc(func() { w.run(k.ctx) })
	}
	w.update(pod)
}

// podDeleted tells a pod's worker that the pod is gone from the API: either
// this kubelet finished its deletion, or it was force deleted (LC-13).
func (k *Kubelet) podDeleted(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	k.mu.Lock()
	w := k.workers[pod.UID]
	k.mu.Unlock()
	if w != nil {
		w.gone()
	}
}

// killOrphans starts workers, once the pod cache is synced, for containers
// whose pod is not in the API any more: they are killed after OrphanGrace.
// A kubelet that never syncs (partitioned) never kills anything.
func (k *Kubelet) killOrphans() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ctx.Err() != nil {
		return
	}
	for uid, cs := range k.adopted {
		if len(cs) == 0 || k.workers[uid] != nil {
			continue
		}
		w := newPodWorker(k, uid, cs[0].Namespace, cs[0].Pod, cs)
		w.orphan = true
		k.workers[uid] = w
		k.goFunc(func() { w.run(k.ctx) })
		w.gone()
	}
	k.adopted = map[types.UID][]ContainerStatus{}
}

// workerDone forgets a pod whose worker has finished for good.
func (k *Kubelet) workerDone(uid types.UID) {
	k.mu.Lock()
	delete(k.workers, uid)
	k.finished[uid] = true
	k.releaseInUse(uid)
	k.mu.Unlock()
}

// wakeAll makes every pod worker look at its pod again.
func (k *Kubelet) wakeAll() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, w := range k.workers {
		w.wake()
	}
}

// Pods is the number of pods the kubelet is working on.
func (k *Kubelet) Pods() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.workers)
}

// requestCtx bounds one API request.
func (k *Kubelet) requestCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, k.cfg.RequestTimeout)
}
