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
// overflows is closed.
type hub struct {
	mu       sync.Mutex
	buf      []Event // ring of the most recent events, oldest at head
	head, n  int
	floor    uint64 // every event with RV > floor is in buf
	last     uint64 // RV of the newest event, or floor if none
	watchers map[string]map[*watcher]struct{}
	closed   bool
}

func newHub(window int) *hub {
	return &hub{buf: make([]Event, window), watchers: map[string]map[*watcher]struct{}{}}
}

// publish records ev (whose RV is greater than every earlier one) and queues
// it for the watchers of its resource.
func (h *hub) publish(ev Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == len(h.buf) {
		h.floor = h.buf[h.head].Object.RV
		h.buf[h.head] = Event{}
		h.head = (h.head + 1) % len(h.buf)
		h.n--
	}
	h.buf[(h.head+h.n)%len(h.buf)] = ev
	h.n++
	h.last = ev.Object.RV
	for w := range h.watchers[ev.Object.Key.Resource] {
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
	for _, ws := range h.watchers {
		for w := range ws {
			h.dropLocked(w)
		}
	}
}

// close closes every watcher and refuses new ones.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for _, ws := range h.watchers {
		for w := range ws {
			h.dropLocked(w)
		}
	}
}

// at returns the i-th oldest event in the window.
func (h *hub) at(i int) Event { return h.buf[(h.head+i)%len(h.buf)] }

// watch registers a watcher of resource that first receives the remembered
// events with RV > fromRV and then every new one. Registration and the history
// copy happen under one lock with publish, so no event is missed or repeated.
func (h *hub) watch(ctx context.Context, resource string, fromRV uint64) (<-chan Event, error) {
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
	first := sort.Search(h.n, func(i int) bool { return h.at(i).Object.RV > fromRV })
	var history []Event
	for i := first; i < h.n; i++ {
		if ev := h.at(i); ev.Object.Key.Resource == resource {
			history = append(history, ev)
		}
	}
	w := &watcher{
		resource: resource,
		after:    fromRV,
		out:      make(chan Event, watchChanBuffer),
		queue:    history,
		limit:    len(history) + len(h.buf),
		wake:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
	}
	ws := h.watchers[resource]
	if ws == nil {
		ws = map[*watcher]struct{}{}
		h.watchers[resource] = ws
	}
	ws[w] = struct{}{}
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
	if _, ok := ws[w]; !ok {
		return
	}
	delete(ws, w)
	if len(ws) == 0 {
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
		watchers += len(ws)
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
