package apiserver

import (
	"encoding/json"
	"net/http"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/podsafe/podsafe/raftstore"
)

// serveGet answers GET of one object (or its status).
func (s *Server) serveGet(w http.ResponseWriter, r *http.Request, ri *requestInfo) {
	stored, err := s.store.Get(r.Context(), ri.key())
	if err != nil {
		writeError(w, storeError(err, ri.res.gr, ri.name))
		return
	}
	writeStored(w, http.StatusOK, ri.res, stored.Data)
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

// serveList answers a LIST: every object of the resource in the namespace
// (all namespaces when none is given) that the selectors match, at the
// store's current revision. limit is ignored: the whole list comes in one
// response without a continue token, which clients accept.
func (s *Server) serveList(w http.ResponseWriter, r *http.Request, ri *requestInfo) {
	sel, err := parseSelector(ri.res, r.URL.Query())
	if err != nil {
		writeError(w, err)
		return
	}
	objs, rev, err := s.store.List(r.Context(), ri.res.storeKey, ri.namespace, sel.narrowing()...)
	if err != nil {
		writeError(w, storeError(err, ri.res.gr, ""))
		return
	}
	items, err := s.selectItems(ri.res, sel, objs)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, listBody{
		Kind:       ri.res.listGVK.Kind,
		APIVersion: ri.res.apiVersion(),
		Metadata:   metav1.ListMeta{ResourceVersion: strconv.FormatUint(rev, 10)},
		Items:      items,
	})
}

// selectItems returns the encodings of the selected objects.
func (s *Server) selectItems(res *resourceInfo, sel *selector, objs []raftstore.Object) ([]json.RawMessage, error) {
	items := make([]json.RawMessage, 0, len(objs))
	for _, o := range objs {
		if !sel.empty() {
			obj, err := res.decodeStored(o.Data)
			if err != nil {
				return nil, err
			}
			if !sel.matches(obj) {
				continue
			}
		}
		items = append(items, o.Data)
	}
	return items, nil
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
