package framework

// StateKey names one plugin's entry in a CycleState.
type StateKey string

// StateData is what a plugin keeps in a CycleState between its extension
// points. Clone must return a copy that can be changed without affecting the
// original, so preemption can dry-run pod removals. Data that is never
// changed after PreFilter may return itself.
type StateData interface {
	Clone() StateData
}

type stateEntry struct {
	key  StateKey
	data StateData
}

// CycleState carries plugin data through one scheduling cycle of one pod.
// Writes (Write, SetSkipFilter, SetSkipScore) happen during PreFilter and
// PreScore on the cycle's goroutine; Read, the Skip queries and Clone may
// then run on many goroutines at once, as filters and preemption dry-runs
// do. It takes no lock: with thousands of nodes filtered per cycle, a
// shared lock word is the bottleneck.
//
// Preemption clones the state once per candidate node, so it is kept small:
// a few entries in a slice, and skip sets shared between clones and copied
// only when written.
type CycleState struct {
	entries []stateEntry
	inline  [4]stateEntry
	// skipFilter and skipScore hold the plugins whose PreFilter or PreScore
	// returned Skip; never changed in place, so clones share them.
	skipFilter map[string]bool
	skipScore  map[string]bool
	// filterMask caches skipFilter as bits over the framework's filters,
	// valid while maskSet.
	filterMask uint64
	maskSet    bool
}

// NewCycleState returns an empty state.
func NewCycleState() *CycleState {
	return &CycleState{}
}

// Read returns the data stored under key, and false if there is none.
func (c *CycleState) Read(key StateKey) (StateData, bool) {
	for _, e := range c.entries {
		if e.key == key {
			return e.data, true
		}
	}
	return nil, false
}

// Write stores data under key.
func (c *CycleState) Write(key StateKey, data StateData) {
	for i := range c.entries {
		if c.entries[i].key == key {
			c.entries[i].data = data
			return
		}
	}
	c.entries = append(c.entries, stateEntry{key: key, data: data})
}

// Clone returns a deep copy: every StateData is cloned.
func (c *CycleState) Clone() *CycleState {
	if c == nil {
		return nil
	}
	out := &CycleState{skipFilter: c.skipFilter, skipScore: c.skipScore, filterMask: c.filterMask, maskSet: c.maskSet}
	// One allocation for the state and its few entries.
	out.entries = out.inline[:0]
	for _, e := range c.entries {
		out.entries = append(out.entries, stateEntry{key: e.key, data: e.data.Clone()})
	}
	return out
}

// SkipFilter reports whether the named plugin's PreFilter returned Skip.
func (c *CycleState) SkipFilter(plugin string) bool {
	return c.skipFilter[plugin]
}

// SkipScore reports whether the named plugin's PreScore returned Skip.
func (c *CycleState) SkipScore(plugin string) bool {
	return c.skipScore[plugin]
}

// skipFilterSet returns the shared, read-only skip set of the filters.
func (c *CycleState) skipFilterSet() map[string]bool {
	return c.skipFilter
}

// SetSkipFilter records that the named plugin's Filter is not needed.
func (c *CycleState) SetSkipFilter(plugin string) {
	c.skipFilter = with(c.skipFilter, plugin)
	c.maskSet = false
}

// SetSkipScore records that the named plugin's Score is not needed.
func (c *CycleState) SetSkipScore(plugin string) {
	c.skipScore = with(c.skipScore, plugin)
}

// with returns a copy of set with name added: sets are shared by clones.
func with(set map[string]bool, name string) map[string]bool {
	out := make(map[string]bool, len(set)+1)
	for k, v := range set {
		out[k] = v
	}
	out[name] = true
	return out
}
