package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/cluster/scaledclock"
	"github.com/podsafe/podsafe/internal/fpctx"
	"github.com/podsafe/podsafe/nemesis/fpprobe"
	"github.com/podsafe/podsafe/target"
)

// The embedded cluster as a target.Target: the faults of package nemesis
// reach it only through the target interfaces.
//
// Its components, control plane first, in this order:
//
//   - "cp-0" … "cp-(n-1)" (MemberHost), role store, member i, on host
//     cp-i: the raft member and its API server, one process on one host.
//     There is no separate API server component: the API reaches its store
//     in-process, and a crash takes both. Network: the API↔store links are
//     the member's store-forwarding flows (APIStoreLinks). Kill: only when
//     durable (an in-memory member restarted empty would break raft's
//     safety). SlowApply: always (it fails while the member is down).
//   - "scheduler" (ComponentScheduler), role scheduler, on SchedulerHost,
//     when Config.Scheduler: Kill, Pause, Clock.
//   - "controller-manager" (ComponentControllerManager), role controller,
//     on ControllerHost, when Config.Controllers: the process every
//     controller shares, the unit a pause stops (Pause only).
//   - "controller/<name>" (ControllerComponent) for each of ControllerNames,
//     role controller, on ControllerHost, when Config.Controllers: Kill,
//     Clock.
//   - "controller/fencing", role fencing, on ControllerHost, when
//     Config.Controllers and Config.Fencing.Enabled: Kill, Clock.
//   - "kubelet/<node>" (KubeletComponent) for each topology node, in
//     topology order, role kubelet, Node set, on host <node>, when
//     Config.Kubelets: Kill, Pause, Clock, Power (of its node).
//   - "storage", role storage, on StorageHost: the shared storage server.
//
// Every component's host can be cut (Network). Clock applies to the
// components whose clock view has been handed out (ClockComponents), that
// is that have started. Failpoint applies to every component, all in this
// process, when this binary's markers are live (fpprobe.Live).

// ComponentStorage names the shared storage server's component.
const ComponentStorage = "storage"

// NemesisHost is the network host the target's admin calls (NodeAdmin) come
// from. No fault cuts it.
const NemesisHost = "nemesis"

// embedded adapts a Cluster to the target interfaces.
type embedded struct {
	c *Cluster

	adminOnce sync.Once
	admin     kubernetes.Interface
	adminErr  error
}

// AsTarget returns c as a target.Target. The value also implements
// target.Networker, target.Processes, target.Clocks, target.Slower,
// target.PowerSwitch, target.NodeAdmin, target.APIStore and
// target.Failpoints.
func AsTarget(c *Cluster) target.Target { return &embedded{c: c} }

var (
	_ target.Target      = (*embedded)(nil)
	_ target.Networker   = (*embedded)(nil)
	_ target.Processes   = (*embedded)(nil)
	_ target.Clocks      = (*embedded)(nil)
	_ target.Slower      = (*embedded)(nil)
	_ target.PowerSwitch = (*embedded)(nil)
	_ target.NodeAdmin   = (*embedded)(nil)
	_ target.APIStore    = (*embedded)(nil)
	_ target.Failpoints  = (*embedded)(nil)
)

func (e *embedded) Kind() string { return "embedded" }

func (e *embedded) Members() int { return e.c.Members() }

func (e *embedded) Components() []target.Component {
	c := e.c
	var out []target.Component
	for i := range c.Members() {
		h := MemberHost(i)
		out = append(out, target.Component{Name: h, Role: target.RoleStore, Host: h, Member: i})
	}
	cfg := c.Config()
	if cfg.Scheduler {
		out = append(out, target.Component{Name: ComponentScheduler, Role: target.RoleScheduler, Host: SchedulerHost, Member: -1})
	}
	if cfg.Controllers {
		out = append(out, target.Component{Name: ComponentControllerManager, Role: target.RoleController, Host: ControllerHost, Member: -1})
		for _, n := range ControllerNames {
			out = append(out, target.Component{Name: ControllerComponent(n), Role: target.RoleController, Host: ControllerHost, Member: -1})
		}
		if cfg.Fencing.Enabled {
			out = append(out, target.Component{Name: ControllerComponent(ControllerFencing), Role: target.RoleFencing, Host: ControllerHost, Member: -1})
		}
	}
	if cfg.Kubelets {
		for _, n := range cfg.Topology.Nodes {
			out = append(out, target.Component{Name: KubeletComponent(n.Name), Role: target.RoleKubelet, Host: n.Name, Member: -1, Node: n.Name, Zone: n.Labels[LabelZone]})
		}
	}
	out = append(out, target.Component{Name: ComponentStorage, Role: target.RoleStorage, Host: StorageHost, Member: -1})
	return out
}

