package cluster

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// A paused component is a stopped process (SIGSTOP), which in one process
// takes two parts, both lifted only by Resume:
//
//   - its network traffic is held (simnet.HoldHost, HoldPort): nothing it
//     sends arrives and nothing reaches it, connections stall and fail after
//     the detection timeout, and no nemesis heal, HealAll or network fence
//     lifts the hold;
//   - its clock views are paused (scaledclock.Clock.Pause): its timers,
//     tickers and sleeps deliver nothing and its readings stand still, so it
//     takes no timed action of its own either (a kubelet kills no container
//     at the end of a grace period, a controller's resync does not run).
//
// Its goroutines are not stopped: one already working on an event carries on,
// but it can only act through the network, which is held. On Resume the views
// jump to the present, whatever fell due fires at once and the traffic
// flows: the component acts on the state it had when paused until its
// watches catch up, which is the point of the fault.
//
// A kubelet's hold covers only its connections to the API (its node's
// containers keep running and keep writing to the storage: SIGSTOP of the
// kubelet does not stop them). The controllers share one host, as the
// controllers of one controller-manager process do, so they pause together
// (ComponentControllerManager). A scheduler pause holds its host; its clock
// pauses only once scheduler.go hands it ComponentClock(ComponentScheduler).

// ComponentControllerManager names the pause target of every controller at
// once (they share ControllerHost).
const ComponentControllerManager = "controller-manager"

// Errors of Pause and Resume.
var (
	// ErrUnknownComponent: no component of that name can be paused.
	ErrUnknownComponent = errors.New("unknown component")
	// ErrAlreadyPaused: Pause found the component paused.
	ErrAlreadyPaused = errors.New("component already paused")
	// ErrNotPaused: Resume found the component running.
	ErrNotPaused = errors.New("component not paused")
)

// pauseTarget is what pausing one component holds and freezes.
type pauseTarget struct {
	hosts []string    // held whole (HoldHost)
	ports [][2]string // held flows: from host, to address (HoldPort)
	views []string    // clock views paused
}

func (c *Cluster) pauseTarget(component string) (pauseTarget, error) {
	switch {
	case component == ComponentScheduler:
		return pauseTarget{hosts: []string{SchedulerHost}, views: []string{ComponentScheduler}}, nil
	case component == ComponentControllerManager:
		t := pauseTarget{hosts: []string{ControllerHost}}
		for _, n := range append(slices.Clone(ControllerNames), ControllerFencing) {
			t.views = append(t.views, ControllerComponent(n))
		}
		return t, nil
	case strings.HasPrefix(component, KubeletComponent("")):
		node := strings.TrimPrefix(component, KubeletComponent(""))
		if _, ok := c.nodeSpec(node); !ok {
			return pauseTarget{}, fmt.Errorf("%w: %q: no node %q in the topology", ErrUnknownComponent, component, node)
		}
		t := pauseTarget{views: []string{component}}
		for _, h := range c.MemberHosts() {
			t.ports = append(t.ports, [2]string{node, h + ":" + APIPort})
		}
		return t, nil
	}
	return pauseTarget{}, fmt.Errorf("%w: %q (pause %s, %s or %s)", ErrUnknownComponent, component,
		KubeletComponent("<node>"), ComponentScheduler, ComponentControllerManager)
}

// Pause stops component (KubeletComponent(node), ComponentScheduler or
// ComponentControllerManager) as SIGSTOP would, until Resume; see the top of
// pause.go. The component need not be running: one started while paused
// starts paused. Safe for concurrent use.
func (c *Cluster) Pause(component string) error {
	t, err := c.pauseTarget(component)
	if err != nil {
		return err
	}
	st := c.components()
	st.pauseMu.Lock()
	defer st.pauseMu.Unlock()
	st.mu.Lock()
	if st.paused[component] {
		st.mu.Unlock()
		return fmt.Errorf("%s: %w", component, ErrAlreadyPaused)
	}
	st.paused[component] = true
	st.mu.Unlock()
	// Traffic first, then time: nothing the component does from here on
	// reaches anyone.
	for _, h := range t.hosts {
		c.net.HoldHost(h)
	}
	for _, p := range t.ports {
		if err := c.net.HoldPort(p[0], p[1]); err != nil {
			return fmt.Errorf("pausing %s: %w", component, err)
		}
	}
	for _, v := range t.views {
		c.view(v).Pause()
	}
	c.log.Info("component paused", "component", component)
	return nil
}

// Resume lets a paused component run again: its clock views jump to the
// present and fire what fell due, then its traffic flows. Safe for
// concurrent use.
func (c *Cluster) Resume(component string) error {
	t, err := c.pauseTarget(component)
	if err != nil {
		return err
	}
	st := c.components()
	st.pauseMu.Lock()
	defer st.pauseMu.Unlock()
	st.mu.Lock()
	if !st.paused[component] {
		st.mu.Unlock()
		return fmt.Errorf("%s: %w", component, ErrNotPaused)
	}
	delete(st.paused, component)
	st.mu.Unlock()
	for _, v := range t.views {
		c.view(v).Resume()
	}
	var errs []error
	for _, h := range t.hosts {
		c.net.ReleaseHost(h)
	}
	for _, p := range t.ports {
		errs = append(errs, c.net.ReleasePort(p[0], p[1]))
	}
	c.log.Info("component resumed", "component", component)
	return errors.Join(errs...)
}

// Paused reports whether component is paused.
func (c *Cluster) Paused(component string) bool {
	st := c.components()
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.paused[component]
}

// PausedComponents lists the paused components, sorted.
func (c *Cluster) PausedComponents() []string {
	st := c.components()
	st.mu.Lock()
	defer st.mu.Unlock()
	var names []string
	for n := range st.paused {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
