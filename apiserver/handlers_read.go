package apiserver

import (
	"encoding/json"
	"net/http"
	"strconv"
	"weak"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/podsafe/podsafe/raftstore"
)

// serveGet answers GET of one object (or its status), as the object or,
// when the client asked for one, as a Table of one row.
func (s *Server) serveGet(w http.ResponseWriter, r *http.Request, ri *requestInfo) {
	table, err := tableRequested(r, s.clock.Now)
	if err != nil {
		writeError(w, err)
		return
	}
	stored, err := s.store.Get(r.Context(), ri.key())
	if err != nil {
		writeError(w, storeError(err, ri.res.gr, ri.name))
		return
	}
	if table == nil {
		writeStored(w, http.StatusOK, ri.res, stored.Data)
		return
	}
	data, err := ri.res.wireEncoding(stored.Data)
	if err != nil {
		writeError(w, err)
		return
	}
	tab, err := table.table(ri.res, [][]byte{data}, metav1.ListMeta{ResourceVersion: strconv.FormatUint(stored.RV, 10)})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, tab)
}

// listBody is a list response. Items are the stored encodings, which already
// carry kind, apiVersion and resourceVersion; a non-nil empty slice encodes
// as [] rather than null.
type listBody struct {
	Kind       string            `json:"kind"`
	APIVersion string            `json:"apiVersion"`
	Metadata   metav1.ListMeta   `json:"metadata"`
	Items      []json.RawMessage `json:"items"`
}

// serveList answers a LIST: the objects of the resource in the namespace
// (all namespaces when none is given) that the selectors match, at the
// store's current revision, one page of them when limit is set (see
// paginate.go), as a list or as a Table.
func (s *Server) serveList(w http.ResponseWriter, r *http.Request, ri *requestInfo) {
	q := r.URL.Query()
	sel, err := parseSelector(ri.res, q)
	if err != nil {
		writeError(w, err)
		return
	}
	page, err := parsePageRequest(q)
	if err != nil {
		writeError(w, err)
		return
	}
	table, err := tableRequested(r, s.clock.Now)
	if err != nil {
		writeError(w, err)
		return
	}
	narrow := sel.narrowing()
	snapKey := snapshotKey{server: weak.Make(s), resource: ri.res.storeKey, namespace: ri.namespace}
	if len(narrow) > 0 {
		snapKey.narrow = narrow[0]
	}

	var objs []raftstore.Object
	var rev uint64
	if page.token != nil && page.token.ResourceVersion > 0 {
		snapKey.rev = uint64(page.token.ResourceVersion)
		kept, ok := pageSnapshots.get(snapKey)
		if !ok {
			writeError(w, expiredContinue(page.token.StartKey))
			return
		}
		objs, rev = kept, snapKey.rev
	} else {
		// A first page, or a token of rv -1: the list continues at the
		// current revision.
		objs, rev, err = s.store.List(r.Context(), ri.res.storeKey, ri.namespace, narrow...)
		if err != nil {
			writeError(w, storeError(err, ri.res.gr, ""))
			return
		}
		snapKey.rev = rev
	}
	rest := objs
	if page.token != nil {
		rest = objs[startPosition(ri, objs, page.token.StartKey):]
	}

	items, used, err := s.selectItems(ri.res, sel, rest, page.limit)
	if err != nil {
		writeError(w, err)
		return
	}
	list := metav1.ListMeta{ResourceVersion: strconv.FormatUint(rev, 10)}
	if remaining := len(rest) - used; remaining > 0 {
		// Later pages read the same revision: keep this one's result for
		// them (a first page's; a later page's is kept already).
		if page.token == nil || page.token.ResourceVersion < 0 {
			pageSnapshots.put(snapKey, objs)
		}
		list.Continue = continueToken{ResourceVersion: int64(rev), StartKey: startKey(ri, rest[used-1].Key)}.encode()
		if sel.empty() {
			n := int64(remaining)
			list.RemainingItemCount = &n
		}
	}

	if table != nil {
		tab, err := table.table(ri.res, rawItems(items), list)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, tab)
		return
	}
	writeJSON(w, http.StatusOK, listBody{
		Kind:       ri.res.listGVK.Kind,
		APIVersion: ri.res.apiVersion(),
		Metadata:   list,
		Items:      items,
	})
}

// selectItems returns the encodings of the first objs the selector
// matches, at most limit of them (0: all), and how many of objs it looked
// at: the objects after those remain for a later page.
func (s *Server) selectItems(res *resourceInfo, sel *selector, objs []raftstore.Object, limit int) (items []json.RawMessage, used int, err error) {
	capacity := len(objs)
	if limit > 0 && limit < capacity {
		capacity = limit
	}
	items = make([]json.RawMessage, 0, capacity)
	for i, o := range objs {
		if limit > 0 && len(items) == limit {
			return items, i, nil
		}
		if !sel.empty() {
			obj, err := res.decodeStored(o.Data)
			if err != nil {
				return nil, 0, err
			}
			if !sel.matches(obj) {
				continue
			}
		}
		data, err := res.wireEncoding(o.Data)
		if err != nil {
			return nil, 0, err
		}
		items = append(items, data)
	}
	return items, len(objs), nil
}

// rawItems converts list items for the Table printer.
func rawItems(items []json.RawMessage) [][]byte {
	out := make([][]byte, len(items))
	for i, it := range items {
		out[i] = it
	}
	return out
}

// decodeAll decodes stored objects.
func decodeAll(res *resourceInfo, objs []raftstore.Object) ([]runtime.Object, error) {
	out := make([]runtime.Object, 0, len(objs))
	for _, o := range objs {
		obj, err := res.decodeStored(o.Data)
		if err != nil {
			return nil, err
		}
		out = append(out, obj)
	}
	return out, nil
}
