package checker

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/podsafe/podsafe/history"
)

// The guarantees the watch checkers judge: what a client that watches the
// store, and reads it over other connections, may rely on.
const (
	// GuaranteeWatchOrder: every watch stream delivers the watched objects'
	// committed changes in resourceVersion order, with no gap and no
	// duplicate, and a watch resumed from the last resourceVersion received
	// continues exactly there.
	GuaranteeWatchOrder = "STORE-WATCH-ORDER"
	// GuaranteeWatchValue: every watch event is a committed change: its
	// type, key and object are what the write at its resourceVersion made.
	GuaranteeWatchValue = "STORE-WATCH-VALUE"
	// GuaranteeReadAfterWatch: a read that begins after a watch delivered
	// resourceVersion N reflects every write up to N.
	GuaranteeReadAfterWatch = "STORE-READ-AFTER-WATCH"
	// GuaranteeList: a list returns exactly the objects in the store at its
	// resourceVersion.
	GuaranteeList = "STORE-LIST"
)

// The names of the watch checkers in results.
const (
	WatchOrderChecker     = "store-watch-order"
	WatchValueChecker     = "store-watch-value"
	ReadAfterWatchChecker = "store-read-after-watch"
	ListChecker           = "store-list"
)

// FuncList is the register workload's list operation: Key is the namespace
// listed, Items what it returned, RV the list's resourceVersion. It is not a
// register operation (IsRegisterOp): porcupine's per-key search leaves lists
// out, and CheckLists and CheckReadAfterWatch judge them against the
// committed history instead.
const FuncList = "list"

// watchApplies reports whether h records watches, which the watch checkers
// judge.
func watchApplies(h *history.History) bool { return len(h.Watch) > 0 }

// watchSet names what a watch watches: a resource (spelled as the store
// lines spell it) in one namespace.
type watchSet struct{ resource, namespace string }

func (s watchSet) String() string {
	return fmt.Sprintf("%s in namespace %q", s.resource, s.namespace)
}

// change is one committed change of a watched set, from a store line.
type change struct {
	typ   history.StoreEventType
	key   string
	value string
	rv    uint64
	t     int64 // when the store line was recorded
}

func (c change) String() string {
	if c.typ == history.StoreDeleted {
		return fmt.Sprintf("DELETED %s (last value %q) at RV %d", c.key, c.value, c.rv)
	}
	return fmt.Sprintf("%s %s=%q at RV %d", c.typ, c.key, c.value, c.rv)
}

// committed is the store's committed history of one watched set, rebuilt
// from the store lines: every change with RV ≤ through, in RV order.
type committed struct {
	set     watchSet
	changes []change
	at      map[uint64]int   // RV -> index in changes
	byKey   map[string][]int // key -> indices in changes, in RV order
	// through bounds what is known: every committed change of the set
	// with RV ≤ through is in changes; nothing is known above it.
	through uint64
	// recorded: the history records the set's committed changes at all
	// (store lines of it, or a line saying how far they were recorded).
	recorded bool
	// notBefore[i] is a lower bound on when changes[i] was committed: the
	// latest invoke among the operations that wrote the values of
	// changes[0..i] (a value names one write; RV order is commit order).
	notBefore []int64
	// undecodable counts store lines of the set that could not be read.
	undecodable int
}

