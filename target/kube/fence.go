package kube

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/podsafe/podsafe/fencing"
	"github.com/podsafe/podsafe/target"
)

// podsafe's fencing controller on the kube target: an ordinary client of the
// real API servers (user podsafe:fencing), run in the harness on a host of
// its own, with fence agents that act on what podsafe owns there — its
// nodes. The real control plane knows nothing of it: it sees Node status
// conditions, taints and force deletions from one more client, as it would
// from any out-of-tree remediation controller.

// Fence agents of the kube target.
const (
	// FenceAgentPower powers the node off (PowerOff): its kubelet stops and
	// every container on it dies at once, as a BMC's power-off would.
	FenceAgentPower = "power"
	// FenceAgentNetwork cuts every link of the node's host (nftables drops)
	// until unfenced; its containers run on, cut off. Needs namespaces.
	FenceAgentNetwork = "network"
	// FenceAgentStorage refuses the node's writes at podsafe's storage
	// server (the storage firewall of PS-14) until unfenced; needs
	// StartStorage.
	FenceAgentStorage = "storage"
)

// FenceAgentNames are the kube target's fence agents.
var FenceAgentNames = []string{FenceAgentPower, FenceAgentNetwork, FenceAgentStorage}

// DefaultFenceAgents are the agents used when FencingOptions.Agents is empty.
var DefaultFenceAgents = []string{FenceAgentPower}

// FencingComponent is the component name of podsafe's fencing controller,
// also its host.
const FencingComponent = "fencing-controller"

// DefaultFenceThreshold is how long a node's lease may go unrenewed before
// the fencing controller fences it: longer than the node lease (10 s by
// default), so a node is NotReady before it is fenced.
const DefaultFenceThreshold = 15 * time.Second

// FencingOptions configure podsafe's fencing controller on the cluster.
type FencingOptions struct {
	// Agents in order (default DefaultFenceAgents), from FenceAgentNames.
	Agents []string
	// Threshold is how long a node's lease may go unrenewed before the
	// node is a candidate (wall time; default DefaultFenceThreshold).
	Threshold time.Duration
	// Budget is how many nodes may be fenced at once (default 1).
	Budget int
	// WrapTransport, when set, wraps the controller's HTTP transport; it is
	// given the podsafe identity of the fencing controller, so its calls
	// are recorded with it.
	WrapTransport func(identity string) func(http.RoundTripper) http.RoundTripper
	// Identity is the podsafe identity WrapTransport is given.
	Identity string
}

// validate checks the agent names.
func (o FencingOptions) validate() error {
	seen := map[string]bool{}
	for _, a := range o.Agents {
		if !slices.Contains(FenceAgentNames, a) {
			return fmt.Errorf("%w: fence agent %q: the kube target has %v", ErrInvalidConfig, a, FenceAgentNames)
		}
		if seen[a] {
			return fmt.Errorf("%w: fence agent %q named twice", ErrInvalidConfig, a)
		}
		seen[a] = true
	}
	if o.Threshold < 0 || o.Budget < 0 {
		return fmt.Errorf("%w: fencing threshold %s and budget %d must not be negative", ErrInvalidConfig, o.Threshold, o.Budget)
	}
	return nil
}

// fenceKey names one agent's fence of one node.
type fenceKey struct{ node, agent string }

// fenceAgent is one of the cluster's fence agents.
type fenceAgent struct {
	name string
	c    *Cluster
}

var _ fencing.Agent = (*fenceAgent)(nil)

// FenceAgent returns the cluster's fence agent called name (FenceAgentNames).
func (c *Cluster) FenceAgent(name string) (fencing.Agent, error) {
	if !slices.Contains(FenceAgentNames, name) {
		return nil, fmt.Errorf("%w: no fence agent %q on the kube target (known: %v)", ErrInvalidConfig, name, FenceAgentNames)
	}
	if name == FenceAgentNetwork && (c.net == nil || !c.net.canCut()) {
		return nil, fmt.Errorf("%w: the network fence agent cuts links: %s", ErrInvalidConfig, c.why)
	}
	if name == FenceAgentStorage {
		if _, err := c.Storage(); err != nil {
			return nil, fmt.Errorf("%w: the storage fence agent fences at podsafe's storage server: %w", ErrInvalidConfig, err)
		}
	}
	return &fenceAgent{name: name, c: c}, nil
}

func (a *fenceAgent) Name() string { return a.name }

