package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	match := q.Get("resourceVersionMatch")
	gk := ri.res.gvk.GroupKind()
	if v := q.Get("sendInitialEvents"); v != "" {
		send, err := strconv.ParseBool(v)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid sendInitialEvents %q: it is true or false", v))
		}
		if match != string(metav1.ResourceVersionMatchNotOlderThan) {
			return nil, unprocessable(gk, "", "sendInitialEvents is forbidden for watch unless resourceVersionMatch is set to NotOlderThan")
		}
		if send && !p.bookmarks {
			return nil, unprocessable(gk, "", "sendInitialEvents requires setting allowWatchBookmarks to true")
		}
		p.initial, p.watchList = send, send
	} else {
		if match != "" {
			return nil, unprocessable(gk, "", "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided")
		}
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
	ctx, cancel := context.WithTimeout(r.Context(), p.timeout)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()

	// The current state is needed for initial events, to know where "now"
	// is, and to know which objects were selected when a filtered watch
	// starts.
	var objs []raftstore.Object
	start := p.rv
	if p.initial || p.rv == 0 || !p.sel.empty() {
		var rev uint64
		objs, rev, err = s.store.List(ctx, ri.res.storeKey, ri.namespace)
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
			start = rev
		}
	}
	events, err := s.store.Watch(ctx, ri.res.storeKey, start)
	if err != nil {
		writeError(w, storeError(err, ri.res.gr, ""))
		return
	}

	ww := &watchWriter{w: w, rc: http.NewResponseController(w), res: ri.res}
	w.Header().Set("Content-Type", mediaJSON)
	w.Header().Set("Cache-Control", "no-cache, private")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if err := ww.rc.Flush(); err != nil {
		return
	}

	f := &watchFilter{res: ri.res, sel: p.sel, namespace: ri.namespace, name: ri.name}
	if !p.sel.empty() {
		f.known = map[raftstore.Key]bool{}
	}
	for _, o := range objs {
		if !f.inScope(o.Key) {
			continue
		}
		selected, err := f.selected(o.Data)
		if err != nil {
			s.log.Warn("watch: undecodable stored object", "key", o.Key.String(), "err", err)
			continue
		}
		switch {
		case p.initial:
			if f.known != nil {
				f.known[o.Key] = selected
			}
			if selected {
				if err := ww.send(watch.Added, o.Data); err != nil {
					return
				}
			}
		case f.known != nil && o.RV <= start:
			// Unchanged since the watch's starting point, so this is
			// whether the client has it.
			f.known[o.Key] = selected
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
	// known records, for a filtered watch, whether the client holds each
	// object (it was selected in the last event sent or at the start).
	// Objects not in it are in an unknown state: their first event is judged
	// on its own.
	known map[raftstore.Key]bool
}

// inScope reports whether key is within the watch's namespace and name.
func (f *watchFilter) inScope(key raftstore.Key) bool {
	return (f.namespace == "" || key.Namespace == f.namespace) && (f.name == "" || key.Name == f.name)
}

// selected reports whether the encoded object matches the selectors.
func (f *watchFilter) selected(data []byte) (bool, error) {
	if f.sel.empty() {
		return true, nil
	}
	obj, err := f.res.decodeStored(data)
	if err != nil {
		return false, err
	}
	return f.sel.matches(obj), nil
}

// translate returns the type to send ev as, or send=false to skip it.
func (f *watchFilter) translate(ev raftstore.Event) (typ watch.EventType, send bool, err error) {
	key := ev.Object.Key
	if !f.inScope(key) {
		return "", false, nil
	}
	typ = watch.EventType(ev.Type)
	if f.known == nil {
		return typ, true, nil
	}
	now, err := f.selected(ev.Object.Data)
	if err != nil {
		return "", false, err
	}
	had, seen := f.known[key]
	switch ev.Type {
	case raftstore.Added:
		f.known[key] = now
		return watch.Added, now, nil
	case raftstore.Deleted:
		delete(f.known, key)
		if seen {
			return watch.Deleted, had, nil
		}
		// No event since the start: the deleted state is the start state.
		return watch.Deleted, now, nil
	default:
		f.known[key] = now
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
}

// send writes one event whose object is a stored encoding.
func (ww *watchWriter) send(typ watch.EventType, data []byte) error {
	data, err := ww.res.wireEncoding(data)
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
