// Package cluster assembles a podsafe control plane in one process: raft members
// with their API servers, registered nodes, one simulated network that carries
// every byte between them, and one scaled clock. It owns the start, crash and
// restart of every component, and hands out client configurations per identity.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/cluster/scaledclock"
	"github.com/podsafe/podsafe/cluster/simnet"
	"github.com/podsafe/podsafe/internal/runset"
	"github.com/podsafe/podsafe/kubelet"
	"github.com/podsafe/podsafe/raftstore"
)

// Ports every member listens on, inside the simulated network.
const (
	RaftPort    = "7000"
	ForwardPort = "7001"
	APIPort     = "6443"
)

// Config describes a cluster to build. Zero values mean defaults.
type Config struct {
	Topology Topology
	// Durable stores raft's log and snapshots under DataDir (one directory per
	// member); members can then be crashed and restarted.
	Durable bool
	DataDir string
	// TimeScale makes the cluster clock run this many times faster than wall
	// time (default 1).
	TimeScale float64
	// DetectTimeout is how long an established connection survives a cut link
	// before both ends see an error (default 2 s of wall time).
	DetectTimeout time.Duration
	// StaleReads plants a bug: every member serves reads from its own state
	// without asking the leader, so an isolated follower returns stale data.
	StaleReads bool
	// Logger receives every component's log (nil: discard).
	Logger *slog.Logger
	// Tokens maps identities to bearer tokens; missing identities get a random
	// token.
	Tokens map[string]string
	// Kubelets starts a kubelet agent per topology node, each with a
	// simulated container runtime the cluster owns; the kubelets register
	// their own Nodes.
	Kubelets bool
	// Ledger receives what the runtimes really ran (nil: discard).
	Ledger kubelet.Ledger
	// Kubelet holds the settings every kubelet the cluster starts shares,
	// such as its eviction thresholds.
	Kubelet KubeletOptions
	// Scheduler starts the scheduler once the nodes are registered (see
	// StartScheduler).
	Scheduler bool
	// Controllers starts the node lifecycle, pod GC, pet and ReplicaSet
	// controllers once the nodes and the scheduler are up (see
	// StartController).
	Controllers bool
	// WrapTransport, if set, wraps the HTTP transport of every client the
	// cluster hands out (kubelets, scheduler, controllers, RESTConfig), e.g.
	// to record each component's API calls with its identity.
	WrapTransport TransportWrapper
	// Fencing configures the fencing controller (off unless Enabled; it
	// then starts with the other controllers when Controllers is set).
	Fencing FencingOptions
	// Controller tunes the controllers (policies that are off by default).
	Controller ControllerOptions
	// DisablePreemption turns the scheduler's preemption off (PR-13).
	DisablePreemption bool
	// StorageFencingTokens makes the shared storage compare fencing
	// tokens (storage.Server.CompareTokens): a write whose attachment token
	// is below one it accepted for the volume is refused.
	StorageFencingTokens bool
	// BypassAuthority switches the API servers' authority rules (who may
	// force delete, PS-8..PS-10, PS-14) from refusing to logging: a planted
	// weakness, so that the bug zoo can show the checkers catch a
	// controller's force deletion on their own, with the defence in depth
	// out of the way.
	BypassAuthority bool
	// Raft are the raft timings and snapshot sizes of every member (zero
	// fields: raftstore's defaults).
	Raft RaftParams
	// WatchWindow is how many recent events each member's store keeps for
	// watches to resume from (raftstore.Config.WatchWindow; zero: its
	// default).
	WatchWindow int
	// OnSnapshot, if set, is told of every snapshot a member takes,
	// installs from the leader or restores from disk as it starts
	// (raftstore.Config.OnSnapshot), with the member's host name. It must
	// not block.
	OnSnapshot func(member string, e raftstore.SnapshotEvent)

	_ struct{}
}

// Identities of the components that talk to the API server.
var Identities = []string{
	apiserver.IdentityAdmin, apiserver.IdentityScheduler, apiserver.IdentityNodeController,
	apiserver.IdentityPodGC, apiserver.IdentityPetController, apiserver.IdentityReplicaSetController,
	apiserver.IdentityFencingController, apiserver.IdentityWorkload, apiserver.IdentityAttachDetachController,
	apiserver.IdentityDisruptionController, apiserver.IdentityDeploymentController,
	apiserver.IdentityGarbageCollector, apiserver.IdentityNamespaceController,
}

