package clientconf

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
)

// entry is what a view knows of one object: its name and resourceVersion.
type entry struct {
	name string // namespace/name, or name for cluster-scoped objects
	rv   string
}

// view maps UID to entry: the objects of one kind as some observer sees them.
type view map[types.UID]entry

// viewOf builds a view of objs (typed objects or pointers to them).
func viewOf[T any](objs []T) (view, error) {
	v := view{}
	for i := range objs {
		var o any = objs[i]
		if _, ok := o.(metav1.Object); !ok {
			o = &objs[i]
		}
		m, err := meta.Accessor(o)
		if err != nil {
			return nil, fmt.Errorf("reading the metadata of a %T: %w", objs[i], err)
		}
		v[m.GetUID()] = entry{name: objectName(m), rv: m.GetResourceVersion()}
	}
	return v, nil
}

func objectName(m metav1.Object) string {
	if m.GetNamespace() == "" {
		return m.GetName()
	}
	return m.GetNamespace() + "/" + m.GetName()
}

// diff lists how got differs from want (the server), at most limit lines and
// a count of the rest; nil when they are equal.
func diff(want, got view, limit int) []string {
	var out []string
	for uid, w := range want {
		g, ok := got[uid]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("missing %s (uid %s, rv %s)", w.name, uid, w.rv))
		case g.rv != w.rv:
			out = append(out, fmt.Sprintf("stale %s (uid %s): rv %s, server has %s", w.name, uid, g.rv, w.rv))
		}
	}
	for uid, g := range got {
		if _, ok := want[uid]; !ok {
			out = append(out, fmt.Sprintf("extra %s (uid %s, rv %s): gone from the server", g.name, uid, g.rv))
		}
	}
	slices.Sort(out)
	if len(out) > limit {
		out = append(out[:limit], fmt.Sprintf("... and %d more", len(out)-limit))
	}
	return out
}

