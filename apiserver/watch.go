package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/podsafe/podsafe/raftstore"
)

// InitialEventsEndAnnotation marks the BOOKMARK that ends the initial events
// of a watch-list request (sendInitialEvents=true).
const InitialEventsEndAnnotation = metav1.InitialEventsAnnotationKey

// watchParams are the parsed query parameters of a watch.
type watchParams struct {
	sel       *selector
	rv        uint64
	initial   bool // send the current state as ADDED events first
	watchList bool // sendInitialEvents=true: end the initial events with a bookmark
	bookmarks bool
	timeout   time.Duration
}

// parseWatchParams reads and checks the watch parameters the way
// kube-apiserver does, so that client-go's reflector gets the answers it
// expects.
func (s *Server) parseWatchParams(r *http.Request, ri *requestInfo) (*watchParams, error) {
	q := r.URL.Query()
	sel, err := parseSelector(ri.res, q)
	if err != nil {
		return nil, err
	}
	p := &watchParams{sel: sel, timeout: s.cfg.WatchTimeout}
	if p.rv, err = parseRV(q.Get("resourceVersion")); err != nil {
		return nil, err
	}
	p.bookmarks = q.Get("allowWatchBookmarks") == "true" || q.Get("allowWatchBookmarks") == "1"
	if t := q.Get("timeoutSeconds"); t != "" {
		n, err := strconv.ParseInt(t, 10, 64)
		if err != nil || n < 0 {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid timeoutSeconds %q: it is a non-negative integer", t))
		}
		if n > 0 {
			p.timeout = time.Duration(n) * time.Second
		}
	}
	// The combinations of the watch-list parameters, checked as
	// kube-apiserver's ListOptions validation does: every broken rule is a
	// cause of one 422.
	match := metav1.ResourceVersionMatch(q.Get("resourceVersionMatch"))
	var errs field.ErrorList
	matchPath := field.NewPath("resourceVersionMatch")
	v, sendGiven := q.Get("sendInitialEvents"), q.Has("sendInitialEvents")
	if sendGiven {
		send, err := strconv.ParseBool(v)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid sendInitialEvents %q: it is true or false", v))
		}
		if match != metav1.ResourceVersionMatchNotOlderThan {
			errs = append(errs, field.Forbidden(matchPath, fmt.Sprintf("sendInitialEvents requires setting resourceVersionMatch to %s", metav1.ResourceVersionMatchNotOlderThan)))
		}
		if send && !p.bookmarks {
			errs = append(errs, field.Forbidden(field.NewPath("allowWatchBookmarks"), "sendInitialEvents requires setting allowWatchBookmarks to true"))
		}
		p.initial, p.watchList = send, send
	}
	if match != "" {
		if !sendGiven {
			errs = append(errs, field.Forbidden(matchPath, "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"))
		}
		if match != metav1.ResourceVersionMatchNotOlderThan {
			errs = append(errs, field.NotSupported(matchPath, match, []string{string(metav1.ResourceVersionMatchNotOlderThan)}))
		}
	}
	if len(errs) > 0 {
		return nil, invalidListOptions(errs)
	}
	if !sendGiven {
		// A watch from no resourceVersion (or "0") starts with the
		// current state, as in kube-apiserver.
		p.initial = p.rv == 0
	}
	return p, nil
}

