package raftstore

import (
	"context"
	"fmt"
	"sort"
	"sync"
)

// hub keeps the last events of all resources in apply order and fans new
// events out to watchers. publish never blocks on a watcher: each watcher has
// its own bounded queue drained by its own goroutine, and a watcher whose queue
// overflows is closed. A watcher narrowed to one index value (ByIndex) is
// queued only the events whose object had or has that value, so a pod event
// reaches the kubelet of its node, not every kubelet.
type hub struct {
	mu       sync.Mutex
	buf      []hubEvent // ring of the most recent events, oldest at head
	head, n  int
	floor    uint64 // every event with RV > floor is in buf
	last     uint64 // RV of the newest event, or floor if none
	watchers map[string]*watcherSet
	index    *stateIndex
	closed   bool
}

// hubEvent is an event with the index values of its object (on an indexed
// resource): the value it has and the one it had before. When the earlier
// value is not known (known false) the event concerns every value.
type hubEvent struct {
	ev          Event
	value, prev string
	indexed     bool
	known       bool
}

// concerns reports whether he belongs in a watch narrowed to value.
func (he *hubEvent) concerns(value string) bool {
	return !he.indexed || !he.known || he.value == value || he.prev == value
}

// watcherSet is the watchers of one resource: those that see every event,
// and those narrowed to one index value, by value.
type watcherSet struct {
	all     map[*watcher]struct{}
	byValue map[string]map[*watcher]struct{}
}

func (ws *watcherSet) empty() bool { return len(ws.all) == 0 && len(ws.byValue) == 0 }

func newHub(window int, indexes map[string]IndexFunc) *hub {
	return &hub{buf: make([]hubEvent, window), watchers: map[string]*watcherSet{}, index: newStateIndex(indexes)}
}

// publish records ev (whose RV is greater than every earlier one) and queues
// it for the watchers of its resource it concerns.
func (h *hub) publish(ev Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	he := hubEvent{ev: ev}
	if h.index.indexed(ev.Object.Key.Resource) {
		he.indexed = true
		he.value, he.prev, he.known = h.index.apply(ev)
	}
	if h.n == len(h.buf) {
		h.floor = h.buf[h.head].ev.Object.RV
		h.buf[h.head] = hubEvent{}
		h.head = (h.head + 1) % len(h.buf)
		h.n--
	}
	h.buf[(h.head+h.n)%len(h.buf)] = he
	h.n++
	h.last = ev.Object.RV
	ws := h.watchers[ev.Object.Key.Resource]
	if ws == nil {
		return
	}
	h.pushAll(ws.all, ev)
	switch {
	case !he.indexed || !he.known:
		for _, narrowed := range ws.byValue {
			h.pushAll(narrowed, ev)
		}
	default:
		h.pushAll(ws.byValue[he.value], he.narrowedTo(he.value))
		if he.prev != he.value {
			h.pushAll(ws.byValue[he.prev], ev)
		}
	}
}

// narrowedTo is the event as a watch narrowed to value gets it.
func (he *hubEvent) narrowedTo(value string) Event {
	ev := he.ev
	ev.Entered = he.indexed && he.known && he.prev != value && he.value == value
	return ev
}

// pushAll queues ev for each of set, dropping those whose queue is full.
func (h *hub) pushAll(set map[*watcher]struct{}, ev Event) {
	for w := range set {
		if !w.push(ev) {
			h.dropLocked(w)
		}
	}
}

// reset forgets all events and closes every watcher, whose streams would
// otherwise have a gap: the state jumped to a snapshot taken at index.
func (h *hub) reset(index uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	clear(h.buf)
	h.head, h.n = 0, 0
	h.floor, h.last = index, index
	h.dropAllLocked()
}

// reindex rebuilds the index of the current objects (after a snapshot
// restore replaced them).
func (h *hub) reindex(objects map[string]map[Key]stored) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.index.rebuild(objects)
}

// indexKeys returns the keys of resource whose index value is value, and
// whether resource is indexed.
func (h *hub) indexKeys(resource, value string) ([]Key, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.index.keys(resource, value)
}

// close closes every watcher and refuses new ones.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	h.dropAllLocked()
}

func (h *hub) dropAllLocked() {
	for _, ws := range h.watchers {
		for w := range ws.all {
			h.dropLocked(w)
		}
		for _, narrowed := range ws.byValue {
			for w := range narrowed {
				h.dropLocked(w)
			}
		}
	}
}

// at returns the i-th oldest event in the window.
func (h *hub) at(i int) *hubEvent { return &h.buf[(h.head+i)%len(h.buf)] }

