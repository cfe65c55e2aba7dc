package framework

import "sync"

// StateKey names one plugin's entry in a CycleState.
type StateKey string

// StateData is what a plugin keeps in a CycleState between its extension
// points. Clone must return a copy that can be changed without affecting the
// original, so preemption can dry-run pod removals.
type StateData interface {
	Clone() StateData
}

// CycleState carries plugin data through one scheduling cycle of one pod. It
// is safe for concurrent use; the data it holds is not, so plugins write
// during PreFilter/PreScore and only read during Filter/Score.
type CycleState struct {
	mu      sync.RWMutex
	storage map[StateKey]StateData
	// SkipFilterPlugins and SkipScorePlugins hold the plugins whose PreFilter
	// or PreScore returned Skip.
	SkipFilterPlugins map[string]bool
	SkipScorePlugins  map[string]bool
}

// NewCycleState returns an empty state.
func NewCycleState() *CycleState {
	return &CycleState{storage: map[StateKey]StateData{}}
}

// Read returns the data stored under key, and false if there is none.
func (c *CycleState) Read(key StateKey) (StateData, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	d, ok := c.storage[key]
	return d, ok
}

// Write stores data under key.
func (c *CycleState) Write(key StateKey, data StateData) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.storage[key] = data
}

// Clone returns a deep copy: every StateData is cloned.
func (c *CycleState) Clone() *CycleState {
	if c == nil {
		return nil
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := NewCycleState()
	for k, v := range c.storage {
		out.storage[k] = v.Clone()
	}
	out.SkipFilterPlugins = copySet(c.SkipFilterPlugins)
	out.SkipScorePlugins = copySet(c.SkipScorePlugins)
	return out
}

func copySet(m map[string]bool) map[string]bool {
	if m == nil {
		return nil
	}
	out := make(map[string]bool, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