// Fence powers the node off or cuts its links, and returns once that is
// true (the runtime reports every container stopped; the rules are in
// place). It is idempotent.
func (a *fenceAgent) Fence(ctx context.Context, node string, token int64) error {
	kl, err := a.c.kubeletsOf(node)
	if err != nil {
		return fmt.Errorf("%s fence of %s: %w", a.name, node, err)
	}
	switch a.name {
	case FenceAgentPower:
		kl.mu.Lock()
		kl.fenced[fenceKey{node, a.name}] = true
		kl.mu.Unlock()
		return a.c.PowerOff(ctx, node)
	case FenceAgentNetwork:
		kl.mu.Lock()
		done := kl.fenceCuts[node] != nil
		kl.mu.Unlock()
		if done {
			return nil
		}
		heal, err := a.c.Cut(ctx, a.c.nodeLinks(node, true))
		if err != nil {
			return fmt.Errorf("network fence of %s: %w", node, err)
		}
		kl.mu.Lock()
		kl.fenceCuts[node] = heal
		kl.fenced[fenceKey{node, a.name}] = true
		kl.mu.Unlock()
		return nil
	case FenceAgentStorage:
		srv, err := a.c.Storage()
		if err != nil {
			return fmt.Errorf("storage fence of %s: %w", node, err)
		}
		srv.Fence(node, token)
		kl.mu.Lock()
		kl.fenced[fenceKey{node, a.name}] = true
		kl.mu.Unlock()
		return nil
	}
	return fmt.Errorf("fence agent %q: %w", a.name, target.ErrUnsupported)
}

// Unfence powers the node on again or heals its fence's cut.
func (a *fenceAgent) Unfence(ctx context.Context, node string) error {
	kl, err := a.c.kubeletsOf(node)
	if err != nil {
		return fmt.Errorf("%s unfence of %s: %w", a.name, node, err)
	}
	kl.mu.Lock()
	delete(kl.fenced, fenceKey{node, a.name})
	heal := kl.fenceCuts[node]
	if a.name == FenceAgentNetwork {
		delete(kl.fenceCuts, node)
	}
	kl.mu.Unlock()
	switch a.name {
	case FenceAgentPower:
		return a.c.PowerOn(ctx, node)
	case FenceAgentNetwork:
		if heal != nil {
			return heal()
		}
	case FenceAgentStorage:
		srv, err := a.c.Storage()
		if err != nil {
			return fmt.Errorf("storage unfence of %s: %w", node, err)
		}
		srv.Unfence(node)
	}
	return nil
}

// nodeLinks are both directions between node's host and every other
// component's host (other nodes too when withNodes).
func (c *Cluster) nodeLinks(node string, withNodes bool) []target.Link {
	host := NodeHost(node)
	var links []target.Link
	seen := map[string]bool{host: true}
	for _, comp := range c.Components() {
		if seen[comp.Host] || (comp.Role == target.RoleKubelet && !withNodes) {
			continue
		}
		seen[comp.Host] = true
		links = append(links, target.Link{From: host, To: comp.Host}, target.Link{From: comp.Host, To: host})
	}
	return links
}

// kubeletsOf returns the kubelets when node is one of the cluster's nodes.
func (c *Cluster) kubeletsOf(node string) (*kubelets, error) {
	c.mu.Lock()
	kl := c.kl
	c.mu.Unlock()
	if kl == nil {
		return nil, ErrNoNode
	}
	kl.mu.Lock()
	_, ok := kl.specs[node]
	kl.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNoNode, node)
	}
	return kl, nil
}

var (
	_ target.PowerSwitch = (*Cluster)(nil)
	_ target.NodeAdmin   = (*Cluster)(nil)
)

// PowerOff cuts node's power: a paused kubelet is released, the kubelet
// stops, and every container on the node stops at once (the ledger shows
// power-off). Nothing runs there again until PowerOn. It returns once all
// of that is true.
func (c *Cluster) PowerOff(ctx context.Context, node string) error {
	kl, err := c.kubeletsOf(node)
	if err != nil {
		return fmt.Errorf("power off %s: %w", node, err)
	}
	kl.mu.Lock()
	kl.powerOff[node] = true
	rt := kl.runtimes[node]
	kl.mu.Unlock()
	if c.KubeletPaused(node) {
		if err := c.ResumeKubelet(node); err != nil && !errors.Is(err, target.ErrNotPaused) {
			return fmt.Errorf("power off %s: releasing its paused kubelet: %w", node, err)
		}
	}
	if err := c.StopKubelet(node); err != nil && !errors.Is(err, ErrKubeletDown) {
		return fmt.Errorf("power off %s: %w", node, err)
	}
	rt.PowerOff()
	c.log.Info("node powered off", "node", node)
	return nil
}

// PowerOn restores node's power: the runtime starts empty and the kubelet
// starts again (re-registering its Node if it was deleted). A node still
// fenced by the power agent stays off: ErrFenced.
func (c *Cluster) PowerOn(_ context.Context, node string) error {
	kl, err := c.kubeletsOf(node)
	if err != nil {
		return fmt.Errorf("power on %s: %w", node, err)
	}
	kl.mu.Lock()
	if kl.fenced[fenceKey{node, FenceAgentPower}] {
		kl.mu.Unlock()
		return fmt.Errorf("power on %s: %w", node, ErrFenced)
	}
	wasOff := kl.powerOff[node]
	delete(kl.powerOff, node)
	rt := kl.runtimes[node]
	kl.mu.Unlock()
	rt.PowerOn()
	if !wasOff {
		return nil
	}
	c.log.Info("node powered on", "node", node)
	if err := c.StartKubelet(node); err != nil && !errors.Is(err, ErrKubeletUp) {
		return err
	}
	return nil
}

