package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/podsafe/podsafe/target"
	"github.com/podsafe/podsafe/target/kube/netns"
)

// A Cluster is a target: its control-plane processes can be killed,
// restarted and paused, its kubelets crashed and restarted, and (with
// network namespaces) every link cut.
var (
	_ target.Target    = (*Cluster)(nil)
	_ target.Networker = (*Cluster)(nil)
	_ target.Processes = (*Cluster)(nil)
)

// isFencing reports whether component is podsafe's fencing controller.
func isFencing(component string) bool { return component == FencingComponent }

// Kind is "kube", or "kubeconfig" for an existing cluster.
func (c *Cluster) Kind() string {
	if c.ext != nil {
		return "kubeconfig"
	}
	return "kube"
}

// Components lists etcd members, API servers, schedulers and
// controller-managers, then the kubelets.
func (c *Cluster) Components() []target.Component {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := slices.Clone(c.comps)
	// Control plane first, kubelets after, each in creation order.
	slices.SortStableFunc(out, func(a, b target.Component) int {
		ka, kb := a.Role == target.RoleKubelet, b.Role == target.RoleKubelet
		switch {
		case ka == kb:
			return 0
		case kb:
			return -1
		default:
			return 1
		}
	})
	return out
}

// Can: network needs namespaces; kill works on every process, kubelet and
// the fencing controller; pause (SIGSTOP) on every process and (holding
// its links) every kubelet; power on podsafe's nodes. Clocks, apply delays
// and failpoints are not available on real binaries.
func (c *Cluster) Can(capability target.Capability, component string) bool {
	switch capability {
	case target.Network:
		return c.net != nil && c.net.canCut() && (component == "" || c.hasComponent(component))
	case target.Kill:
		if c.ext != nil {
			// Of an existing cluster, podsafe owns only its own components.
			comp, ok := target.Find(c, component)
			return component == "" || ok && comp.Role != target.RoleAPIServer
		}
		return component == "" || c.hasComponent(component)
	case target.Pause:
		if component == "" {
			return true
		}
		comp, ok := target.Find(c, component)
		if c.ext != nil && comp.Role == target.RoleAPIServer {
			return false
		}
		// A kubelet's pause holds its links: it needs the network. The
		// fencing controller runs in the harness: it can be killed, not
		// stopped.
		return ok && comp.Role != target.RoleFencing && (comp.Role != target.RoleKubelet || (c.net != nil && c.net.canCut()))
	case target.Power:
		if component == "" {
			return len(target.ByRole(c, target.RoleKubelet)) > 0
		}
		comp, ok := target.Find(c, component)
		return ok && comp.Role == target.RoleKubelet
	}
	return false
}

func (c *Cluster) hasComponent(name string) bool {
	_, ok := target.Find(c, name)
	return ok
}

// Members is the number of etcd members.
func (c *Cluster) Members() int { return c.cfg.Etcd }

// Leader asks the etcd members which of them leads.
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	if c.etcdHTTP == nil {
		return -1, fmt.Errorf("no etcd leader known: the cluster is not started")
	}
	var errs []string
	for i := range c.lay.etcd {
		st, err := etcdStatus(ctx, c.etcdHTTP, c.etcdURL(i))
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", etcdName(i), err))
			continue
		}
		if st.Leader == "" || st.Leader == "0" {
			continue
		}
		members, err := etcdMembers(ctx, c.etcdHTTP, c.etcdURL(i))
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", etcdName(i), err))
			continue
		}
		for _, m := range members {
			if m.ID == st.Leader {
				for j := range c.lay.etcd {
					if m.Name == etcdName(j) {
						return j, nil
					}
				}
			}
		}
	}
	return -1, fmt.Errorf("no etcd leader known: %s", strings.Join(errs, "; "))
}

type etcdStatusResponse struct {
	Leader string `json:"leader"`
}

type etcdMember struct {
	ID   string `json:"ID"`
	Name string `json:"name"`
}

func etcdPost(ctx context.Context, client *http.Client, url string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader("{}"))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

func etcdStatus(ctx context.Context, client *http.Client, base string) (etcdStatusResponse, error) {
	var st etcdStatusResponse
	err := etcdPost(ctx, client, base+"/v3/maintenance/status", &st)
	return st, err
}

func etcdMembers(ctx context.Context, client *http.Client, base string) ([]etcdMember, error) {
	var out struct {
		Members []etcdMember `json:"members"`
	}
	err := etcdPost(ctx, client, base+"/v3/cluster/member/list", &out)
	return out.Members, err
}