// newCommitted rebuilds the committed history of set from h: the store
// lines of the set, complete up to the resourceVersion the
// history.LogStoreEventsEnd line names (without one, up to the last line
// recorded) or, when a history.LogStoreEventsLost line says changes were
// lost, up to the resourceVersion after which they were.
func newCommitted(h *history.History, set watchSet) *committed {
	c := &committed{set: set, at: map[uint64]int{}, byKey: map[string][]int{}}
	for _, e := range h.Store {
		if e.Resource != set.resource || e.Namespace != set.namespace {
			continue
		}
		c.recorded = true
		rv, err := strconv.ParseUint(e.RV, 10, 64)
		var v string
		if err == nil {
			v, err = watchValue(set.resource, e.Object)
		}
		if err != nil {
			c.undecodable++
			continue
		}
		c.changes = append(c.changes, change{typ: e.Type, key: e.Name, value: v, rv: rv, t: e.T})
	}
	sort.SliceStable(c.changes, func(i, j int) bool { return c.changes[i].rv < c.changes[j].rv })
	// One raft entry changes one object: a second line at an RV is the
	// same change recorded twice.
	kept := c.changes[:0]
	for _, ch := range c.changes {
		if len(kept) > 0 && kept[len(kept)-1].rv == ch.rv {
			continue
		}
		kept = append(kept, ch)
	}
	c.changes = kept
	if n := len(c.changes); n > 0 {
		c.through = c.changes[n-1].rv
	}
	for _, l := range h.Logs {
		if l.Msg != history.LogStoreEventsEnd || l.Attrs["resource"] != set.resource {
			continue
		}
		if ns, ok := l.Attrs["namespace"]; ok && ns != set.namespace {
			continue
		}
		if rv, err := strconv.ParseUint(l.Attrs["rv"], 10, 64); err == nil {
			c.through, c.recorded = max(c.through, rv), true
		}
	}
	for _, l := range h.Logs {
		if l.Msg == history.LogStoreEventsLost && l.Attrs["resource"] == set.resource {
			if rv, err := strconv.ParseUint(l.Attrs["after_rv"], 10, 64); err == nil {
				c.through = min(c.through, rv)
			}
		}
	}
	for len(c.changes) > 0 && c.changes[len(c.changes)-1].rv > c.through {
		c.changes = c.changes[:len(c.changes)-1]
	}
	writers := map[string]int64{}
	for _, op := range h.Ops {
		if op.Value != "" && (op.Func == FuncCreate || op.Func == FuncCAS) {
			if t, ok := writers[op.Value]; !ok || op.Invoke < t {
				writers[op.Value] = op.Invoke
			}
		}
	}
	c.notBefore = make([]int64, len(c.changes))
	var nb int64
	for i, ch := range c.changes {
		c.at[ch.rv] = i
		c.byKey[ch.key] = append(c.byKey[ch.key], i)
		if t, ok := writers[ch.value]; ok && ch.typ != history.StoreDeleted {
			nb = max(nb, t)
		}
		c.notBefore[i] = nb
	}
	return c
}

// between returns the indices of the changes with from < RV < to.
func (c *committed) between(from, to uint64) (lo, hi int) {
	lo = sort.Search(len(c.changes), func(i int) bool { return c.changes[i].rv > from })
	hi = sort.Search(len(c.changes), func(i int) bool { return c.changes[i].rv >= to })
	return lo, max(lo, hi)
}

// lastWrite returns the index of key's last change with RV ≤ rv, or -1.
func (c *committed) lastWrite(key string, rv uint64) int {
	idx := c.byKey[key]
	j := sort.Search(len(idx), func(i int) bool { return c.changes[idx[i]].rv > rv }) - 1
	if j < 0 {
		return -1
	}
	return idx[j]
}

// nextDelete returns the index of key's first deletion after changes[i], or
// -1.
func (c *committed) nextDelete(key string, i int) int {
	idx := c.byKey[key]
	j := sort.Search(len(idx), func(k int) bool { return idx[k] > i })
	for ; j < len(idx); j++ {
		if c.changes[idx[j]].typ == history.StoreDeleted {
			return idx[j]
		}
	}
	return -1
}

// stateCursor walks a committed history forward and keeps the state at its
// position: the keys present and the last change of each.
type stateCursor struct {
	c     *committed
	next  int
	state map[string]change
}

func (c *committed) cursor() *stateCursor {
	return &stateCursor{c: c, state: map[string]change{}}
}

// at returns the state at rv, which must not be below the rv of the
// previous call. The map is the cursor's: read it before the next call.
func (s *stateCursor) at(rv uint64) map[string]change {
	for s.next < len(s.c.changes) && s.c.changes[s.next].rv <= rv {
		ch := s.c.changes[s.next]
		if ch.typ == history.StoreDeleted {
			delete(s.state, ch.key)
		} else {
			s.state[ch.key] = ch
		}
		s.next++
	}
	return s.state
}

