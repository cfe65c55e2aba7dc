package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/internal/runset"
	"github.com/podsafe/podsafe/kubelet"
)

// KubeletOptions are the kubelet settings shared by every node of the
// cluster; zero values are the kubelet's defaults (see kubelet.Config).
type KubeletOptions struct {
	// EvictionHard and EvictionSoft are memory thresholds in bytes (zero:
	// none): above them a node reports MemoryPressure and evicts, at once
	// for hard, with EvictionMaxPodGracePeriod seconds for soft once usage
	// stayed above it for EvictionSoftGracePeriod (GP-7, PR-14).
	EvictionHard              int64
	EvictionSoft              int64
	EvictionSoftGracePeriod   time.Duration
	EvictionMaxPodGracePeriod int64
	// EvictionEvery is how often memory is looked at (cluster clock time).
	EvictionEvery time.Duration
	// EventRecordQPS and EventBurst bound each kubelet's Event writes
	// (cluster clock time; upstream's --event-qps and --event-burst,
	// defaults 50 and 100; a negative EventRecordQPS lifts the limit).
	EventRecordQPS float32
	EventBurst     int

	_ struct{}
}

// Apply sets o's settings in cfg.
func (o KubeletOptions) Apply(cfg *kubelet.Config) {
	cfg.EvictionHard = o.EvictionHard
	cfg.EvictionSoft = o.EvictionSoft
	cfg.EvictionSoftGracePeriod = o.EvictionSoftGracePeriod
	cfg.EvictionMaxPodGracePeriod = o.EvictionMaxPodGracePeriod
	cfg.EvictionEvery = o.EvictionEvery
	cfg.EventRecordQPS = o.EventRecordQPS
	cfg.EventBurst = o.EventBurst
}

// kubeletSet holds, per topology node, the simulated container runtime (owned
// by the cluster, so containers outlive a kubelet crash) and the running
// kubelet, if any.
type kubeletSet struct {
	mu       sync.Mutex
	runtimes map[string]*kubelet.SimRuntime
	running  runset.Set
	powerOff map[string]bool // nodes powered off (fence.go)
}

func (c *Cluster) kubeletSet() *kubeletSet {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.kubelets == nil {
		c.kubelets = &kubeletSet{runtimes: map[string]*kubelet.SimRuntime{}, powerOff: map[string]bool{}}
	}
	return c.kubelets
}

func (c *Cluster) nodeSpec(name string) (NodeSpec, bool) {
	for _, n := range c.cfg.Topology.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return NodeSpec{}, false
}

// Runtime returns node's simulated container runtime, creating it on first
// use. It writes to Config.Ledger and runs on the cluster clock.
func (c *Cluster) Runtime(node string) (*kubelet.SimRuntime, error) {
	if _, ok := c.nodeSpec(node); !ok {
		return nil, fmt.Errorf("%w: no node %q in the topology", ErrInvalidTopology, node)
	}
	ks := c.kubeletSet()
	ks.mu.Lock()
	defer ks.mu.Unlock()
	rt := ks.runtimes[node]
	if rt == nil {
		rt = kubelet.NewSimRuntime(node, c.clock, c.cfg.Ledger)
		// Containers write to the shared storage through their node's
		// links (fence.go).
		if _, err := c.Storage(); err != nil {
			return nil, err
		}
		rt.SetStorage(c.StorageClient(node))
		ks.runtimes[node] = rt
	}
	return rt, nil
}

// StartKubelet starts node's kubelet on network host node (so node
// partitions cut it) with its existing runtime: containers that ran on
// while it was stopped are adopted.
func (c *Cluster) StartKubelet(node string) error {
	_, err := c.startKubelet(node)
	return err
}