// Cut drops the packets of links (hosts are component hosts).
func (c *Cluster) Cut(ctx context.Context, links []target.Link) (func() error, error) {
	if c.net == nil {
		return nil, fmt.Errorf("cutting links: the cluster is closed")
	}
	return c.net.cut(ctx, links)
}

// proc returns the process of a control-plane component.
func (c *Cluster) proc(component string) (*proc, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.procs[component]
	return p, ok
}

// kubeletNode returns the node of a kubelet component.
func kubeletNode(component string) (string, bool) {
	return strings.CutPrefix(component, "kubelet/")
}

// Kill sends SIGKILL to a control-plane process and waits for it to die,
// or crashes a kubelet (its containers run on).
func (c *Cluster) Kill(ctx context.Context, component string) error {
	if p, ok := c.proc(component); ok {
		return p.kill(ctx)
	}
	if node, ok := kubeletNode(component); ok {
		return c.StopKubelet(node)
	}
	if isFencing(component) {
		return c.stopFencing()
	}
	return fmt.Errorf("kill %s: %w", component, target.ErrUnknownComponent)
}

// Restart starts a killed component again on its data.
func (c *Cluster) Restart(_ context.Context, component string) error {
	if p, ok := c.proc(component); ok {
		return p.start()
	}
	if node, ok := kubeletNode(component); ok {
		return c.StartKubelet(node)
	}
	if isFencing(component) {
		return c.startFencing()
	}
	return fmt.Errorf("restart %s: %w", component, target.ErrUnknownComponent)
}

// Running reports whether a component runs (paused counts).
func (c *Cluster) Running(component string) bool {
	if p, ok := c.proc(component); ok {
		return p.running()
	}
	if node, ok := kubeletNode(component); ok {
		return c.KubeletRunning(node)
	}
	if isFencing(component) {
		return c.fencingRun.Running(FencingComponent)
	}
	return false
}

// Pause sends SIGSTOP to a control-plane process, or pauses a kubelet
// (PauseKubelet).
func (c *Cluster) Pause(ctx context.Context, component string) error {
	if node, ok := kubeletNode(component); ok {
		return c.PauseKubelet(ctx, node)
	}
	p, ok := c.proc(component)
	if !ok {
		return fmt.Errorf("pause %s: %w", component, target.ErrUnsupported)
	}
	_, err := p.signal(syscall.SIGSTOP)
	return err
}

// Resume sends SIGCONT to a paused control-plane process, or resumes a
// kubelet.
func (c *Cluster) Resume(_ context.Context, component string) error {
	if node, ok := kubeletNode(component); ok {
		return c.ResumeKubelet(node)
	}
	p, ok := c.proc(component)
	if !ok {
		return fmt.Errorf("resume %s: %w", component, target.ErrUnsupported)
	}
	return p.resume()
}

// Paused reports whether a component is stopped by Pause.
func (c *Cluster) Paused(component string) bool {
	if node, ok := kubeletNode(component); ok {
		return c.KubeletPaused(node)
	}
	p, ok := c.proc(component)
	return ok && p.isPaused()
}

// Pid is a control-plane process's pid (0 when it is not running), for
// tests and logs.
func (c *Cluster) Pid(component string) int {
	if p, ok := c.proc(component); ok {
		return p.pid()
	}
	return 0
}

// Rules describes the packet drops in place.
func (c *Cluster) Rules(ctx context.Context) string {
	if c.net == nil {
		return ""
	}
	return c.net.rules(ctx)
}

var (
	_ target.APIStore     = (*Cluster)(nil)
	_ target.WatchFreezer = (*Cluster)(nil)
)

// APIStoreLinks are the links from API server member's host to every etcd
// member's client port: cutting them leaves the API server up and serving
// from its watch cache, with no store behind it, while etcd keeps its
// quorum. Each link is narrowed to etcd's client port, so both directions
// of those connections are dropped: no request reaches etcd, and a watch
// stream opened before the cut stops delivering at once (dropping only
// what the API server sends let etcd's pushed events through until TCP gave
// up, so the watch cache went on following for a while). A member without
// an API server has none.
func (c *Cluster) APIStoreLinks(member int) []target.Link {
	if c.lay == nil || member < 0 || member >= len(c.lay.api) {
		return nil
	}
	var out []target.Link
	for i := range c.lay.etcd {
		out = append(out, target.Link{From: apiServerName(member), To: etcdName(i), Port: strconv.Itoa(EtcdClientPort)})
	}
	return out
}

// planNet is the network of a planned cluster: nothing is created; it only
// says whether links could be cut.
type planNet struct{ canCutLinks bool }