// missing explains why a committed history cannot judge anything.
func (c *committed) missing() string {
	return fmt.Sprintf("the history records no committed change of %s (store lines, or a %q log line saying how far they were recorded)",
		c.set, history.LogStoreEventsEnd)
}

// watchStream is one watch request of a watcher, as recorded.
type watchStream struct {
	watcher string
	n       int
	open    history.WatchEvent
	set     watchSet
	events  []history.WatchEvent // deliveries, bookmarks included
	close   *history.WatchEvent
}

func (s *watchStream) String() string {
	from := "from RV " + s.open.FromRV
	switch s.open.Reason {
	case history.WatchFromList:
		from += fmt.Sprintf(" (the RV of its list, op %d)", s.open.List)
	case history.WatchResume:
		from += " (resumed)"
	case watchRewind:
		from += " (rewound to an older RV the watcher had received)"
	}
	return fmt.Sprintf("watcher %s stream %d, opened %s at %s", s.watcher, s.n, from, nanos(s.open.T))
}

// watchers groups h's watch lines by watcher, each watcher's streams in
// order, and returns the watchers sorted by name and the sets watched.
// Lines of a stream whose opening was not recorded are dropped and counted.
func watchers(h *history.History) (byName map[string][]*watchStream, names []string, sets []watchSet, orphans int) {
	byName = map[string][]*watchStream{}
	open := map[string]*watchStream{}
	seen := map[watchSet]bool{}
	for _, l := range h.Watch {
		cur := open[l.Watcher]
		if l.Phase == history.WatchOpen {
			s := &watchStream{watcher: l.Watcher, n: l.Stream, open: l, set: watchSet{l.Resource, l.Namespace}}
			if _, ok := byName[l.Watcher]; !ok {
				names = append(names, l.Watcher)
			}
			byName[l.Watcher] = append(byName[l.Watcher], s)
			open[l.Watcher] = s
			if !seen[s.set] {
				seen[s.set] = true
				sets = append(sets, s.set)
			}
			continue
		}
		if cur == nil || cur.n != l.Stream || cur.close != nil {
			orphans++
			continue
		}
		switch l.Phase {
		case history.WatchDeliver:
			cur.events = append(cur.events, l)
		case history.WatchClose:
			e := l
			cur.close = &e
		default:
			orphans++
		}
	}
	sort.Strings(names)
	return byName, names, sets, orphans
}

// parseRV reads a resourceVersion; ok is false for an empty or
// non-numeric one.
func parseRV(s string) (uint64, bool) {
	rv, err := strconv.ParseUint(s, 10, 64)
	return rv, err == nil
}

// describeDelivery renders one delivered event for evidence.
func describeDelivery(e history.WatchEvent) string {
	if e.Type == string(history.StoreDeleted) {
		return fmt.Sprintf("DELETED %s (value %q) at RV %s, received at %s", e.Key, e.Value, e.RV, nanos(e.T))
	}
	if e.Key == "" {
		return fmt.Sprintf("%s at RV %s, received at %s", e.Type, e.RV, nanos(e.T))
	}
	return fmt.Sprintf("%s %s=%q at RV %s, received at %s", e.Type, e.Key, e.Value, e.RV, nanos(e.T))
}

// describeChanges renders up to a few changes, and how many more there are.
func describeChanges(cs []change) string {
	const shown = 4
	parts := make([]string, 0, shown)
	for i, ch := range cs {
		if i == shown {
			parts = append(parts, fmt.Sprintf("and %d more", len(cs)-shown))
			break
		}
		parts = append(parts, ch.String())
	}
	return strings.Join(parts, ", ")
}

// committedFor returns the committed history of every set, each built
// once per view.
func committedFor(v *view, sets []watchSet) map[watchSet]*committed {
	v.watchMu.Lock()
	defer v.watchMu.Unlock()
	if v.watched == nil {
		v.watched = map[watchSet]*committed{}
	}
	out := make(map[watchSet]*committed, len(sets))
	for _, s := range sets {
		c := v.watched[s]
		if c == nil {
			c = newCommitted(v.h, s)
			v.watched[s] = c
		}
		out[s] = c
	}
	return out
}