// serveWatch streams watch events: first the current state when asked
// (ending with the initial-events-end BOOKMARK for watch-list requests),
// then every change after the starting resourceVersion, filtered by
// namespace, name and selectors. A change that moves an object into or out of
// the selection is sent as ADDED or DELETED. Every event is flushed at once.
// The stream ends cleanly at the timeout, when the client goes away, when the
// store ends the underlying watch (the client resumes from its last
// resourceVersion), or at Close.
func (s *Server) serveWatch(w http.ResponseWriter, r *http.Request, ri *requestInfo) {
	p, err := s.parseWatchParams(r, ri)
	if err != nil {
		writeError(w, err)
		return
	}
	table, err := tableRequested(r, s.clock.Now)
	if err != nil {
		writeError(w, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), p.timeout)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()

	// The current state is needed for initial events, to know where "now"
	// is, and to know which objects were selected when a filtered watch
	// starts. A watch whose field selector pins an indexed field lists and
	// watches only that index value's objects (see storeIndexes).
	narrow := p.sel.narrowing()
	var objs []raftstore.Object
	start := p.rv
	listed := false
	var listRev uint64
	if p.initial || p.rv == 0 || !p.sel.empty() {
		objs, listRev, err = s.store.List(ctx, ri.res.storeKey, ri.namespace, narrow...)
		switch {
		case err != nil && (p.initial || p.rv == 0):
			writeError(w, storeError(err, ri.res.gr, ""))
			return
		case err != nil:
			// Only the selection state at the start was wanted; without it
			// each object's first change is judged on its own, and a local
			// watch can go on while the store has no reachable leader.
			s.log.Debug("watch: starting without the current selection", "resource", ri.res.storeKey, "err", err)
			objs = nil
		case p.initial || p.rv == 0:
			start = listRev
			listed = true
		default:
			listed = true
		}
	}
	events, err := s.store.Watch(ctx, ri.res.storeKey, start, narrow...)
	if err != nil {
		writeError(w, storeError(err, ri.res.gr, ""))
		return
	}

	ww := &watchWriter{w: w, rc: http.NewResponseController(w), res: ri.res, table: table}
	w.Header().Set("Content-Type", mediaJSON)
	w.Header().Set("Cache-Control", "no-cache, private")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if err := ww.rc.Flush(); err != nil {
		return
	}

	f := newWatchFilter(ri, p.sel, start, listed, listRev)
	for _, o := range objs {
		if !f.inScope(o.Key) {
			continue
		}
		selected, err := f.selected(o)
		if err != nil {
			s.log.Warn("watch: undecodable stored object", "key", o.Key.String(), "err", err)
			continue
		}
		switch {
		case p.initial:
			f.record(o.Key, selected, o.RV)
			if selected {
				if err := ww.send(watch.Added, o.Data); err != nil {
					return
				}
			}
		case o.RV <= start:
			// Unchanged since the watch's starting point, so this is
			// whether the client has it.
			f.record(o.Key, selected, o.RV)
		}
	}
	last := start
	if p.watchList {
		if err := ww.bookmark(start, true); err != nil {
			return
		}
	}

	var tick <-chan time.Time
	if p.bookmarks && s.cfg.BookmarkInterval > 0 {
		t := time.NewTicker(s.cfg.BookmarkInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			if err := ww.bookmark(last, false); err != nil {
				return
			}
		case ev, ok := <-events:
			if !ok {
				return
			}
			last = ev.Object.RV
			typ, send, err := f.translate(ev)
			if err != nil {
				s.log.Warn("watch: undecodable event object", "key", ev.Object.Key.String(), "err", err)
				continue
			}
			if !send {
				continue
			}
			if err := ww.send(typ, ev.Object.Data); err != nil {
				return
			}
		}
	}
}

// watchFilter decides which store events a watcher sees and as what.
type watchFilter struct {
	res       *resourceInfo
	sel       *selector
	namespace string
	name      string
	// tracking is set for a filtered watch, which must know whether the
	// client holds each object (it was selected in the last event sent for
	// it, or at the start) to send a change into or out of the selection as
	// ADDED or DELETED.
	tracking bool
	// held is the objects the client holds.
	held map[raftstore.Key]struct{}
	// notHeld is the objects known not to be held whose absence from held
	// would not say so: see settled.
	notHeld map[raftstore.Key]struct{}
	// settled is the resourceVersion after which an object in neither map
	// is known not to be held: the list at the start was taken at settled,
	// so any object the client could hold was in it. For an event at or
	// before settled, an object in neither map (changed or deleted between
	// the start and the list) is in an unknown state and its event is
	// judged on its own; so is every object's first event when the list
	// failed (settled is then the largest resourceVersion). Only the
	// objects the client holds are remembered once past settled: a kubelet's
	// watch keeps its own node's pods, not every pod it ever saw go by.
	settled uint64
}

// newWatchFilter returns the filter of a watch starting at start whose
// current state was listed at listRev (listed false: it could not be).
func newWatchFilter(ri *requestInfo, sel *selector, start uint64, listed bool, listRev uint64) *watchFilter {
	f := &watchFilter{res: ri.res, sel: sel, namespace: ri.namespace, name: ri.name}
	if sel.empty() {
		return f
	}
	f.tracking = true
	f.held = map[raftstore.Key]struct{}{}
	f.settled = listRev
	if !listed {
		f.settled = math.MaxUint64
	}
	if f.settled > start {
		f.notHeld = map[raftstore.Key]struct{}{}
	}
	return f
}