func (p planNet) addHost(context.Context, string) (netip.Addr, error)  { return netip.Addr{}, nil }
func (p planNet) addLocal(context.Context, string) (netip.Addr, error) { return netip.Addr{}, nil }
func (p planNet) command(context.Context, string, string, ...string) (*exec.Cmd, error) {
	return nil, fmt.Errorf("a planned cluster runs nothing")
}
func (p planNet) cut(context.Context, []target.Link) (func() error, error) {
	return nil, fmt.Errorf("a planned cluster cuts nothing")
}
func (p planNet) canCut() bool                 { return p.canCutLinks }
func (p planNet) rules(context.Context) string { return "" }
func (p planNet) close() error                 { return nil }

// Plan returns the cluster cfg would start, with nodes and (fencing)
// podsafe's fencing controller, without starting anything: its components and what can be done to them, for `podsafe
// list --target kube`. Only Kind, Components, Can and Members are
// meaningful on it.
func Plan(cfg Config, nodes []string, fencing bool) (*Cluster, error) {
	if cfg.Binaries.Etcd == "" {
		// The plan needs no binaries.
		cfg.Binaries.Etcd, cfg.Binaries.KubeAPIServer = "etcd", "kube-apiserver"
		cfg.Binaries.KubeScheduler, cfg.Binaries.KubeControllerManager = "kube-scheduler", "kube-controller-manager"
	}
	if cfg.Dir == "" {
		cfg.Dir = "(planned)"
	}
	c, err := New(cfg)
	if err != nil {
		return nil, err
	}
	mode := c.cfg.Network
	if mode == NetworkAuto {
		mode = NetworkNamespaces
		if err := netns.Check(); err != nil {
			mode, c.why = NetworkLoopback, err.Error()
		}
	}
	if mode == NetworkLoopback && c.why == "" {
		c.why = "network faults need network namespaces (--network namespaces, as root)"
	}
	c.mode = mode
	c.net = planNet{canCutLinks: mode == NetworkNamespaces}
	c.lay = &layout{}
	for i := range c.cfg.Etcd {
		c.comps = append(c.comps, target.Component{Name: etcdName(i), Role: target.RoleStore, Host: etcdName(i), Member: i})
		c.lay.etcd = append(c.lay.etcd, netip.Addr{})
	}
	for i := range c.cfg.APIServers {
		c.comps = append(c.comps, target.Component{Name: apiServerName(i), Role: target.RoleAPIServer, Host: apiServerName(i), Member: c.memberOf(i)})
		c.lay.api = append(c.lay.api, netip.Addr{})
	}
	for i := range c.cfg.APIServers {
		c.comps = append(c.comps,
			target.Component{Name: schedulerName(i), Role: target.RoleScheduler, Host: schedulerName(i), Member: c.memberOf(i)},
			target.Component{Name: controllerManagerName(i), Role: target.RoleController, Host: controllerManagerName(i), Member: c.memberOf(i)})
	}
	if fencing {
		c.comps = append(c.comps, target.Component{Name: FencingComponent, Role: target.RoleFencing, Host: FencingComponent, Member: -1})
	}
	// A run on the kube target starts podsafe's storage (StartStorage).
	c.comps = append(c.comps, target.Component{Name: StorageComponent, Role: target.RoleStorage, Host: StorageComponent, Member: -1})
	for _, n := range nodes {
		c.comps = append(c.comps, target.Component{Name: KubeletComponent(n), Role: target.RoleKubelet, Host: NodeHost(n), Member: -1, Node: n})
	}
	return c, nil
}

// Unavailable says, in one line, why the kube target cannot do capability
// ("" when it can).
func (c *Cluster) Unavailable(capability target.Capability) string {
	if c.Can(capability, "") {
		return ""
	}
	if c.ext != nil && capability != target.Power {
		return "podsafe owns only its nodes and fencing controller on an existing cluster, not its control plane"
	}
	switch capability {
	case target.Network:
		return c.why
	case target.Clock:
		return "real Go binaries read the kernel's clock: podsafe cannot move one process's clock, and will not fake it"
	case target.SlowApply:
		return "etcd applies on its own: podsafe cannot slow one member's state machine"
	case target.Power:
		return "no nodes of podsafe's to power off"
	case target.Failpoint:
		return "failpoints live in podsafe's own control plane, not in upstream's binaries"
	case target.Pause:
		return "pausing podsafe's in-harness kubelets holds their links, which needs network namespaces"
	}
	return "not supported on the kube target"
}
