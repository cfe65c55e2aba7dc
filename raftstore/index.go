package raftstore

import "slices"

// IndexFunc returns the index value of a stored object of one resource: the
// value a watch or a list can be narrowed to (for pods, spec.nodeName). It
// must be deterministic and must not keep data. An object it cannot read
// has the value "".
type IndexFunc func(data []byte) string

// Narrowing narrows a List or a Watch; see ByIndex.
type Narrowing struct {
	index string
	set   bool
}

// ByIndex narrows a List or a Watch of a resource the store indexes
// (Config.Indexes) to the objects whose index value is value: a List returns
// only those, a Watch gets only the events whose object had or has that
// value. On a resource without an index it narrows nothing. Either way the
// result is a superset of what a caller filtering by the same value wants,
// so callers still filter.
func ByIndex(value string) Narrowing { return Narrowing{index: value, set: true} }

// narrowing folds opts into one (the last ByIndex wins).
func narrowing(opts []Narrowing) Narrowing {
	var n Narrowing
	for _, o := range opts {
		if o.set {
			n = o
		}
	}
	return n
}

// stateIndex is the index value of every current object of the indexed
// resources, and the objects of each value. It is the hub's, guarded by
// hub.mu; publish, reset and reindex keep it in step with the state machine
// (they run under the state machine's lock).
type stateIndex struct {
	funcs   map[string]IndexFunc
	byKey   map[string]map[Key]string              // resource -> key -> value
	byValue map[string]map[string]map[Key]struct{} // resource -> value -> keys
}

func newStateIndex(funcs map[string]IndexFunc) *stateIndex {
	x := &stateIndex{funcs: map[string]IndexFunc{}, byKey: map[string]map[Key]string{}, byValue: map[string]map[string]map[Key]struct{}{}}
	for res, f := range funcs {
		if f != nil {
			x.funcs[res] = f
			x.byKey[res] = map[Key]string{}
			x.byValue[res] = map[string]map[Key]struct{}{}
		}
	}
	return x
}

// indexed reports whether resource has an index.
func (x *stateIndex) indexed(resource string) bool { return x.funcs[resource] != nil }

// apply records ev and returns the value its object has now and the value it
// had before; known is false when the earlier value is not known (the key
// was never seen since the index was last rebuilt), and then the event
// concerns every value.
func (x *stateIndex) apply(ev Event) (value, prev string, known bool) {
	f := x.funcs[ev.Object.Key.Resource]
	if f == nil {
		return "", "", false
	}
	key := ev.Object.Key
	value = f(ev.Object.Data)
	prev, known = x.byKey[key.Resource][key]
	if ev.Type == Added {
		prev, known = value, true
	}
	if known {
		x.unset(key, prev)
	}
	if ev.Type != Deleted {
		x.set(key, value)
	}
	return value, prev, known
}

func (x *stateIndex) set(key Key, value string) {
	x.byKey[key.Resource][key] = value
	keys := x.byValue[key.Resource][value]
	if keys == nil {
		keys = map[Key]struct{}{}
		x.byValue[key.Resource][value] = keys
	}
	keys[key] = struct{}{}
}

func (x *stateIndex) unset(key Key, value string) {
	delete(x.byKey[key.Resource], key)
	if keys := x.byValue[key.Resource][value]; keys != nil {
		delete(keys, key)
		if len(keys) == 0 {
			delete(x.byValue[key.Resource], value)
		}
	}
}

// rebuild recomputes the index from objects (after a snapshot restore).
func (x *stateIndex) rebuild(objects map[string]map[Key]stored) {
	for res, f := range x.funcs {
		x.byKey[res] = map[Key]string{}
		x.byValue[res] = map[string]map[Key]struct{}{}
		for k, s := range objects[res] {
			x.set(k, f(s.data))
		}
	}
}

// keys returns the keys of resource whose value is value, and whether the
// resource is indexed at all.
func (x *stateIndex) keys(resource, value string) ([]Key, bool) {
	if !x.indexed(resource) {
		return nil, false
	}
	keys := make([]Key, 0, len(x.byValue[resource][value]))
	for k := range x.byValue[resource][value] {
		keys = append(keys, k)
	}
	return keys, true
}

// listNarrowed is list narrowed by n: through the index when resource has
// one, otherwise the whole list.
func (f *fsm) listNarrowed(resource, namespace string, n Narrowing) ([]Object, uint64) {
	if !n.set {
		return f.list(resource, namespace)
	}
	f.mu.RLock()
	keys, ok := f.hub.indexKeys(resource, n.index)
	if !ok {
		f.mu.RUnlock()
		return f.list(resource, namespace)
	}
	objs := make([]Object, 0, len(keys))
	for _, k := range keys {
		if s, found := f.objects[resource][k]; found && (namespace == "" || k.Namespace == namespace) {
			objs = append(objs, Object{Key: k, Data: s.data, RV: s.rv})
		}
	}
	rev := f.applied
	f.mu.RUnlock()
	slices.SortFunc(objs, func(a, b Object) int { return compareKeys(a.Key, b.Key) })
	return objs, rev
}

// reindex rebuilds the hub's index from the state machine's objects; f.mu
// must be held.
func (f *fsm) reindexLocked() { f.hub.reindex(f.objects) }