// record notes whether the client holds key after an event (or at the
// start) at rv.
func (f *watchFilter) record(key raftstore.Key, held bool, rv uint64) {
	if !f.tracking {
		return
	}
	if held {
		f.held[key] = struct{}{}
		delete(f.notHeld, key)
		return
	}
	delete(f.held, key)
	if f.notHeld != nil && rv <= f.settled {
		f.notHeld[key] = struct{}{}
	}
}

// holds returns whether the client holds key before an event at rv, and
// seen=false when that is not known.
func (f *watchFilter) holds(key raftstore.Key, rv uint64) (had, seen bool) {
	if _, ok := f.held[key]; ok {
		return true, true
	}
	if rv > f.settled {
		if f.notHeld != nil {
			f.notHeld = nil // past the list: absence says "not held" from now on
		}
		return false, true
	}
	_, seen = f.notHeld[key]
	return false, seen
}

// inScope reports whether key is within the watch's namespace and name.
func (f *watchFilter) inScope(key raftstore.Key) bool {
	return (f.namespace == "" || key.Namespace == f.namespace) && (f.name == "" || key.Name == f.name)
}

// selected reports whether the stored object o matches the selectors. The
// object is decoded once for all watchers (see sharedSelections).
func (f *watchFilter) selected(o raftstore.Object) (bool, error) {
	if f.sel.empty() {
		return true, nil
	}
	a, err := sharedSelections.attrs(f.res, o)
	if err != nil {
		return false, err
	}
	return f.sel.matchesAttrs(a), nil
}

// translate returns the type to send ev as, or send=false to skip it.
func (f *watchFilter) translate(ev raftstore.Event) (typ watch.EventType, send bool, err error) {
	key := ev.Object.Key
	if !f.inScope(key) {
		return "", false, nil
	}
	typ = watch.EventType(ev.Type)
	if !f.tracking {
		return typ, true, nil
	}
	now, err := f.selected(ev.Object)
	if err != nil {
		return "", false, err
	}
	rv := ev.Object.RV
	had, seen := f.holds(key, rv)
	if ev.Entered {
		// The object just took the value the watch is narrowed to: it was
		// not selected before.
		had, seen = false, true
	}
	switch ev.Type {
	case raftstore.Added:
		f.record(key, now, rv)
		return watch.Added, now, nil
	case raftstore.Deleted:
		delete(f.held, key)
		delete(f.notHeld, key)
		if seen {
			return watch.Deleted, had, nil
		}
		// No event since the start: the deleted state is the start state.
		return watch.Deleted, now, nil
	default:
		f.record(key, now, rv)
		switch {
		case now && seen && !had:
			return watch.Added, true, nil
		case now:
			return watch.Modified, true, nil
		case seen && !had:
			return "", false, nil
		default:
			// Left the selection (or may have: a client that does not
			// hold the object ignores the deletion).
			return watch.Deleted, true, nil
		}
	}
}

// watchWriter writes watch events as a stream of JSON objects, flushing
// each one.
type watchWriter struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	res *resourceInfo
	buf bytes.Buffer
	// table renders each event's object as a Table when the client asked
	// for them (kubectl get -w); nil sends the objects.
	table *tableRequest
}

// send writes one event whose object is a stored encoding.
func (ww *watchWriter) send(typ watch.EventType, data []byte) error {
	data, err := ww.res.wireEncoding(data)
	if err == nil && ww.table != nil {
		data, err = ww.table.watchObject(ww.res, data)
	}
	if err != nil {
		return err
	}
	ww.buf.Reset()
	ww.buf.WriteString(`{"type":`)
	ww.buf.WriteString(strconv.Quote(string(typ)))
	ww.buf.WriteString(`,"object":`)
	ww.buf.Write(data)
	ww.buf.WriteString("}\n")
	if _, err := ww.w.Write(ww.buf.Bytes()); err != nil {
		return err
	}
	return ww.rc.Flush()
}

// bookmark writes a BOOKMARK at rv; end marks the end of initial events.
func (ww *watchWriter) bookmark(rv uint64, end bool) error {
	m := map[string]any{"resourceVersion": strconv.FormatUint(rv, 10)}
	if end {
		m["annotations"] = map[string]string{InitialEventsEndAnnotation: "true"}
	}
	data, err := json.Marshal(map[string]any{
		"kind": ww.res.kind, "apiVersion": ww.res.apiVersion(), "metadata": m,
	})
	if err != nil {
		return err
	}
	return ww.send(watch.Bookmark, data)
}

// objectAttrs is what selectors look at in one stored object: its labels
// and its field set. It is never modified once built.
type objectAttrs struct {
	labels labels.Set
	fields fields.Set
	noMeta bool
}

