// Package kube is podsafe's second system under test: a real Kubernetes
// control plane — etcd members, kube-apiservers, kube-schedulers and
// kube-controller-managers built from upstream modules (package binaries) —
// run as OS processes, each on a host of its own (a network namespace on a
// bridge when podsafe is root, a loopback address otherwise), with TLS, a
// static token per identity, the Node authorizer, RBAC and NodeRestriction.
// podsafe's own kubelets (simulated containers, the ledger) run inside the
// harness as the cluster's nodes, each with an address of its own, under the
// identities system:node:NAME.
//
// A Cluster is a target.Target: its processes can be killed with SIGKILL
// and restarted on their data, paused with SIGSTOP, and their links cut with
// nftables drops.
package kube

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsafe/podsafe/internal/runset"
	"github.com/podsafe/podsafe/target"
	"github.com/podsafe/podsafe/target/kube/netns"
	"github.com/podsafe/podsafe/target/kube/record"
)

// NodeSpec is one of podsafe's nodes on the cluster.
type NodeSpec struct {
	Name   string
	Labels map[string]string
	Taints []corev1.Taint
	// APIServer, when set, is the index of the kube-apiserver the node's
	// kubelet talks to (others only while that one cannot be reached);
	// unset, the nodes spread over the API servers by name.
	APIServer *int
}

// Cluster is a running real control plane.
type Cluster struct {
	cfg   Config
	log   *slog.Logger
	net   network
	lay   *layout
	users *users
	mode  string // NetworkNamespaces or NetworkLoopback
	why   string // why network faults are unavailable ("" when they are)

	mu    sync.Mutex
	procs map[string]*proc
	comps []target.Component
	hosts map[string]netip.Addr // every host's address
	kl    *kubelets
	// etcdHTTP talks to etcd's gateway over TLS with the client
	// certificate (health, leader).
	etcdHTTP *http.Client

	exitsInRow map[string]int
	lastExit   map[string]time.Time

	// fencingOpts are the fencing controller's options once StartFencing
	// ran; fencingRun runs it.
	fencingOpts *FencingOptions
	fencingRun  runset.Set

	// storage is the storage server and CSI controller once StartStorage
	// ran.
	storage *storageState

	// fronts are the watch fronts by the process they front
	// (Config.WatchFronts).
	fronts map[string]*watchFront

	// ext is set on an existing cluster (NewExternal): no processes, the
	// kubeconfig's server and credentials.
	ext *external

	// OnExit, when set before Start, is told when a control-plane process
	// exits by itself (not killed by a fault): its name, how it exited and
	// when it will be started again.
	OnExit func(component string, err error, restartIn time.Duration)
}

// New prepares a cluster; Start runs it.
func New(cfg Config) (*Cluster, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	return &Cluster{cfg: cfg, log: cfg.Logger, procs: map[string]*proc{}, hosts: map[string]netip.Addr{}, fronts: map[string]*watchFront{},
		exitsInRow: map[string]int{}, lastExit: map[string]time.Time{}}, nil
}

// NetworkMode is NetworkNamespaces or NetworkLoopback once started.
func (c *Cluster) NetworkMode() string { return c.mode }

// NetworkFaultsUnavailable says, in one line, why links cannot be cut here
// ("" when they can).
func (c *Cluster) NetworkFaultsUnavailable() string { return c.why }

// Dir is the cluster's directory.
func (c *Cluster) Dir() string { return c.cfg.Dir }