func (c *Cluster) startKubelet(node string) (*kubelet.Kubelet, error) {
	spec, ok := c.nodeSpec(node)
	if !ok {
		return nil, fmt.Errorf("%w: no node %q in the topology", ErrInvalidTopology, node)
	}
	rt, err := c.Runtime(node)
	if err != nil {
		return nil, err
	}
	cs, err := c.Clientset(apiserver.KubeletIdentity(node), ClientOptions{Host: node})
	if err != nil {
		return nil, err
	}
	kcfg := kubelet.Config{
		Client: cs, NodeName: node, Labels: spec.Labels, Taints: spec.Taints,
		Capacity: defaultResources(), Clock: c.ComponentClock(KubeletComponent(node)), Runtime: rt,
		Logger: c.log.With("component", "kubelet", "node", node),
	}
	c.cfg.Kubelet.Apply(&kcfg)
	k, err := kubelet.New(kcfg)
	if err != nil {
		return nil, fmt.Errorf("building kubelet of %s: %w", node, err)
	}
	ks := c.kubeletSet()
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if ks.powerOff[node] {
		return nil, fmt.Errorf("kubelet of %s: %w", node, ErrPoweredOff)
	}
	err = ks.running.Start(node, func(ctx context.Context) {
		if err := k.Run(ctx); err != nil {
			c.log.Warn("kubelet ended", "node", node, "err", err)
		}
	})
	if errors.Is(err, runset.ErrRunning) {
		return nil, fmt.Errorf("kubelet of %s: %w", node, ErrKubeletUp)
	}
	return k, err
}

// StopKubelet stops node's kubelet as a crash would: its containers keep
// running in the node's runtime. It waits until the kubelet has stopped.
func (c *Cluster) StopKubelet(node string) error {
	if err := c.kubeletSet().running.Stop(node, 0); errors.Is(err, runset.ErrNotRunning) {
		return fmt.Errorf("kubelet of %s: %w", node, ErrKubeletDown)
	}
	return nil
}

// KubeletRunning reports whether node's kubelet is running.
func (c *Cluster) KubeletRunning(node string) bool {
	return c.kubeletSet().running.Running(node)
}

// startKubelets starts a kubelet per topology node and waits until every
// node has registered itself Ready. Kubelets start in a rolling wave: at
// most kubeletStartWave of them are registering at once, and each one that
// has registered lets the next start. A real cluster's nodes do not all boot
// in the same second; 5,000 kubelets that do ask the control plane for some
// 30,000 lists, watches and writes together, and a control plane whose
// every goroutine is queued behind them misses its own heart-beats.
func (c *Cluster) startKubelets(ctx context.Context) error {
	nodes := c.cfg.Topology.Nodes
	slots := make(chan struct{}, kubeletStartWave)
	var registered atomic.Int64
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // before wg.Wait: the waiters of a failed start end
	for _, n := range nodes {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return fmt.Errorf("waiting for kubelets to register their nodes (%d of %d registered): %w", registered.Load(), len(nodes), ctx.Err())
		}
		k, err := c.startKubelet(n.Name)
		if err != nil {
			return err
		}
		wg.Go(func() {
			select {
			case <-k.Registered():
				registered.Add(1)
				<-slots
			case <-ctx.Done():
			}
		})
	}
	// The last wave.
	for range kubeletStartWave {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return fmt.Errorf("waiting for kubelets to register their nodes (%d of %d registered): %w", registered.Load(), len(nodes), ctx.Err())
		}
	}
	return nil
}

// kubeletStartWave bounds the kubelets registering at once as a cluster
// starts (startKubelets). A variable for tests only.
var kubeletStartWave = 100

// stopKubelets stops every kubelet and every runtime's simulation.
func (c *Cluster) stopKubelets() {
	c.mu.Lock()
	ks := c.kubelets
	c.mu.Unlock()
	if ks == nil {
		return
	}
	ks.running.StopAll()
	ks.mu.Lock()
	runtimes := ks.runtimes
	ks.mu.Unlock()
	for _, rt := range runtimes {
		rt.Close()
	}
}

// Errors of kubelet control.
var (
	// ErrKubeletUp: the node's kubelet is already running.
	ErrKubeletUp = errors.New("kubelet is already running")
	// ErrKubeletDown: the node's kubelet is not running.
	ErrKubeletDown = errors.New("kubelet is not running")
)
