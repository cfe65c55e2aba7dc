package kube

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/cluster/scaledclock"
	"github.com/podsafe/podsafe/internal/runset"
	"github.com/podsafe/podsafe/kubelet"
	"github.com/podsafe/podsafe/target"
)

// KubeletOptions are what podsafe's kubelets on the cluster share.
type KubeletOptions struct {
	// Ledger receives what the simulated runtimes really ran.
	Ledger kubelet.Ledger
	// WrapTransport, when set, wraps each kubelet's HTTP transport; it is
	// given the podsafe identity ("kubelet:NODE"), so API calls are
	// recorded with it.
	WrapTransport func(identity string) func(http.RoundTripper) http.RoundTripper
	// Tuning are the settings the embedded cluster's kubelets take too
	// (eviction thresholds), in wall time here.
	Tuning cluster.KubeletOptions
	// PodList is the kubelets' pod list mode (kubelet.Config.PodList; ""
	// as the real kubelet of the control plane's version).
	PodList string
}

// kubelets are podsafe's node agents on the cluster: one simulated runtime
// per node (containers outlive a kubelet crash) and the running kubelet.
type kubelets struct {
	mu       sync.Mutex
	opts     KubeletOptions
	specs    map[string]NodeSpec
	runtimes map[string]*kubelet.SimRuntime
	// clocks are the kubelets' clocks: wall time, but each can be paused
	// with its kubelet (its containers keep the runtime's own clock).
	clocks  map[string]*scaledclock.Clock
	paused  map[string]func() error // heals of paused kubelets' holds
	running runset.Set
	// powerOff holds the nodes powered off (PowerOff); fenced the fences
	// in place; fenceCuts the heals of network fences.
	powerOff  map[string]bool
	fenced    map[fenceKey]bool
	fenceCuts map[string]func() error
}

// kubeletIdentity is the podsafe identity of node's kubelet, as the
// embedded cluster names it.
func kubeletIdentity(node string) string { return "kubelet:" + node }