// Start creates the hosts, the certificates and tokens, and starts etcd,
// the API servers, the schedulers and the controller-managers, each once
// the one before is ready. nodes are the names podsafe's kubelets will use
// (their tokens are made now). On error everything started is stopped.
func (c *Cluster) Start(ctx context.Context, nodes []string) (err error) {
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	for _, d := range []string{"data", "logs", "audit", "kubeconfig"} {
		if err := os.MkdirAll(filepath.Join(c.cfg.Dir, d), 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", d, err)
		}
	}
	runID := newToken()[:6]
	if err := c.pickNetwork(ctx, runID); err != nil {
		return err
	}
	lay := &layout{dir: c.cfg.Dir, runID: runID, timings: c.cfg.Timings, noPreemption: c.cfg.DisablePreemption}
	c.lay = lay
	for i := range c.cfg.Etcd {
		a, err := c.addHost(ctx, etcdName(i), target.RoleStore, i, "")
		if err != nil {
			return err
		}
		lay.etcd = append(lay.etcd, a)
	}
	for i := range c.cfg.APIServers {
		a, err := c.addHost(ctx, apiServerName(i), target.RoleAPIServer, c.memberOf(i), "")
		if err != nil {
			return err
		}
		lay.api = append(lay.api, a)
	}
	var apiIPs, etcdIPs []net.IP
	for _, a := range lay.api {
		apiIPs = append(apiIPs, a.AsSlice())
	}
	// A watch front serves as its process's API server: its address is
	// in the serving certificate too.
	frontAddr := map[string]netip.Addr{}
	for i := range c.cfg.APIServers {
		for _, comp := range c.cfg.WatchFronts {
			name := comp + "-" + strconv.Itoa(i)
			a, err := c.net.addLocal(ctx, name+"-front")
			if err != nil {
				return fmt.Errorf("host of %s's watch front: %w", name, err)
			}
			frontAddr[name] = a
			apiIPs = append(apiIPs, a.AsSlice())
		}
	}
	for _, a := range lay.etcd {
		etcdIPs = append(etcdIPs, a.AsSlice())
	}
	if lay.pki, err = newPKI(c.cfg.Dir, apiIPs, etcdIPs); err != nil {
		return err
	}
	if c.etcdHTTP, err = etcdClient(lay.pki); err != nil {
		return err
	}
	c.users = newUsers(nodes)
	lay.tokens = filepath.Join(c.cfg.Dir, "pki", "tokens.csv")
	if err := c.users.writeTokenFile(lay.tokens); err != nil {
		return err
	}
	lay.policy = filepath.Join(c.cfg.Dir, "audit-policy.yaml")
	if err := os.WriteFile(lay.policy, record.AuditPolicy(), 0o644); err != nil {
		return fmt.Errorf("writing the audit policy: %w", err)
	}
	for i := range c.cfg.APIServers {
		for _, comp := range []struct{ name, user string }{{schedulerName(i), SchedulerUser}, {controllerManagerName(i), ControllerManagerUser}} {
			usr, err := c.users.get(comp.user)
			if err != nil {
				return err
			}
			server := lay.apiURL(i)
			if a, ok := frontAddr[comp.name]; ok {
				f, err := startWatchFront(comp.name, a, server, lay.pki, a, c.log)
				if err != nil {
					return err
				}
				c.mu.Lock()
				c.fronts[comp.name] = f
				c.mu.Unlock()
				server = f.URL()
			}
			if err := writeKubeconfig(lay.kubeconfigPath(comp.name), server, lay.pki.CAPEM, usr); err != nil {
				return err
			}
		}
		if lay.noPreemption {
			if err := os.WriteFile(lay.schedulerConfigPath(i), lay.schedulerConfig(i), 0o644); err != nil {
				return fmt.Errorf("writing the scheduler's configuration: %w", err)
			}
		}
	}

	// etcd: every member at once (they need each other to elect).
	for i := range c.cfg.Etcd {
		if err := c.startProc(etcdName(i), c.cfg.Binaries.Etcd, lay.etcdArgs(i)); err != nil {
			return err
		}
	}
	for i := range c.cfg.Etcd {
		if err := c.waitReady(ctx, etcdName(i), func(ctx context.Context) error { return c.etcdHealthy(ctx, i) }); err != nil {
			return err
		}
	}
	for i := range c.cfg.APIServers {
		if err := c.startProc(apiServerName(i), c.cfg.Binaries.KubeAPIServer, lay.apiServerArgs(i)); err != nil {
			return err
		}
	}
	for i := range c.cfg.APIServers {
		if err := c.waitReady(ctx, apiServerName(i), func(ctx context.Context) error { return c.apiReady(ctx, i) }); err != nil {
			return err
		}
	}
	if err := c.bindRoles(ctx); err != nil {
		return err
	}
	for i := range c.cfg.APIServers {
		a, err := c.addHost(ctx, schedulerName(i), target.RoleScheduler, c.memberOf(i), "")
		if err != nil {
			return err
		}
		if err := c.startProc(schedulerName(i), c.cfg.Binaries.KubeScheduler, lay.schedulerArgs(i, a)); err != nil {
			return err
		}
		a, err = c.addHost(ctx, controllerManagerName(i), target.RoleController, c.memberOf(i), "")
		if err != nil {
			return err
		}
		if err := c.startProc(controllerManagerName(i), c.cfg.Binaries.KubeControllerManager, lay.controllerManagerArgs(i, a)); err != nil {
			return err
		}
	}
	c.log.Info("control plane started", "etcd", c.cfg.Etcd, "apiservers", c.cfg.APIServers, "network", c.mode)
	return nil
}

