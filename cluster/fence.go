package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/cluster/storage"
	"github.com/podsafe/podsafe/fencing"
)

// The shared storage server's place in the simulated network: pet
// containers on every node write to it through their node's links, so a
// partition between a node and StorageHost cuts their writes.
const (
	StorageHost = "storage"
	StoragePort = "2049"
)

// Errors of power control.
var (
	// ErrPoweredOff: the node is powered off; only PowerOn (an admin repair)
	// brings it back.
	ErrPoweredOff = errors.New("node is powered off")
)

// storageState is the cluster's storage server, started on first use.
type storageState struct {
	once sync.Once
	srv  *storage.Server
	ln   net.Listener
	err  error
}

// Storage returns the cluster's shared storage server (NFS-like, no locking
// of its own), starting it on StorageHost on first use. It records every
// write it receives in Config.Ledger.
func (c *Cluster) Storage() (*storage.Server, error) {
	st := &c.storage
	st.once.Do(func() {
		st.srv = storage.NewServer(c.cfg.Ledger, c.clock)
		st.srv.CompareTokens(c.cfg.StorageFencingTokens)
		st.ln, st.err = c.net.Listen(StorageHost + ":" + StoragePort)
		if st.err != nil {
			st.err = fmt.Errorf("starting the storage server: %w", st.err)
			return
		}
		go func() {
			if err := st.srv.Serve(st.ln); err != nil {
				c.log.Warn("storage server stopped", "err", err)
			}
		}()
	})
	if st.srv == nil && st.err == nil {
		return nil, errors.New("the storage server is closed with the cluster")
	}
	return st.srv, st.err
}

// StorageClient returns a client of the storage server whose requests come
// from network host from (a node's writes come from the node).
func (c *Cluster) StorageClient(from string) *storage.Client {
	tr := &http.Transport{
		DialContext:         c.net.DialContext(from),
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     30 * time.Second,
	}
	return &storage.Client{BaseURL: "http://" + StorageHost + ":" + StoragePort, HTTP: &http.Client{Transport: tr}}
}

// stopStorageOnClose closes the storage server's listener.
func (c *Cluster) stopStorageOnClose() {
	st := &c.storage
	st.once.Do(func() {}) // never start it now
	if st.ln != nil {
		_ = st.ln.Close()
	}
}

// PowerOff cuts node's power, as a power fence (or a lost machine) does:
// its kubelet stops, every container on it stops at once (the ledger shows
// power-off), and nothing runs there again until PowerOn. It returns once
// all of that is true, so it can confirm a fence.
func (c *Cluster) PowerOff(node string) error {
	rt, err := c.Runtime(node)
	if err != nil {
		return err
	}
	ks := c.kubeletSet()
	ks.mu.Lock()
	ks.powerOff[node] = true
	ks.mu.Unlock()
	if err := c.StopKubelet(node); err != nil && !errors.Is(err, ErrKubeletDown) {
		return err
	}
	rt.PowerOff()
	c.log.Info("node powered off", "node", node)
	return nil
}

// PowerOn restores node's power (an admin repair): the runtime starts empty,
// and, when the cluster runs kubelets, the node's kubelet starts again.
func (c *Cluster) PowerOn(node string) error {
	rt, err := c.Runtime(node)
	if err != nil {
		return err
	}
	ks := c.kubeletSet()
	ks.mu.Lock()
	wasOff := ks.powerOff[node]
	delete(ks.powerOff, node)
	ks.mu.Unlock()
	rt.PowerOn()
	c.log.Info("node powered on", "node", node)
	if wasOff && c.cfg.Kubelets {
		if err := c.StartKubelet(node); err != nil && !errors.Is(err, ErrKubeletUp) {
			return err
		}
	}
	return nil
}

// PoweredOff reports whether node is powered off.
func (c *Cluster) PoweredOff(node string) bool {
	ks := c.kubeletSet()
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return ks.powerOff[node]
}

// Fence agent names (see FenceAgent).
const (
	FenceAgentPower   = "power"
	FenceAgentStorage = "storage"
	FenceAgentNetwork = "network"
)

// FenceAgentNames lists the cluster's fence agents.
var FenceAgentNames = []string{FenceAgentStorage, FenceAgentPower, FenceAgentNetwork}