// converge polls until observe's view equals the server's (list, a fresh
// linearizable LIST each round) or limit passes, and returns the rounds it
// took and the last difference. Objects keep changing while the cluster
// runs (node leases renew, events are written), so a round that meets a
// change between the LIST and the look at the cache simply tries again.
func converge(ctx context.Context, limit time.Duration, list, observe func(context.Context) (view, error)) (int, []string, error) {
	deadline := time.Now().Add(limit)
	var last []string
	for round := 1; ; round++ {
		want, err := list(ctx)
		if err == nil {
			var got view
			got, err = observe(ctx)
			if err == nil {
				last = diff(want, got, 12)
				if len(last) == 0 {
					return round, nil, nil
				}
			}
		}
		if err != nil {
			last = []string{err.Error()}
		}
		if time.Now().After(deadline) {
			return round, last, fmt.Errorf("no agreement with the server after %d rounds in %s", round, limit)
		}
		select {
		case <-ctx.Done():
			return round, last, ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// notes records what an informer's event handler was told about one kind:
// the view its notifications add up to, how many of each it got, and any
// notification that went back in time.
type notes struct {
	kind string

	mu         sync.Mutex
	state      view
	adds       int
	updates    int
	deletes    int
	tombstones int // deletes seen only as DeletedFinalStateUnknown
	// updates whose new object has another UID (see OnUpdate)
	replacements int
	backwards    []string
	onChange     func(cur metav1.Object) // optional: told of every add and update, under mu
}

func newNotes(kind string) *notes { return &notes{kind: kind, state: view{}} }

var _ toolscache.ResourceEventHandler = (*notes)(nil)

// OnAdd implements toolscache.ResourceEventHandler.
func (n *notes) OnAdd(obj any, _ bool) {
	m, err := meta.Accessor(obj)
	if err != nil {
		n.fail("add of a %T without metadata", obj)
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.adds++
	if old, ok := n.state[m.GetUID()]; ok {
		// A relist that finds an object the handler knows delivers an
		// update, never an add.
		n.backwards = append(n.backwards, fmt.Sprintf("add of %s at rv %s while known at rv %s", objectName(m), m.GetResourceVersion(), old.rv))
	}
	n.state[m.GetUID()] = entry{name: objectName(m), rv: m.GetResourceVersion()}
	if n.onChange != nil {
		n.onChange(m)
	}
}

// OnUpdate implements toolscache.ResourceEventHandler. An update whose
// old and new objects have different UIDs is a replacement: the object was
// deleted and another of its name created while the informer was not
// watching, and its relist found the name in both its cache and the new
// list (client-go keys its cache by namespace/name). That counts as the
// old object's delete and the new one's add.
func (n *notes) OnUpdate(oldObj, newObj any) {
	o, err1 := meta.Accessor(oldObj)
	m, err2 := meta.Accessor(newObj)
	if err1 != nil || err2 != nil {
		n.fail("update of a %T without metadata", newObj)
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.updates++
	if o.GetUID() != m.GetUID() {
		n.replacements++
		if _, ok := n.state[o.GetUID()]; !ok {
			n.backwards = append(n.backwards, fmt.Sprintf("replacement of %s (uid %s) never added", objectName(o), o.GetUID()))
		}
		delete(n.state, o.GetUID())
		if old, ok := n.state[m.GetUID()]; ok {
			n.backwards = append(n.backwards, fmt.Sprintf("replacement by %s at rv %s while known at rv %s", objectName(m), m.GetResourceVersion(), old.rv))
		}
	} else {
		prev, known := n.state[m.GetUID()]
		switch {
		case !known:
			n.backwards = append(n.backwards, fmt.Sprintf("update of %s (uid %s) at rv %s never added", objectName(m), m.GetUID(), m.GetResourceVersion()))
		case rvLess(m.GetResourceVersion(), prev.rv):
			n.backwards = append(n.backwards, fmt.Sprintf("update of %s from rv %s back to rv %s", objectName(m), prev.rv, m.GetResourceVersion()))
		}
	}
	n.state[m.GetUID()] = entry{name: objectName(m), rv: m.GetResourceVersion()}
	if n.onChange != nil {
		n.onChange(m)
	}
}

// OnDelete implements toolscache.ResourceEventHandler.
func (n *notes) OnDelete(obj any) {
	tomb, isTomb := obj.(toolscache.DeletedFinalStateUnknown)
	if isTomb {
		obj = tomb.Obj
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		n.fail("delete of a %T without metadata", obj)
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.deletes++
	if isTomb {
		n.tombstones++
	}
	if _, ok := n.state[m.GetUID()]; !ok {
		n.backwards = append(n.backwards, fmt.Sprintf("delete of %s (uid %s) never added", objectName(m), m.GetUID()))
	}
	delete(n.state, m.GetUID())
}

func (n *notes) fail(format string, args ...any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.backwards = append(n.backwards, fmt.Sprintf(format, args...))
}

// snapshot returns a copy of the view the notifications add up to.
func (n *notes) snapshot(context.Context) (view, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make(view, len(n.state))
	for k, v := range n.state {
		out[k] = v
	}
	return out, nil
}

// disorder returns the notifications that went back in time.
func (n *notes) disorder() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.backwards)
}

// relisted returns the counts of what only a relist delivers: tombstones
// and replacements.
func (n *notes) relisted() (tombstones, replacements int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.tombstones, n.replacements
}

// summary is one line of counts for the test's log.
func (n *notes) summary() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return fmt.Sprintf("%s: %d adds, %d updates (%d replacing an object of the same name), %d deletes (%d as tombstones), %d live",
		n.kind, n.adds, n.updates, n.replacements, n.deletes, n.tombstones, len(n.state))
}

// rvLess compares two of podsafe's resourceVersions (raft indexes). They
// are opaque to clients in general; podsafe documents them as its log's
// indexes, which is what lets the test say a notification went backwards.
func rvLess(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	return err1 == nil && err2 == nil && x < y
}

// storeView is the view of an informer's cache.
func storeView(s toolscache.Store) func(context.Context) (view, error) {
	return func(context.Context) (view, error) {
		objs := s.List()
		v := view{}
		for _, o := range objs {
			m, err := meta.Accessor(o)
			if err != nil {
				return nil, fmt.Errorf("cached %T without metadata: %w", o, err)
			}
			v[m.GetUID()] = entry{name: objectName(m), rv: m.GetResourceVersion()}
		}
		return v, nil
	}
}