// matchesAttrs is matches for an object's precomputed attributes.
func (sel *selector) matchesAttrs(a *objectAttrs) bool {
	if sel.empty() {
		return true
	}
	if a.noMeta || !sel.labels.Matches(a.labels) {
		return false
	}
	return sel.fields.Empty() || sel.fields.Matches(a.fields)
}

// sharedSelections is the attribute cache every filtered watch of the
// process reads through. It lives beside the servers rather than in one, so
// the members of an in-process cluster decode each event once between them.
var sharedSelections = newAttrCache(attrCacheShards, attrCacheShardSize)

// Sizes of sharedSelections: it remembers the attributes of the last
// attrCacheShards × attrCacheShardSize object states (less than the store's
// default watch window, whose event bytes it mostly shares), far more than
// a live watcher lags behind; a watcher further behind decodes for itself.
const (
	attrCacheShards    = 16
	attrCacheShardSize = 512
)

// attrCache shares the selector attributes of each committed object state
// among all filtered watchers, so that an event is decoded once however many
// watchers filter it: with 200 kubelets each watching the pods of its own
// node (fieldSelector spec.nodeName), every pod event used to be decoded 200
// times. An object state is named by the kind it is decoded as, its key and
// its resourceVersion (one raft entry may change several keys) and checked
// by its bytes, so an entry from another store of the process with the same
// name is never used (the members of an in-process cluster, whose bytes are
// equal, do share): watchers see exactly what decoding the event themselves
// would give. Each shard forgets its oldest entry when full. Safe for
// concurrent use.
type attrCache struct {
	shards []attrShard
}

type attrShard struct {
	mu      sync.Mutex
	entries map[attrKey]*attrEntry
	ring    []attrKey // insertion order; next is the oldest once full
	next    int
}

// attrKey names one object state as one API kind decodes it: the same
// bytes may be served under several kinds.
type attrKey struct {
	gvk schema.GroupVersionKind
	key raftstore.Key
	rv  uint64
}

// attrEntry is one object state's attributes, computed once by whichever
// watcher gets there first while the others wait for it.
type attrEntry struct {
	data  []byte
	once  sync.Once
	attrs *objectAttrs
	err   error
}

func newAttrCache(shards, size int) *attrCache {
	c := &attrCache{shards: make([]attrShard, shards)}
	for i := range c.shards {
		c.shards[i] = attrShard{entries: make(map[attrKey]*attrEntry, size), ring: make([]attrKey, 0, size)}
	}
	return c
}

// attrs returns the attributes of stored object o of resource res, decoding
// it only if no watcher did before.
func (c *attrCache) attrs(res *resourceInfo, o raftstore.Object) (*objectAttrs, error) {
	k := attrKey{gvk: res.gvk, key: o.Key, rv: o.RV}
	sh := &c.shards[o.RV%uint64(len(c.shards))]
	sh.mu.Lock()
	e := sh.entries[k]
	if e == nil || !sameBytes(e.data, o.Data) {
		e = &attrEntry{data: o.Data}
		sh.put(k, e)
	}
	sh.mu.Unlock()
	e.once.Do(func() { e.attrs, e.err = decodeAttrs(res, e.data) })
	return e.attrs, e.err
}

// put adds or replaces the entry of k, forgetting the oldest when full.
func (sh *attrShard) put(k attrKey, e *attrEntry) {
	if _, ok := sh.entries[k]; !ok {
		if len(sh.ring) < cap(sh.ring) {
			sh.ring = append(sh.ring, k)
		} else {
			delete(sh.entries, sh.ring[sh.next])
			sh.ring[sh.next] = k
			sh.next = (sh.next + 1) % len(sh.ring)
		}
	}
	sh.entries[k] = e
}

// sameBytes is bytes.Equal, quick when both are the same slice, as they are
// for every watcher of one store event.
func sameBytes(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] {
		return true
	}
	return bytes.Equal(a, b)
}

// decodeAttrs decodes a stored object and takes its attributes.
func decodeAttrs(res *resourceInfo, data []byte) (*objectAttrs, error) {
	obj, err := res.decodeStored(data)
	if err != nil {
		return nil, err
	}
	m, err := metaOf(obj)
	if err != nil {
		return &objectAttrs{noMeta: true}, nil // matches no selector, as in selector.matches
	}
	return &objectAttrs{labels: labels.Set(m.GetLabels()), fields: res.fieldSet(obj)}, nil
}
