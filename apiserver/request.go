package apiserver

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsafe/podsafe/raftstore"
)

// requestInfo is a resource request resolved from its URL and method.
type requestInfo struct {
	res         *resourceInfo
	verb        string
	namespace   string
	name        string
	subresource string
}

// key is the store key of the named object.
func (ri *requestInfo) key() raftstore.Key {
	return raftstore.Key{Resource: ri.res.storeKey, Namespace: ri.namespace, Name: ri.name}
}

// notFoundPath is the 404 for a path that names no resource.
func notFoundPath(path string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusNotFound,
		Reason:  metav1.StatusReasonNotFound,
		Message: fmt.Sprintf("the server could not find the requested resource (%s)", path),
		Details: &metav1.StatusDetails{},
	}}
}

// parseResourceRequest resolves /api/v1/... and /apis/GROUP/VERSION/...
// paths; segs are the path's segments.
func (s *Server) parseResourceRequest(r *http.Request, segs []string) (*requestInfo, error) {
	path := "/" + strings.Join(segs, "/")
	var group, version string
	var rest []string
	if segs[0] == "api" {
		version, rest = segs[1], segs[2:]
	} else {
		if len(segs) < 4 {
			return nil, notFoundPath(path)
		}
		group, version, rest = segs[1], segs[2], segs[3:]
	}
	watchPrefix := false
	if len(rest) > 0 && rest[0] == "watch" {
		watchPrefix, rest = true, rest[1:]
	}
	ri := &requestInfo{}
	if len(rest) >= 3 && rest[0] == "namespaces" {
		_, isResource := s.reg.lookup(group, version, rest[2])
		if nsRes, ok := s.reg.lookup(group, version, "namespaces"); ok && !isResource && len(rest) == 3 && nsRes.hasSubresource(rest[2]) {
			// /api/v1/namespaces/NAME/status: a subresource of a namespace.
		} else {
			ri.namespace, rest = rest[1], rest[2:]
		}
	}
	if len(rest) == 0 || len(rest) > 3 {
		return nil, notFoundPath(path)
	}
	res, ok := s.reg.lookup(group, version, rest[0])
	if !ok {
		return nil, notFoundPath(path)
	}
	ri.res = res
	if len(rest) > 1 {
		ri.name = rest[1]
	}
	if len(rest) > 2 {
		ri.subresource = rest[2]
		if !res.hasSubresource(ri.subresource) {
			return nil, notFoundPath(path)
		}
	}
	if ri.namespace != "" && !res.namespaced {
		return nil, notFoundPath(path)
	}
	if ri.namespace == "" && res.namespaced && ri.name != "" {
		return nil, apierrors.NewNotFound(res.gr, ri.name)
	}
	q := r.URL.Query()
	watch := watchPrefix || q.Get("watch") == "true" || q.Get("watch") == "1"
	verb, err := requestVerb(r.Method, ri, watch)
	if err != nil {
		return nil, err
	}
	ri.verb = verb
	if ri.namespace == "" && res.namespaced && (verb == VerbCreate || verb == VerbDeleteCollection) {
		return nil, methodNotAllowed(fmt.Sprintf("%s is namespaced: %s it through %s/namespaces/NAMESPACE/%s",
			res.resource, verb, strings.TrimSuffix(path, "/"+res.resource), res.resource))
	}
	return ri, nil
}