// watch registers a watcher of resource that first receives the remembered
// events with RV > fromRV and then every new one (of those n narrows it to).
// Registration and the history copy happen under one lock with publish, so no
// event is missed or repeated.
func (h *hub) watch(ctx context.Context, resource string, fromRV uint64, n Narrowing) (<-chan Event, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	if fromRV == 0 {
		fromRV = h.last
	}
	if fromRV < h.floor {
		return nil, fmt.Errorf("%w: resourceVersion %d is older than the oldest remembered %d", ErrTooOld, fromRV, h.floor)
	}
	narrowed := n.set && h.index.indexed(resource)
	first := sort.Search(h.n, func(i int) bool { return h.at(i).ev.Object.RV > fromRV })
	var history []Event
	for i := first; i < h.n; i++ {
		he := h.at(i)
		switch {
		case he.ev.Object.Key.Resource != resource:
		case !narrowed:
			history = append(history, he.ev)
		case he.concerns(n.index):
			history = append(history, he.narrowedTo(n.index))
		}
	}
	w := &watcher{
		resource: resource,
		narrowed: narrowed,
		value:    n.index,
		after:    fromRV,
		out:      make(chan Event, watchChanBuffer),
		queue:    history,
		limit:    len(history) + len(h.buf),
		wake:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
	}
	ws := h.watchers[resource]
	if ws == nil {
		ws = &watcherSet{all: map[*watcher]struct{}{}, byValue: map[string]map[*watcher]struct{}{}}
		h.watchers[resource] = ws
	}
	set := ws.all
	if narrowed {
		set = ws.byValue[n.index]
		if set == nil {
			set = map[*watcher]struct{}{}
			ws.byValue[n.index] = set
		}
	}
	set[w] = struct{}{}
	go w.run(ctx, h)
	return w.out, nil
}

// remove unregisters w (after its context ended).
func (h *hub) remove(w *watcher) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dropLocked(w)
}

func (h *hub) dropLocked(w *watcher) {
	ws := h.watchers[w.resource]
	if ws == nil {
		return
	}
	set := ws.all
	if w.narrowed {
		set = ws.byValue[w.value]
	}
	if _, ok := set[w]; !ok {
		return
	}
	delete(set, w)
	if w.narrowed && len(set) == 0 {
		delete(ws.byValue, w.value)
	}
	if ws.empty() {
		delete(h.watchers, w.resource)
	}
	close(w.stop)
}

// stats returns the oldest resumable RV, the newest event RV and the number
// of watchers.
func (h *hub) stats() (floor, last uint64, watchers int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ws := range h.watchers {
		watchers += len(ws.all)
		for _, narrowed := range ws.byValue {
			watchers += len(narrowed)
		}
	}
	return h.floor, h.last, watchers
}

// watchChanBuffer is the capacity of a watch channel; the watcher's queue
// behind it is what absorbs bursts.
const watchChanBuffer = 16

// watcher is one watch stream: a queue filled by publish and a goroutine that
// moves it to out.
type watcher struct {
	resource string
	// narrowed watchers get only the events that concern value.
	narrowed bool
	value    string
	// after is the RV the watch started from. A member behind that RV (a
	// follower the list was not served by, a member replaying its log) will
	// still apply the events up to it: the client already has them.
	after uint64
	out   chan Event
	mu    sync.Mutex
	queue []Event
	limit int
	wake  chan struct{}
	stop  chan struct{} // closed by the hub when it drops the watcher
}

// push queues ev; it reports false when the queue is full and the watcher
// must be dropped.
func (w *watcher) push(ev Event) bool {
	if ev.Object.RV <= w.after {
		return true
	}
	w.mu.Lock()
	if len(w.queue) >= w.limit {
		w.mu.Unlock()
		return false
	}
	w.queue = append(w.queue, ev)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return true
}

// run delivers queued events until ctx ends or the hub drops the watcher,
// then closes out.
func (w *watcher) run(ctx context.Context, h *hub) {
	defer close(w.out)
	defer h.remove(w)
	for {
		w.mu.Lock()
		batch := w.queue
		w.queue = nil
		w.mu.Unlock()
		if len(batch) == 0 {
			select {
			case <-w.wake:
				continue
			case <-ctx.Done():
				return
			case <-w.stop:
				return
			}
		}
		for _, ev := range batch {
			select {
			case w.out <- ev:
			case <-ctx.Done():
				return
			case <-w.stop:
				return
			}
		}
	}
}