// memberOf is the control-plane member API server i (and its scheduler
// and controller-manager) belongs to: member i when there is one, as on
// kubeadm's stacked control-plane nodes.
func (c *Cluster) memberOf(i int) int {
	if i < c.cfg.Etcd {
		return i
	}
	return -1
}

// pickNetwork chooses namespaces or loopback addresses.
func (c *Cluster) pickNetwork(ctx context.Context, runID string) error {
	mode := c.cfg.Network
	if mode == NetworkAuto {
		mode = NetworkNamespaces
		if err := netns.Check(); err != nil {
			mode = NetworkLoopback
			c.why = err.Error()
		}
	}
	switch mode {
	case NetworkNamespaces:
		n, err := netns.New(ctx, netns.Options{Prefix: "ps" + runID[:4], Logger: c.log})
		if err != nil {
			return fmt.Errorf("creating the cluster's network: %w", err)
		}
		c.net = &nsNet{n: n}
	default:
		c.net = newLoopbackNet(byte(1 + os.Getpid()%250))
		if c.why == "" {
			c.why = "network faults need network namespaces (--network namespaces, as root)"
		}
	}
	c.mode = mode
	return nil
}

// addHost gives a component a host and records it.
func (c *Cluster) addHost(ctx context.Context, name string, role target.Role, member int, node string) (netip.Addr, error) {
	comp := name
	if role == target.RoleKubelet {
		comp = KubeletComponent(node)
	}
	var (
		a   netip.Addr
		err error
	)
	if role == target.RoleKubelet || role == target.RoleFencing || role == target.RoleStorage {
		// podsafe's own components run in the harness, each dialing from
		// an address of its own.
		a, err = c.net.addLocal(ctx, name)
	} else {
		a, err = c.net.addHost(ctx, name)
	}
	if err != nil {
		return netip.Addr{}, fmt.Errorf("host %s: %w", name, err)
	}
	c.mu.Lock()
	c.hosts[name] = a
	c.comps = append(c.comps, target.Component{Name: comp, Role: role, Host: name, Member: member, Node: node})
	c.mu.Unlock()
	return a, nil
}

// startProc starts a control-plane process on its host.
func (c *Cluster) startProc(name, path string, args []string) error {
	if base := strings.TrimRight(name, "0123456789"); strings.HasSuffix(base, "-") {
		extra := c.cfg.ExtraArgs[strings.TrimSuffix(base, "-")]
		for _, a := range extra {
			flag, _, _ := strings.Cut(a, "=")
			if slices.ContainsFunc(args, func(o string) bool { return o == flag || strings.HasPrefix(o, flag+"=") }) {
				return fmt.Errorf("%w: extra arg %s of %s: podsafe sets %s itself (its timings and layout; set those in the scenario)", ErrInvalidConfig, a, name, flag)
			}
		}
		args = append(slices.Clone(args), extra...)
	}
	p := &proc{
		name: name, host: name, path: path, args: args,
		logPath: filepath.Join(c.cfg.Dir, "logs", name+".log"),
		command: c.net.command,
		onExit:  c.restartAfterExit,
	}
	c.mu.Lock()
	c.procs[name] = p
	c.mu.Unlock()
	return p.start()
}

// restartAfterExit starts a process again after it exited by itself, as
// the kubelet restarts a control-plane static pod: after a back-off that
// doubles with each exit in a row (1 s up to 10 s; a process that ran a
// minute starts the count again). A process killed or stopped by podsafe
// is not restarted here.
func (c *Cluster) restartAfterExit(p *proc, err error) {
	c.mu.Lock()
	now := time.Now()
	if now.Sub(c.lastExit[p.name]) > time.Minute {
		c.exitsInRow[p.name] = 0
	}
	c.exitsInRow[p.name]++
	c.lastExit[p.name] = now
	backoff := min(time.Second<<min(c.exitsInRow[p.name]-1, 4), 10*time.Second)
	onExit := c.OnExit
	c.mu.Unlock()
	c.log.Warn("component exited; restarting it", "component", p.name, "err", err, "after", backoff)
	if onExit != nil {
		onExit(p.name, err, backoff)
	}
	time.AfterFunc(backoff, func() {
		if err := p.start(); err != nil && !errors.Is(err, target.ErrRunning) {
			c.log.Warn("restarting a component", "component", p.name, "err", err)
		}
	})
}