// PoweredOff reports whether node is powered off.
func (c *Cluster) PoweredOff(node string) bool {
	kl, err := c.kubeletsOf(node)
	if err != nil {
		return false
	}
	kl.mu.Lock()
	defer kl.mu.Unlock()
	return kl.powerOff[node]
}

// Fenced reports whether a fence agent has fenced node (and no admin has
// unfenced it since): a fault's heal must leave it as the fence left it.
func (c *Cluster) Fenced(node string) bool {
	kl, err := c.kubeletsOf(node)
	if err != nil {
		return false
	}
	kl.mu.Lock()
	defer kl.mu.Unlock()
	for _, a := range FenceAgentNames {
		if kl.fenced[fenceKey{node, a}] {
			return true
		}
	}
	return false
}

// DeleteNode deletes node's Node object as admin, from the harness's own
// address, which no fault cuts.
func (c *Cluster) DeleteNode(ctx context.Context, node string) error {
	cs, err := c.clientFor(AdminUser, "", 0)
	if err != nil {
		return err
	}
	return cs.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{})
}

// ErrFenced: the node is fenced; only Unfence (an admin action) brings it
// back.
var ErrFenced = fmt.Errorf("node is fenced: %w", target.ErrPoweredOff)

// fenceAgents returns the agents opts name (default DefaultFenceAgents).
func (c *Cluster) fenceAgents(opts FencingOptions) ([]fencing.Agent, error) {
	names := opts.Agents
	if len(names) == 0 {
		names = DefaultFenceAgents
	}
	out := make([]fencing.Agent, 0, len(names))
	for _, n := range names {
		a, err := c.FenceAgent(n)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// StartFencing gives the fencing controller its host and starts it, as
// user podsafe:fencing. Kill and Restart of FencingComponent crash and
// start it again (it resumes from what the API records).
func (c *Cluster) StartFencing(ctx context.Context, opts FencingOptions) error {
	if err := opts.validate(); err != nil {
		return err
	}
	if _, err := c.fenceAgents(opts); err != nil {
		return err
	}
	if c.fencingRun.Running(FencingComponent) {
		return fmt.Errorf("fencing controller: %w", target.ErrRunning)
	}
	c.mu.Lock()
	c.fencingOpts = &opts
	_, hasHost := c.hosts[FencingComponent]
	c.mu.Unlock()
	if !hasHost {
		if _, err := c.addHost(ctx, FencingComponent, target.RoleFencing, -1, ""); err != nil {
			return err
		}
	}
	return c.startFencing()
}

// startFencing starts the fencing controller with the options StartFencing
// was given.
func (c *Cluster) startFencing() error {
	c.mu.Lock()
	opts := c.fencingOpts
	c.mu.Unlock()
	if opts == nil {
		return fmt.Errorf("fencing controller: %w", ErrNoFencing)
	}
	agents, err := c.fenceAgents(*opts)
	if err != nil {
		return err
	}
	rc, err := c.RESTConfig(FencingUser, FencingComponent, 0)
	if err != nil {
		return err
	}
	if opts.WrapTransport != nil {
		rc.WrapTransport = opts.WrapTransport(opts.Identity)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("client of the fencing controller: %w", err)
	}
	threshold := opts.Threshold
	if threshold == 0 {
		threshold = DefaultFenceThreshold
	}
	ctl, err := fencing.New(fencing.Config{Client: cs, Agents: agents, Threshold: threshold, Budget: opts.Budget,
		Logger: c.log.With("component", FencingComponent)})
	if err != nil {
		return fmt.Errorf("building the fencing controller: %w", err)
	}
	err = c.fencingRun.Start(FencingComponent, func(ctx context.Context) {
		if err := ctl.Run(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("fencing controller ended", "err", err)
		}
	})
	if err != nil {
		return fmt.Errorf("fencing controller: %w", target.ErrRunning)
	}
	c.log.Info("fencing controller started", "agents", opts.Agents, "threshold", threshold)
	return nil
}

// stopFencing crashes the fencing controller (its work is abandoned).
func (c *Cluster) stopFencing() error {
	if err := c.fencingRun.Stop(FencingComponent, 10*time.Second); err != nil {
		return fmt.Errorf("fencing controller: %w", target.ErrNotRunning)
	}
	return nil
}

// Unfence is the admin action that brings a fenced node back: every agent
// of the fencing controller unfences it in reverse order, then the fence
// record on the Node is cleared as admin (fencing.Unfence).
func (c *Cluster) Unfence(ctx context.Context, node string) error {
	c.mu.Lock()
	opts := c.fencingOpts
	c.mu.Unlock()
	if opts == nil {
		return fmt.Errorf("unfence %s: %w", node, ErrNoFencing)
	}
	agents, err := c.fenceAgents(*opts)
	if err != nil {
		return err
	}
	cs, err := c.clientFor(AdminUser, "", 0)
	if err != nil {
		return err
	}
	return fencing.Unfence(ctx, cs, agents, node)
}

// ErrNoFencing: the cluster runs no fencing controller.
var ErrNoFencing = errors.New("no fencing controller on this cluster (StartFencing)")
