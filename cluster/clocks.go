package cluster

import (
	"slices"
	"sync"

	"github.com/podsafe/podsafe/cluster/scaledclock"
)

// Each component reads time from its own view of the cluster clock
// (scaledclock.Clock.Derive): the view runs with the cluster clock until a
// nemesis jumps it (a skewed machine clock) or pauses it (a stopped
// process). Views belong to the component's place, not to one run of it: a
// kubelet restarted on a skewed node keeps the skew, as it would keep its
// machine's clock. Container runtimes and the storage server stay on the
// cluster clock, since what they write is the oracle (the ledger).

// ComponentScheduler names the scheduler's clock view and pause target.
const ComponentScheduler = "scheduler"

// KubeletComponent names the clock view and pause target of node's kubelet.
func KubeletComponent(node string) string { return "kubelet/" + node }

// ControllerComponent names the clock view of the named controller (see
// ControllerNames, ControllerFencing).
func ControllerComponent(name string) string { return "controller/" + name }

// componentState is the cluster's state of clock views and pauses (a field
// of Cluster, wired here and in pause.go).
type componentState struct {
	once    sync.Once // makes the maps
	mu      sync.Mutex
	views   map[string]*scaledclock.Clock
	handed  map[string]bool // views handed to a component by ComponentClock
	paused  map[string]bool // see pause.go
	pauseMu sync.Mutex      // serialises Pause and Resume
}

func (c *Cluster) components() *componentState {
	st := &c.comps
	st.once.Do(func() {
		st.views, st.handed, st.paused = map[string]*scaledclock.Clock{}, map[string]bool{}, map[string]bool{}
	})
	return st
}

// view returns component's clock view, creating it, without marking it
// handed out.
func (c *Cluster) view(component string) *scaledclock.Clock {
	st := c.components()
	st.mu.Lock()
	defer st.mu.Unlock()
	v := st.views[component]
	if v == nil {
		v = c.clock.Derive()
		st.views[component] = v
	}
	return v
}

// ComponentClock returns component's own view of the cluster clock (see
// KubeletComponent, ControllerComponent, ComponentScheduler), creating it on
// first use. The cluster hands it to the component it starts; a nemesis
// jumps it (Jump, SetOffset) to skew that component alone and heals with
// ResetOffset. Safe for concurrent use.
func (c *Cluster) ComponentClock(component string) *scaledclock.Clock {
	v := c.view(component)
	st := c.components()
	st.mu.Lock()
	st.handed[component] = true
	st.mu.Unlock()
	return v
}

// ClockComponents lists, sorted, the components that have been handed their
// own clock view: the targets a clock fault can skew.
func (c *Cluster) ClockComponents() []string {
	st := c.components()
	st.mu.Lock()
	defer st.mu.Unlock()
	names := make([]string, 0, len(st.handed))
	for n := range st.handed {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