func (e *embedded) Can(cp target.Capability, name string) bool {
	if name == "" {
		for _, comp := range e.Components() {
			if e.Can(cp, comp.Name) {
				return true
			}
		}
		return false
	}
	comp, ok := target.Find(e, name)
	if !ok {
		return false
	}
	switch cp {
	case target.Network:
		return true
	case target.Kill:
		switch comp.Role {
		case target.RoleStore:
			return e.c.Config().Durable
		case target.RoleScheduler, target.RoleKubelet, target.RoleFencing:
			return true
		case target.RoleController:
			return name != ComponentControllerManager
		}
	case target.Pause:
		return name == ComponentScheduler || name == ComponentControllerManager || comp.Role == target.RoleKubelet
	case target.Clock:
		return slices.Contains(e.c.ClockComponents(), name)
	case target.SlowApply:
		return comp.Role == target.RoleStore
	case target.Power:
		return comp.Role == target.RoleKubelet
	case target.Failpoint:
		return fpprobe.Live()
	}
	return false
}

// Leader is the member that is raft leader by its own account now; it does
// not wait for an election.
func (e *embedded) Leader(context.Context) (int, error) {
	if l := e.c.LeaderIndex(); l >= 0 {
		return l, nil
	}
	return -1, target.ErrNoLeader
}

// Cut cuts each link in order: a link with a Port cuts the flow from its
// From to To:Port (simnet's CutPort), any other every packet From sends To.
// If one fails, the cuts already made are healed.
func (e *embedded) Cut(_ context.Context, links []target.Link) (func() error, error) {
	net := e.c.Network()
	// Whole-host links change in one step (a zone cut is thousands of
	// them); port links one by one.
	var hosts [][2]string
	var ports []target.Link
	for _, l := range links {
		if l.Port == "" {
			hosts = append(hosts, [2]string{l.From, l.To})
		} else {
			ports = append(ports, l)
		}
	}
	var done []target.Link
	heal := func() error {
		var errs []error
		if len(hosts) > 0 {
			net.HealLinks(hosts)
		}
		for _, l := range done {
			errs = append(errs, net.HealPort(l.From, l.To+":"+l.Port))
		}
		return errors.Join(errs...)
	}
	if len(hosts) > 0 {
		net.CutLinks(hosts)
	}
	for _, l := range ports {
		if err := net.CutPort(l.From, l.To+":"+l.Port); err != nil {
			return nil, errors.Join(fmt.Errorf("cutting %s: %w", l, err), heal())
		}
		done = append(done, l)
	}
	return heal, nil
}

// component finds name, or fails with target.ErrUnknownComponent.
func (e *embedded) component(name string) (target.Component, error) {
	comp, ok := target.Find(e, name)
	if !ok {
		return target.Component{}, fmt.Errorf("%w: %q", target.ErrUnknownComponent, name)
	}
	return comp, nil
}

// as adds the target's sentinel to err when err is the cluster's own.
func as(err, own, sentinel error) error {
	if err != nil && errors.Is(err, own) && !errors.Is(err, sentinel) {
		return fmt.Errorf("%w: %w", sentinel, err)
	}
	return err
}

func (e *embedded) Kill(_ context.Context, name string) error {
	comp, err := e.component(name)
	if err != nil {
		return err
	}
	c := e.c
	switch {
	case comp.Role == target.RoleStore:
		return as(c.CrashMember(comp.Member), ErrMemberDown, target.ErrNotRunning)
	case comp.Role == target.RoleScheduler:
		return as(c.StopScheduler(), ErrSchedulerStopped, target.ErrNotRunning)
	case comp.Role == target.RoleKubelet:
		return as(c.StopKubelet(comp.Node), ErrKubeletDown, target.ErrNotRunning)
	case strings.HasPrefix(name, ControllerComponent("")):
		return as(c.StopController(strings.TrimPrefix(name, ControllerComponent(""))), ErrControllerStopped, target.ErrNotRunning)
	}
	return fmt.Errorf("kill %s: %w", name, target.ErrUnsupported)
}

func (e *embedded) Restart(_ context.Context, name string) error {
	comp, err := e.component(name)
	if err != nil {
		return err
	}
	c := e.c
	switch {
	case comp.Role == target.RoleStore:
		return as(c.RestartMember(comp.Member), ErrMemberUp, target.ErrRunning)
	case comp.Role == target.RoleScheduler:
		return as(c.StartScheduler(), ErrSchedulerRunning, target.ErrRunning)
	case comp.Role == target.RoleKubelet:
		err := c.StartKubelet(comp.Node)
		return as(as(err, ErrKubeletUp, target.ErrRunning), ErrPoweredOff, target.ErrPoweredOff)
	case strings.HasPrefix(name, ControllerComponent("")):
		return as(c.StartController(strings.TrimPrefix(name, ControllerComponent(""))), ErrControllerRunning, target.ErrRunning)
	}
	return fmt.Errorf("restart %s: %w", name, target.ErrUnsupported)
}