// waitReady polls ready until it succeeds, the process exits, or ctx ends.
func (c *Cluster) waitReady(ctx context.Context, name string, ready func(context.Context) error) error {
	c.mu.Lock()
	p := c.procs[name]
	c.mu.Unlock()
	var last error
	for {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		last = ready(rctx)
		cancel()
		if last == nil {
			return nil
		}
		if !p.running() {
			return fmt.Errorf("%s exited before it was ready (%v): see %s", name, p.lastExit(), p.logPath)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s to be ready (last: %v; log: %s): %w", name, last, p.logPath, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// etcdClient is the harness's HTTPS client of etcd: it trusts the cluster
// CA and presents the etcd client certificate.
func etcdClient(p *pki) (*http.Client, error) {
	cert, err := tls.LoadX509KeyPair(p.EtcdClientCert, p.EtcdClientKey)
	if err != nil {
		return nil, fmt.Errorf("loading the etcd client certificate: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.CAPEM)
	return &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
	}}, nil
}

// etcdURL is etcd member i's client URL.
func (c *Cluster) etcdURL(i int) string { return "https://" + hostport(c.lay.etcd[i], EtcdClientPort) }

// etcdHealthy asks etcd member i's /health.
func (c *Cluster) etcdHealthy(ctx context.Context, i int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.etcdURL(i)+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := c.etcdHTTP.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/health: %s", resp.Status)
	}
	return nil
}

// apiReady asks API server i's /readyz as admin.
func (c *Cluster) apiReady(ctx context.Context, i int) error {
	cs, err := c.clientFor(AdminUser, "", i)
	if err != nil {
		return err
	}
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("/readyz: %w (%s)", err, body)
	}
	return nil
}

// AddNode gives node a host of its own inside the harness (its kubelet's
// connections come from the host's address, so partitions cut them).
func (c *Cluster) AddNode(ctx context.Context, node string) error {
	_, err := c.addHost(ctx, NodeHost(node), target.RoleKubelet, -1, node)
	return err
}

// setZone records the topology zone of node's kubelet component.
func (c *Cluster) setZone(node, zone string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.comps {
		if c.comps[i].Role == target.RoleKubelet && c.comps[i].Node == node {
			c.comps[i].Zone = zone
		}
	}
}

// KubeletComponent is the component name of node's kubelet.
func KubeletComponent(node string) string { return "kubelet/" + node }

// NodeHost is the host of node's kubelet.
func NodeHost(node string) string { return node }

// AuditLogs are the API servers' audit log files.
func (c *Cluster) AuditLogs() []string {
	out := make([]string, len(c.lay.api))
	for i := range out {
		out[i] = c.lay.auditLog(i)
	}
	return out
}

// Users maps each of the cluster's user names to its groups (for the
// history's identity map).
func (c *Cluster) Users() map[string][]string {
	out := map[string][]string{}
	for n, u := range c.users.byName {
		out[n] = slices.Clone(u.Groups)
	}
	return out
}

// Close stops every process (schedulers and controller-managers first,
// etcd last) and removes the network. It is safe to call twice.
func (c *Cluster) Close() error {
	c.StopOwn()
	c.mu.Lock()
	procs := c.procs
	c.procs = map[string]*proc{}
	c.mu.Unlock()
	stopAll := func(prefix func(int) string, n int) {
		var wg sync.WaitGroup
		for i := range n {
			if p := procs[prefix(i)]; p != nil {
				wg.Add(1)
				go func() { defer wg.Done(); p.stop(5 * time.Second) }()
			}
		}
		wg.Wait()
	}
	stopAll(schedulerName, c.cfg.APIServers)
	stopAll(controllerManagerName, c.cfg.APIServers)
	stopAll(apiServerName, c.cfg.APIServers)
	stopAll(etcdName, c.cfg.Etcd)
	var err error
	if c.ext != nil && c.net != nil {
		err = c.closeExternal()
	}
	if c.net != nil {
		err = errors.Join(err, c.net.close())
		c.net = nil
	}
	return err
}

// StopOwn stops podsafe's own components on the cluster, its fencing
// controller and kubelets (their runtimes with them); Close does too.
func (c *Cluster) StopOwn() {
	c.fencingRun.StopAll()
	c.mu.Lock()
	fronts := c.fronts
	c.fronts = map[string]*watchFront{}
	c.mu.Unlock()
	for _, f := range fronts {
		f.close()
	}
	c.stopKubelets()
	c.stopStorage()
}

// Timings are the component timings the cluster runs with.
func (c *Cluster) Timings() Timings { return c.cfg.Timings }