// Cluster is a running in-process control plane. Its methods are safe for
// concurrent use.
type Cluster struct {
	cfg    Config
	log    *slog.Logger
	net    *simnet.Network
	clock  *scaledclock.Clock
	tokens map[string]string // identity -> token

	mu      sync.Mutex
	members []*member
	closed  bool
	started bool // Start finished: planted bugs may now act

	kubelets *kubeletSet // guarded by mu; see kubelets.go

	// The state of the parts wired in their own files: clock views and
	// pauses (clocks.go, pause.go), controllers (controllers.go), the
	// storage server (fence.go), the scheduler (scheduler.go).
	comps       componentState
	controllers runset.Set
	storage     storageState
	schedMu     sync.Mutex    // serialises StartScheduler and StopScheduler
	sched       *schedulerRun // guarded by schedMu
}

// New validates cfg and builds the network and clock; Start brings the members up.
func New(cfg Config) (*Cluster, error) {
	if err := cfg.Topology.Validate(); err != nil {
		return nil, err
	}
	if cfg.TimeScale == 0 {
		cfg.TimeScale = 1
	}
	if cfg.TimeScale < 1 {
		return nil, fmt.Errorf("%w: time scale must be at least 1, got %g", ErrInvalidTopology, cfg.TimeScale)
	}
	if err := cfg.Raft.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidTopology, err)
	}
	if cfg.Durable && cfg.DataDir == "" {
		return nil, fmt.Errorf("%w: durable storage needs a data directory", ErrInvalidTopology)
	}
	if cfg.DetectTimeout == 0 {
		cfg.DetectTimeout = 2 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Cluster{
		cfg:    cfg,
		log:    log,
		net:    simnet.New(simnet.Options{DetectTimeout: cfg.DetectTimeout, Logger: log.With("component", "network")}),
		clock:  scaledclock.New(cfg.TimeScale, time.Now()),
		tokens: map[string]string{},
	}
	for id, tok := range cfg.Tokens {
		c.tokens[id] = tok
	}
	for _, id := range Identities {
		c.ensureToken(id)
	}
	for _, n := range cfg.Topology.Nodes {
		c.ensureToken(apiserver.KubeletIdentity(n.Name))
	}
	for i := 0; i < cfg.Topology.Members; i++ {
		c.members = append(c.members, &member{idx: i, host: MemberHost(i)})
	}
	return c, nil
}

func (c *Cluster) ensureToken(identity string) {
	if _, ok := c.tokens[identity]; !ok {
		c.tokens[identity] = randomToken()
	}
}

// Start opens every member, waits for a leader and registers the topology's
// nodes.
func (c *Cluster) Start(ctx context.Context) error {
	for _, m := range c.members {
		if err := c.startMember(m); err != nil {
			return errors.Join(fmt.Errorf("starting member %s: %w", m.host, err), c.Close())
		}
	}
	if err := c.WaitLeader(ctx); err != nil {
		return errors.Join(err, c.Close())
	}
	if err := c.createSystemNamespaces(ctx); err != nil {
		return errors.Join(err, c.Close())
	}
	register := c.registerNodes
	if c.cfg.Kubelets {
		register = c.startKubelets
	}
	if err := register(ctx); err != nil {
		return errors.Join(err, c.Close())
	}
	if err := c.startSchedulerIfEnabled(); err != nil {
		return errors.Join(err, c.Close())
	}
	if err := c.startControllersIfEnabled(); err != nil {
		return errors.Join(err, c.Close())
	}
	// Planted bugs switch on only now, so that the cluster itself starts
	// correctly and every misbehaviour happens under the workload.
	c.mu.Lock()
	c.started = true
	for _, m := range c.members {
		if m.store != nil {
			m.store.SetStaleReads(c.cfg.StaleReads)
		}
	}
	c.mu.Unlock()
	c.log.Info("cluster started", "members", len(c.members), "nodes", len(c.cfg.Topology.Nodes),
		"durable", c.cfg.Durable, "time_scale", c.cfg.TimeScale)
	return nil
}

// WaitLeader blocks until some running member knows a leader.
func (c *Cluster) WaitLeader(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if c.LeaderIndex() >= 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for a raft leader: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// LeaderIndex is the index of the member that is raft leader by its own
// account, or -1.
func (c *Cluster) LeaderIndex() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.members {
		if m.store != nil && m.store.IsLeader() {
			return m.idx
		}
	}
	return -1
}