func (e *embedded) Running(name string) bool {
	comp, ok := target.Find(e, name)
	if !ok {
		return false
	}
	c := e.c
	switch {
	case comp.Role == target.RoleStore:
		return c.MemberUp(comp.Member)
	case comp.Role == target.RoleScheduler:
		return c.SchedulerRunning()
	case comp.Role == target.RoleKubelet:
		return c.KubeletRunning(comp.Node)
	case name == ComponentControllerManager:
		return len(c.RunningControllers()) > 0
	case strings.HasPrefix(name, ControllerComponent("")):
		return c.ControllerRunning(strings.TrimPrefix(name, ControllerComponent("")))
	case comp.Role == target.RoleStorage:
		return true
	}
	return false
}

func (e *embedded) Pause(_ context.Context, name string) error {
	if _, err := e.component(name); err != nil {
		return err
	}
	return as(e.c.Pause(name), ErrUnknownComponent, target.ErrUnsupported)
}

func (e *embedded) Resume(_ context.Context, name string) error {
	if _, err := e.component(name); err != nil {
		return err
	}
	return as(as(e.c.Resume(name), ErrNotPaused, target.ErrNotPaused), ErrUnknownComponent, target.ErrUnsupported)
}

func (e *embedded) Paused(name string) bool { return e.c.Paused(name) }

// clock returns the clock view of a component that has been handed one.
func (e *embedded) clock(name string) (*scaledclock.Clock, error) {
	if !slices.Contains(e.c.ClockComponents(), name) {
		return nil, fmt.Errorf("clock of %q: %w", name, target.ErrUnsupported)
	}
	return e.c.ComponentClock(name), nil
}

func (e *embedded) ClockOffset(name string) (time.Duration, error) {
	v, err := e.clock(name)
	if err != nil {
		return 0, err
	}
	return v.Offset(), nil
}

func (e *embedded) SetClockOffset(name string, d time.Duration) error {
	v, err := e.clock(name)
	if err != nil {
		return err
	}
	v.SetOffset(d)
	return nil
}

func (e *embedded) ResetClock(name string) error {
	v, err := e.clock(name)
	if err != nil {
		return err
	}
	v.ResetOffset()
	return nil
}

func (e *embedded) WallFor(d time.Duration) time.Duration { return e.c.Clock().WallFor(d) }

// SlowApply sets member's store's apply delay; the heal clears it on that
// store, so a member restarted meanwhile (a new store, never slowed) is left
// alone.
func (e *embedded) SlowApply(_ context.Context, member int, delay time.Duration) (func() error, error) {
	if member < 0 || member >= e.c.Members() {
		return nil, fmt.Errorf("%w: no member %d", target.ErrUnknownComponent, member)
	}
	st := e.c.Store(member)
	if st == nil {
		return nil, fmt.Errorf("member %s is down: %w: %w", MemberHost(member), target.ErrNotRunning, ErrMemberDown)
	}
	st.SetApplyDelay(delay)
	return func() error { st.SetApplyDelay(0); return nil }, nil
}

func (e *embedded) PowerOff(_ context.Context, node string) error { return e.c.PowerOff(node) }

func (e *embedded) PowerOn(_ context.Context, node string) error { return e.c.PowerOn(node) }

func (e *embedded) PoweredOff(node string) bool { return e.c.PoweredOff(node) }

// Fenced reports a network fence or a storage fence of node. A power fence
// looks like any power-off, but fencing controllers fence the storage first
// (PS-15).
func (e *embedded) Fenced(node string) bool {
	if e.c.Network().Fenced(node) {
		return true
	}
	st, err := e.c.Storage()
	if err != nil {
		return false
	}
	_, ok := st.Fences()[node]
	return ok
}

// DeleteNode deletes node's Node object as admin, from NemesisHost.
func (e *embedded) DeleteNode(ctx context.Context, node string) error {
	e.adminOnce.Do(func() {
		e.admin, e.adminErr = e.c.Clientset(apiserver.IdentityAdmin, ClientOptions{Host: NemesisHost, Timeout: 5 * time.Second})
	})
	if e.adminErr != nil {
		return e.adminErr
	}
	return e.admin.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{})
}

// APIStoreLinks are the flows from member's host to every other member's
// forward port: a follower's store serves its API's reads and writes by
// forwarding them to the leader there, while raft runs on RaftPort, which
// stays open.
func (e *embedded) APIStoreLinks(member int) []target.Link {
	from := MemberHost(member)
	var out []target.Link
	for _, h := range e.c.MemberHosts() {
		if h != from {
			out = append(out, target.Link{From: from, To: h, Port: ForwardPort})
		}
	}
	return out
}

// EnableFailpoint switches a failpoint on in this process, which runs every
// component, aimed at component (fpctx.Aim: the markers carry their
// component's name); empty aims it everywhere.
func (e *embedded) EnableFailpoint(_ context.Context, name, term, component string) (func() error, error) {
	if component != "" {
		if _, err := e.component(component); err != nil {
			return nil, err
		}
	}
	return fpctx.Enable(name, term, component)
}