// StartKubelets gives every node a host, starts its kubelet, and waits
// until every node is Ready.
func (c *Cluster) StartKubelets(ctx context.Context, nodes []NodeSpec, opts KubeletOptions) error {
	c.mu.Lock()
	if c.kl == nil {
		c.kl = &kubelets{opts: opts, specs: map[string]NodeSpec{}, runtimes: map[string]*kubelet.SimRuntime{},
			clocks: map[string]*scaledclock.Clock{}, paused: map[string]func() error{},
			powerOff: map[string]bool{}, fenced: map[fenceKey]bool{}, fenceCuts: map[string]func() error{}}
	}
	kl := c.kl
	c.mu.Unlock()
	if c.ext != nil {
		if err := c.registerExternal(ctx, nodes); err != nil {
			return err
		}
		nodes = slices.Clone(nodes)
		for i := range nodes {
			nodes[i] = externalSpec(nodes[i])
		}
	}
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name)
		if err := c.AddNode(ctx, n.Name); err != nil {
			return err
		}
		c.setZone(n.Name, n.Labels[cluster.LabelZone])
		// Its containers write their volumes to the storage server, when
		// there is one.
		rt := kubelet.NewSimRuntime(n.Name, nil, opts.Ledger)
		if sc := c.storageClient(n.Name); sc != nil {
			rt.SetStorage(sc)
		}
		kl.mu.Lock()
		kl.specs[n.Name] = n
		kl.runtimes[n.Name] = rt
		kl.clocks[n.Name] = scaledclock.New(1, time.Time{})
		kl.mu.Unlock()
		if err := c.StartKubelet(n.Name); err != nil {
			return err
		}
	}
	cs, err := c.clientFor(AdminUser, "", 0)
	if err != nil {
		return err
	}
	for {
		ready, err := readyNodes(ctx, cs, names)
		if err == nil && ready >= len(nodes) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d nodes to be Ready (%d are): %w", len(nodes), ready, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// readyNodes counts the Ready nodes among names.
func readyNodes(ctx context.Context, cs kubernetes.Interface, names []string) (int, error) {
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	ready := 0
	for _, n := range nodes.Items {
		if !slices.Contains(names, n.Name) {
			continue
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	return ready, nil
}

// StartKubelet starts node's kubelet with its existing runtime: containers
// that ran on while it was down are adopted.
func (c *Cluster) StartKubelet(node string) error {
	c.mu.Lock()
	kl := c.kl
	c.mu.Unlock()
	if kl == nil {
		return fmt.Errorf("kubelet of %s: %w", node, ErrNoNode)
	}
	kl.mu.Lock()
	spec, ok := kl.specs[node]
	rt, clk := kl.runtimes[node], kl.clocks[node]
	off := kl.powerOff[node]
	kl.mu.Unlock()
	if !ok {
		return fmt.Errorf("kubelet of %s: %w", node, ErrNoNode)
	}
	if off {
		return fmt.Errorf("kubelet of %s: %w", node, target.ErrPoweredOff)
	}
	if kl.running.Running(node) {
		return fmt.Errorf("kubelet of %s: %w", node, ErrKubeletUp)
	}
	prefer := len(spec.Name)
	if spec.APIServer != nil {
		prefer = *spec.APIServer
	}
	rc, err := c.RESTConfig(NodeUser(node), NodeHost(node), prefer)
	if err != nil {
		return err
	}
	if kl.opts.WrapTransport != nil {
		rc.WrapTransport = kl.opts.WrapTransport(kubeletIdentity(node))
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("client of the kubelet of %s: %w", node, err)
	}
	t := c.cfg.Timings
	kcfg := kubelet.Config{
		Client: cs, NodeName: node, Labels: spec.Labels, Taints: spec.Taints, Runtime: rt, Clock: clk,
		LeaseRenew: t.KubeletLeaseRenew.D(), LeaseDuration: t.KubeletLeaseDuration.D(), NodeStatusEvery: t.KubeletStatusEvery.D(),
		Logger:               c.log.With("component", "kubelet", "node", node),
		GetVolumeAttachments: true,
		// The real attach/detach controller attaches the volumes.
		CSIAttachments: true,
		PodList:        kl.opts.PodList,
		// The control plane's own version: the nodes are as new as it.
		Version: c.cfg.Binaries.Versions.Kubernetes,
	}
	kl.opts.Tuning.Apply(&kcfg)
	k, err := kubelet.New(kcfg)
	if err != nil {
		return fmt.Errorf("building the kubelet of %s: %w", node, err)
	}
	err = kl.running.Start(node, func(ctx context.Context) {
		if err := k.Run(ctx); err != nil {
			c.log.Warn("kubelet ended", "node", node, "err", err)
		}
	})
	if errors.Is(err, runset.ErrRunning) {
		return fmt.Errorf("kubelet of %s: %w", node, ErrKubeletUp)
	}
	return err
}

// StopKubelet stops node's kubelet as a crash would: its containers keep
// running in the node's runtime.
func (c *Cluster) StopKubelet(node string) error {
	c.mu.Lock()
	kl := c.kl
	c.mu.Unlock()
	if kl == nil {
		return fmt.Errorf("kubelet of %s: %w", node, ErrNoNode)
	}
	if err := kl.running.Stop(node, 0); errors.Is(err, runset.ErrNotRunning) {
		return fmt.Errorf("kubelet of %s: %w", node, ErrKubeletDown)
	}
	return nil
}

// KubeletRunning reports whether node's kubelet runs.
func (c *Cluster) KubeletRunning(node string) bool {
	c.mu.Lock()
	kl := c.kl
	c.mu.Unlock()
	if kl == nil {
		return false
	}
	return kl.running.Running(node)
}

// PauseKubelet stops node's kubelet as SIGSTOP would, in the harness: every
// packet between its host and any other is dropped and its clock stands
// still (no timer fires, so it kills no container at a grace period's end),
// until ResumeKubelet. Its containers run on. It needs the network.
func (c *Cluster) PauseKubelet(ctx context.Context, node string) error {
	c.mu.Lock()
	kl := c.kl
	c.mu.Unlock()
	if kl == nil || kl.clocks[node] == nil {
		return fmt.Errorf("pause kubelet of %s: %w", node, ErrNoNode)
	}
	if !c.KubeletRunning(node) {
		return fmt.Errorf("pause kubelet of %s: %w", node, ErrKubeletDown)
	}
	kl.mu.Lock()
	defer kl.mu.Unlock()
	if kl.paused[node] != nil {
		return fmt.Errorf("pause kubelet of %s: already paused", node)
	}
	heal, err := c.Cut(ctx, c.nodeLinks(node, false))
	if err != nil {
		return fmt.Errorf("pause kubelet of %s: %w", node, err)
	}
	kl.clocks[node].Pause()
	kl.paused[node] = heal
	return nil
}

// ResumeKubelet undoes PauseKubelet: the clock runs (what fell due fires at
// once) and the packets flow.
func (c *Cluster) ResumeKubelet(node string) error {
	c.mu.Lock()
	kl := c.kl
	c.mu.Unlock()
	if kl == nil {
		return fmt.Errorf("resume kubelet of %s: %w", node, ErrNoNode)
	}
	kl.mu.Lock()
	heal := kl.paused[node]
	delete(kl.paused, node)
	clk := kl.clocks[node]
	kl.mu.Unlock()
	if heal == nil {
		return fmt.Errorf("resume kubelet of %s: %w", node, target.ErrNotPaused)
	}
	clk.Resume()
	return heal()
}

// KubeletPaused reports whether node's kubelet is paused.
func (c *Cluster) KubeletPaused(node string) bool {
	c.mu.Lock()
	kl := c.kl
	c.mu.Unlock()
	if kl == nil {
		return false
	}
	kl.mu.Lock()
	defer kl.mu.Unlock()
	return kl.paused[node] != nil
}

// stopKubelets stops every kubelet and runtime.
func (c *Cluster) stopKubelets() {
	c.mu.Lock()
	kl := c.kl
	c.kl = nil
	c.mu.Unlock()
	if kl == nil {
		return
	}
	kl.mu.Lock()
	runtimes, clocks := kl.runtimes, kl.clocks
	kl.mu.Unlock()
	// A paused kubelet's timers must fire for it to see its context end.
	for _, clk := range clocks {
		clk.Resume()
	}
	kl.running.StopAll()
	for _, rt := range runtimes {
		rt.Close()
	}
}

// Errors of kubelet control.
var (
	ErrNoNode      = errors.New("no such node on the cluster")
	ErrKubeletUp   = fmt.Errorf("kubelet: %w", target.ErrRunning)
	ErrKubeletDown = fmt.Errorf("kubelet: %w", target.ErrNotRunning)
)