// requestVerb maps the HTTP method to the API verb the path allows.
func requestVerb(method string, ri *requestInfo, watch bool) (string, error) {
	res := ri.res
	notAllowed := func() (string, error) {
		target := res.resource
		if ri.name != "" {
			target += "/NAME"
		}
		if ri.subresource != "" {
			target += "/" + ri.subresource
		}
		return "", methodNotAllowed(fmt.Sprintf("%s is not supported on %s", method, target))
	}
	switch ri.subresource {
	case "":
		switch {
		case ri.name == "" && method == http.MethodGet && watch:
			return VerbWatch, nil
		case ri.name == "" && method == http.MethodGet:
			return VerbList, nil
		case ri.name == "" && method == http.MethodPost:
			return VerbCreate, nil
		case ri.name == "" && method == http.MethodDelete:
			return VerbDeleteCollection, nil
		case ri.name != "" && method == http.MethodGet && watch:
			return VerbWatch, nil
		case ri.name != "" && method == http.MethodGet:
			return VerbGet, nil
		case ri.name != "" && method == http.MethodPut:
			return VerbUpdate, nil
		case ri.name != "" && method == http.MethodPatch:
			return VerbPatch, nil
		case ri.name != "" && method == http.MethodDelete:
			return VerbDelete, nil
		}
	case subStatus, subScale:
		switch method {
		case http.MethodGet:
			return VerbGet, nil
		case http.MethodPut:
			return VerbUpdate, nil
		case http.MethodPatch:
			return VerbPatch, nil
		}
	case subFinalize:
		if method == http.MethodPut {
			return VerbUpdate, nil
		}
	case subBinding, subEviction:
		if method == http.MethodPost {
			return VerbCreate, nil
		}
	case subLog:
		if method == http.MethodGet {
			return VerbGet, nil
		}
	case subExec, subAttach, subPortForward:
		switch method {
		case http.MethodGet:
			return VerbGet, nil
		case http.MethodPost:
			return VerbCreate, nil
		}
	}
	return notAllowed()
}

// serveResource serves one resource request.
func (s *Server) serveResource(w http.ResponseWriter, r *http.Request, segs []string) {
	ri, err := s.parseResourceRequest(r, segs)
	if err != nil {
		writeError(w, err)
		return
	}
	switch {
	case ri.verb == VerbWatch:
		s.serveWatch(w, r, ri)
		return
	case ri.subresource == subExec, ri.subresource == subAttach, ri.subresource == subPortForward:
		s.serveNoProcess(w, ri)
		return
	case ri.subresource == subLog && followed(r):
		// A followed log is long-running, as a watch: it holds no
		// in-flight slot and no request timeout.
		s.serveLog(w, r, ri)
		return
	}
	release, ok := s.limits.admit(w, IdentityFrom(r.Context()), mutatingMethod(r.Method))
	if !ok {
		return
	}
	defer release()
	ctx, cancel := s.requestContext(r)
	defer cancel()
	if mutatingMethod(r.Method) {
		dry, err := dryRunQuery(r.URL.Query())
		if err != nil {
			writeError(w, err)
			return
		}
		if dry {
			ctx = withDryRun(ctx)
		}
	}
	r = r.WithContext(ctx)
	switch {
	case ri.verb == VerbGet && ri.subresource == subScale:
		s.serveGetScale(w, r, ri)
	case ri.verb == VerbGet && ri.subresource == subLog:
		s.serveLog(w, r, ri)
	case ri.verb == VerbGet:
		s.serveGet(w, r, ri)
	case ri.verb == VerbList:
		s.serveList(w, r, ri)
	case ri.verb == VerbCreate && ri.subresource == subBinding:
		s.serveBinding(w, r, ri)
	case ri.verb == VerbCreate && ri.subresource == subEviction:
		s.serveEviction(w, r, ri)
	case ri.verb == VerbCreate:
		s.serveCreate(w, r, ri)
	case ri.verb == VerbUpdate && ri.subresource == subScale:
		s.serveUpdateScale(w, r, ri)
	case ri.verb == VerbUpdate:
		s.serveUpdate(w, r, ri)
	case ri.verb == VerbPatch:
		s.servePatch(w, r, ri)
	case ri.verb == VerbDelete:
		s.serveDelete(w, r, ri)
	case ri.verb == VerbDeleteCollection:
		s.serveDeleteCollection(w, r, ri)
	default:
		writeError(w, methodNotAllowed(fmt.Sprintf("%s is not supported", ri.verb)))
	}
}

// followed reports whether a log request follows the log.
func followed(r *http.Request) bool {
	f, err := strconv.ParseBool(r.URL.Query().Get("follow"))
	return err == nil && f
}