// ClusterFenceAgent is one of the cluster's fence agents.
type ClusterFenceAgent struct {
	name string
	c    *Cluster
}

var _ fencing.Agent = (*ClusterFenceAgent)(nil)

// FenceAgent returns the cluster's agent called name:
//
//   - storage: the storage server refuses every write from the node, asked
//     over the network from ControllerHost (a fencing controller cut from
//     the storage cannot confirm this fence);
//   - power: the node is powered off (PowerOff) until an admin repairs it;
//   - network: every link of the node is cut and stays cut through every
//     nemesis heal (simnet.FenceHost) until unfenced.
func (c *Cluster) FenceAgent(name string) (*ClusterFenceAgent, error) {
	switch name {
	case FenceAgentPower, FenceAgentStorage, FenceAgentNetwork:
		return &ClusterFenceAgent{name: name, c: c}, nil
	}
	return nil, fmt.Errorf("%w: no fence agent %q (known: %v)", ErrInvalidTopology, name, FenceAgentNames)
}

// Name implements fencing.Agent.
func (a *ClusterFenceAgent) Name() string { return a.name }

// Fence implements fencing.Agent.
func (a *ClusterFenceAgent) Fence(ctx context.Context, node string, token int64) error {
	if _, ok := a.c.nodeSpec(node); !ok {
		return fmt.Errorf("%s fence: %w: no node %q", a.name, ErrInvalidTopology, node)
	}
	switch a.name {
	case FenceAgentStorage:
		if _, err := a.c.Storage(); err != nil {
			return err
		}
		return a.c.StorageClient(ControllerHost).Fence(ctx, node, token)
	case FenceAgentPower:
		return a.c.PowerOff(node)
	case FenceAgentNetwork:
		a.c.net.FenceHost(node)
		return nil
	}
	return nil
}

// Unfence implements fencing.Agent.
func (a *ClusterFenceAgent) Unfence(ctx context.Context, node string) error {
	switch a.name {
	case FenceAgentStorage:
		if _, err := a.c.Storage(); err != nil {
			return err
		}
		return a.c.StorageClient(ControllerHost).Unfence(ctx, node)
	case FenceAgentPower:
		return a.c.PowerOn(node)
	case FenceAgentNetwork:
		a.c.net.UnfenceHost(node)
		return nil
	}
	return nil
}

// FencingOptions configures the fencing controller of a cluster (see
// Config.Fencing). Zero values mean the fencing package's defaults.
type FencingOptions struct {
	// Enabled starts the fencing controller with the other controllers.
	Enabled bool
	// Agents names the fence agents, run in order for every fence
	// (default storage, then power: PS-15 wants the storage firewalled
	// before anything else; see FenceAgent).
	Agents []string
	// Threshold is how long a node's lease may go unrenewed before the
	// node is a fencing candidate (scaled time; default 20 s).
	Threshold time.Duration
	// Budget is how many nodes may be fenced at once (default 1).
	Budget int
}

// DefaultFenceAgents are the agents a fencing controller uses unless
// FencingOptions.Agents says otherwise.
var DefaultFenceAgents = []string{FenceAgentStorage, FenceAgentPower}

// FenceAgents returns the agents FencingOptions.Agents names (default
// DefaultFenceAgents), in order.
func (c *Cluster) FenceAgents() ([]fencing.Agent, error) {
	names := c.cfg.Fencing.Agents
	if len(names) == 0 {
		names = DefaultFenceAgents
	}
	agents := make([]fencing.Agent, 0, len(names))
	for _, n := range names {
		a, err := c.FenceAgent(n)
		if err != nil {
			return nil, err
		}
		agents = append(agents, a)
	}
	return agents, nil
}

// Unfence is the admin action that brings a fenced node back: every agent
// unfences it (in reverse order: storage and network open again before the
// power comes back), then the fence condition, taint and annotations are
// cleared as admin (fencing.Unfence).
func (c *Cluster) Unfence(ctx context.Context, node string) error {
	agents, err := c.FenceAgents()
	if err != nil {
		return err
	}
	cs, err := c.Clientset(apiserver.IdentityAdmin, ClientOptions{Host: ControllerHost})
	if err != nil {
		return err
	}
	return fencing.Unfence(ctx, cs, agents, node)
}
