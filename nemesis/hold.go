package nemesis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/podsafe/podsafe/target"
)

// How the faults of a composed schedule stay out of each other's way. Each
// part of the schedule injects through its own view of the target. An
// action through a view holds what it acts on for that part until the
// part's fault is healed: the process of a component killed, paused, its
// clock moved or its store slowed; the kubelets of a node powered off; a
// link cut; a failpoint switched on. While another part holds a process,
// the view does not offer its components (see view.Can), so a fault that
// picks among the components it can act on picks a free one; and an action
// on something held fails with ErrBusy before it reaches the target, so
// nothing is done. The schedule then skips that draw and records nothing.
// Two faults may still meet on one component through different resources:
// a member may be cut off while it is crashed, since a partition holds
// links and a crash the process.

// ErrBusy: in a composed schedule, a fault reached for a component, a link
// or a failpoint that another part's active fault holds.
var ErrBusy = errors.New("held by another active fault")

// holds records which part holds what, for every part of one composed
// schedule.
type holds struct {
	t     target.Target
	mu    sync.Mutex
	by    map[string]int    // resource key → part index
	hosts map[string]string // component name → host, as the target last listed them
}

func newHolds(t target.Target) *holds { return &holds{t: t, by: map[string]int{}} }

// Resource keys. A component is held as the process it runs in, named by
// its host: components that share a host share a process (the embedded
// cluster's controllers run in one controller-manager), so a clock fault
// on one controller waits while another part has paused them all.
func (h *holds) processKey(component string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	host, ok := h.hosts[component]
	if !ok {
		// A component the target lists now and did not before (or
		// never): look again, once per miss, not on every question.
		h.hosts = map[string]string{}
		for _, c := range h.t.Components() {
			h.hosts[c.Name] = c.Host
		}
		host = h.hosts[component]
	}
	if host == "" {
		host = component
	}
	return "process " + host
}

func linkKey(l target.Link) string    { return "link " + l.String() }
func failpointKey(name string) string { return "failpoint " + name }

// heldByOther reports whether a part other than part holds key.
func (h *holds) heldByOther(key string, part int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	p, ok := h.by[key]
	return ok && p != part
}

// acquire holds keys for part, all or none: ErrBusy when another part holds
// one of them.
func (h *holds) acquire(part int, keys ...string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, k := range keys {
		if p, ok := h.by[k]; ok && p != part {
			return fmt.Errorf("%s: %w", k, ErrBusy)
		}
	}
	for _, k := range keys {
		h.by[k] = part
	}
	return nil
}

// release lets go of everything part holds.
func (h *holds) release(part int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, p := range h.by {
		if p == part {
			delete(h.by, k)
		}
	}
}

// view is one part's target: every interface a fault may reach for,
// forwarded to the real target through the part's holds. Faults are only
// drawn where the real target has what they need, so the interfaces it
// lacks answer ErrUnsupported and their queries a neutral answer.
type view struct {
	h    *holds
	part int
}

var (
	_ target.Target      = view{}
	_ target.Networker   = view{}
	_ target.Processes   = view{}
	_ target.Clocks      = view{}
	_ target.Slower      = view{}
	_ target.PowerSwitch = view{}
	_ target.NodeAdmin   = view{}
	_ target.APIStore    = view{}
	_ target.Failpoints  = view{}
)

func (v view) Kind() string                            { return v.h.t.Kind() }
func (v view) Components() []target.Component          { return v.h.t.Components() }
func (v view) Members() int                            { return v.h.t.Members() }
func (v view) Leader(ctx context.Context) (int, error) { return v.h.t.Leader(ctx) }

// Can hides the components another part holds from the faults that pick
// among the components they can act on. Not from Network: a partition may
// cut a member off while another part has crashed it. Nor from SlowApply:
// the slow faults pick a member first and ask after, and SlowApply itself
// refuses a held one with ErrBusy.
func (v view) Can(c target.Capability, name string) bool {
	if c != target.Network && c != target.SlowApply && name != "" && v.h.heldByOther(v.h.processKey(name), v.part) {
		return false
	}
	return v.h.t.Can(c, name)
}

func unsupported(what string) error { return fmt.Errorf("%s: %w", what, target.ErrUnsupported) }

func (v view) Cut(ctx context.Context, links []target.Link) (func() error, error) {
	n, ok := v.h.t.(target.Networker)
	if !ok {
		return nil, unsupported("cut")
	}
	keys := make([]string, len(links))
	for i, l := range links {
		keys[i] = linkKey(l)
	}
	if err := v.h.acquire(v.part, keys...); err != nil {
		return nil, err
	}
	return n.Cut(ctx, links)
}

// process acquires component and returns the real target's Processes.
func (v view) process(component string) (target.Processes, error) {
	p, ok := v.h.t.(target.Processes)
	if !ok {
		return nil, unsupported(component)
	}
	return p, v.h.acquire(v.part, v.h.processKey(component))
}