// Members is the number of control-plane members.
func (c *Cluster) Members() int { return len(c.members) }

// Store returns member i's store, or nil while it is crashed.
func (c *Cluster) Store(i int) *raftstore.Store {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.members[i].store
}

// Network is the simulated network that carries all traffic.
func (c *Cluster) Network() *simnet.Network { return c.net }

// Clock is the cluster's scaled clock.
func (c *Cluster) Clock() *scaledclock.Clock { return c.clock }

// Config returns the configuration the cluster was built from.
func (c *Cluster) Config() Config { return c.cfg }

// Token returns the bearer token of identity ("" if it has none).
func (c *Cluster) Token(identity string) string { return c.tokens[identity] }

// MemberHosts lists the network hosts of the control-plane members.
func (c *Cluster) MemberHosts() []string {
	hosts := make([]string, len(c.members))
	for i := range c.members {
		hosts[i] = MemberHost(i)
	}
	return hosts
}

func (c *Cluster) raftMembers() []raftstore.Member {
	var ms []raftstore.Member
	for i := range c.members {
		h := MemberHost(i)
		ms = append(ms, raftstore.Member{ID: h, RaftAddr: h + ":" + RaftPort, ForwardAddr: h + ":" + ForwardPort})
	}
	return ms
}

// Close stops every member and the network.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	members := c.members
	c.mu.Unlock()
	c.stopControllersOnClose()
	c.stopSchedulerOnClose()
	c.stopKubelets()
	c.stopStorageOnClose()
	var errs []error
	for _, m := range members {
		if err := c.stopMember(m); err != nil && !errors.Is(err, ErrMemberDown) {
			errs = append(errs, err)
		}
	}
	errs = append(errs, c.net.Close())
	return errors.Join(errs...)
}

// SystemNamespaces are the namespaces a cluster starts with, as
// kube-apiserver creates them: default, kube-system, kube-public and
// kube-node-lease (the nodes' Leases).
var SystemNamespaces = []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease}

// createSystemNamespaces creates SystemNamespaces as admin, those a durable
// cluster already has left as they are.
func (c *Cluster) createSystemNamespaces(ctx context.Context) error {
	cs, err := c.Clientset(apiserver.IdentityAdmin, ClientOptions{})
	if err != nil {
		return err
	}
	for _, name := range SystemNamespaces {
		for {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := cs.CoreV1().Namespaces().Create(rctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			cancel()
			if err == nil || apierrors.IsAlreadyExists(err) {
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("creating namespace %s: %w", name, err)
			}
			time.Sleep(100 * time.Millisecond) // a leader change under way
		}
	}
	return nil
}

func (c *Cluster) registerNodes(ctx context.Context) error {
	for _, n := range c.cfg.Topology.Nodes {
		cs, err := c.Clientset(apiserver.KubeletIdentity(n.Name), ClientOptions{})
		if err != nil {
			return err
		}
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels},
			Spec:       corev1.NodeSpec{Taints: n.Taints},
		}
		created, err := retryCreateNode(ctx, cs, node)
		if err != nil {
			return fmt.Errorf("registering node %s: %w", n.Name, err)
		}
		now := metav1.NewTime(c.clock.Now())
		created.Status = corev1.NodeStatus{
			Capacity:    defaultResources(),
			Allocatable: defaultResources(),
			Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				Message: "registered by podsafe", LastHeartbeatTime: now, LastTransitionTime: now,
			}},
			Phase: corev1.NodeRunning,
		}
		if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("writing status of node %s: %w", n.Name, err)
		}
	}
	return nil
}

func retryCreateNode(ctx context.Context, cs kubernetes.Interface, node *corev1.Node) (*corev1.Node, error) {
	for {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		created, err := cs.CoreV1().Nodes().Create(rctx, node, metav1.CreateOptions{})
		cancel()
		if err == nil {
			return created, nil
		}
		if apierrors.IsAlreadyExists(err) {
			return cs.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		}
		if !apierrors.IsServiceUnavailable(err) && !apierrors.IsTimeout(err) && ctx.Err() == nil && !isTransient(err) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("creating node %s: %w (last error: %w)", node.Name, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func memberDataDir(base string, host string) string { return filepath.Join(base, host) }

func ensureDir(dir string) error { return os.MkdirAll(dir, 0o755) }

// httpServer builds the HTTP server of one member.
func httpServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
}