func (v view) Kill(ctx context.Context, name string) error {
	p, err := v.process(name)
	if err != nil {
		return err
	}
	return p.Kill(ctx, name)
}

func (v view) Restart(ctx context.Context, name string) error {
	p, err := v.process(name)
	if err != nil {
		return err
	}
	return p.Restart(ctx, name)
}

func (v view) Pause(ctx context.Context, name string) error {
	p, err := v.process(name)
	if err != nil {
		return err
	}
	return p.Pause(ctx, name)
}

func (v view) Resume(ctx context.Context, name string) error {
	p, err := v.process(name)
	if err != nil {
		return err
	}
	return p.Resume(ctx, name)
}

// Running answers true for a component another part holds (which may have
// crashed it): a fault that asks before it acts then reaches for the
// component and is refused with ErrBusy, so the draw is skipped rather
// than failed.
func (v view) Running(name string) bool {
	if v.h.heldByOther(v.h.processKey(name), v.part) {
		return true
	}
	if p, ok := v.h.t.(target.Processes); ok {
		return p.Running(name)
	}
	return true
}

func (v view) Paused(name string) bool {
	if p, ok := v.h.t.(target.Processes); ok {
		return p.Paused(name)
	}
	return false
}

// clocks acquires component and returns the real target's Clocks.
func (v view) clocks(component string) (target.Clocks, error) {
	c, ok := v.h.t.(target.Clocks)
	if !ok {
		return nil, unsupported("clock of " + component)
	}
	return c, v.h.acquire(v.part, v.h.processKey(component))
}

func (v view) ClockOffset(name string) (time.Duration, error) {
	c, err := v.clocks(name)
	if err != nil {
		return 0, err
	}
	return c.ClockOffset(name)
}

func (v view) SetClockOffset(name string, d time.Duration) error {
	c, err := v.clocks(name)
	if err != nil {
		return err
	}
	return c.SetClockOffset(name, d)
}

func (v view) ResetClock(name string) error {
	c, err := v.clocks(name)
	if err != nil {
		return err
	}
	return c.ResetClock(name)
}

func (v view) WallFor(d time.Duration) time.Duration {
	if c, ok := v.h.t.(target.Clocks); ok {
		return c.WallFor(d)
	}
	return d
}

func (v view) SlowApply(ctx context.Context, member int, delay time.Duration) (func() error, error) {
	s, ok := v.h.t.(target.Slower)
	st, found := storeOf(v.h.t, member)
	if !ok || !found {
		return nil, unsupported(fmt.Sprintf("slowing member %d", member))
	}
	if err := v.h.acquire(v.part, v.h.processKey(st.Name)); err != nil {
		return nil, err
	}
	return s.SlowApply(ctx, member, delay)
}

// nodeKeys are what acting on node's power holds: the node and its
// kubelets.
func (v view) nodeKeys(node string) []string {
	out := []string{"node " + node}
	for _, c := range v.h.t.Components() {
		if c.Node == node {
			out = append(out, v.h.processKey(c.Name))
		}
	}
	return out
}

// power acquires node and returns the real target's PowerSwitch.
func (v view) power(node string) (target.PowerSwitch, error) {
	p, ok := v.h.t.(target.PowerSwitch)
	if !ok {
		return nil, unsupported("power of " + node)
	}
	return p, v.h.acquire(v.part, v.nodeKeys(node)...)
}

func (v view) PowerOff(ctx context.Context, node string) error {
	p, err := v.power(node)
	if err != nil {
		return err
	}
	return p.PowerOff(ctx, node)
}

func (v view) PowerOn(ctx context.Context, node string) error {
	p, err := v.power(node)
	if err != nil {
		return err
	}
	return p.PowerOn(ctx, node)
}

func (v view) PoweredOff(node string) bool {
	if p, ok := v.h.t.(target.PowerSwitch); ok {
		return p.PoweredOff(node)
	}
	return false
}

func (v view) Fenced(node string) bool {
	if p, ok := v.h.t.(target.PowerSwitch); ok {
		return p.Fenced(node)
	}
	return false
}

func (v view) DeleteNode(ctx context.Context, node string) error {
	a, ok := v.h.t.(target.NodeAdmin)
	if !ok {
		return unsupported("deleting node " + node)
	}
	if err := v.h.acquire(v.part, v.nodeKeys(node)...); err != nil {
		return err
	}
	return a.DeleteNode(ctx, node)
}

func (v view) APIStoreLinks(member int) []target.Link {
	if a, ok := v.h.t.(target.APIStore); ok {
		return a.APIStoreLinks(member)
	}
	return nil
}

func (v view) EnableFailpoint(ctx context.Context, name, term, component string) (func() error, error) {
	f, ok := v.h.t.(target.Failpoints)
	if !ok {
		return nil, unsupported("failpoint " + name)
	}
	if err := v.h.acquire(v.part, failpointKey(name)); err != nil {
		return nil, err
	}
	return f.EnableFailpoint(ctx, name, term, component)
}
