package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/podsafe/podsafe/history"
)

// RecorderStart returns the wall time rec started, the origin of every
// time in its history: the current wall time less rec.Now(), which runs on
// the monotonic clock. It equals the Meta.Start that history.Create wrote
// when the caller left it zero, as long as the host's wall clock was not
// stepped since.
func RecorderStart(rec *history.Recorder) time.Time {
	now := time.Now()
	return now.Add(-rec.Now()).Round(0)
}

// ConvertAudit converts the audit event that ends a request into the API
// call podsafe's recording transport would have recorded for it, its
// identity given by Identity (see IdentityMap.Convert for the caller's
// entries and podsafe's own users). It reports false for every other
// event (other stages, malformed events).
//
// The final event of a request is its ResponseComplete, or its Panic;
// for a long-running request (a watch, proxy, exec, attach, port-forward,
// log) it is its ResponseStarted, sent once the response's headers were
// written: that is when the transport records such calls, and a watch's
// ResponseComplete comes only when the stream ends (it is skipped). A
// Panic after a long-running request's ResponseStarted is a second call.
//
// Fields, compared with history/transport.go:
//
//   - Verb is the audit verb, which is the transport's (get, list, watch,
//     create, update, patch, delete, deletecollection for resource
//     requests, the lower-cased method otherwise); a binding is a create
//     of pods/binding, an eviction a create of pods/eviction.
//   - Group, Resource, Subresource, Namespace and Name come from the
//     objectRef (for a create the API server names the object from the
//     request body, as the transport does). The name a list or watch
//     gave as a field selector is dropped, since the transport takes names
//     from the path; Path is set for non-resource requests.
//   - Code is the response status's code; Outcome is the transport's
//     classification of it (ok below 400, fail for 4xx and 503, unknown for
//     other 5xx and for any failed deletecollection), and unknown for a
//     Panic, for an event with no code, and for kube-apiserver's
//     "Connection closed early" (the handler wrote no response). Error is
//     the status message of a call that was not ok.
//   - GracePeriodSeconds, for deletions of pods: from the DeleteOptions
//     body (requestObject) when the request had one, else from the
//     gracePeriodSeconds query parameter, which is what kube-apiserver
//     applies; for evictions, from the Eviction body's deleteOptions (the
//     API server reads no query parameter for them). Bodies are logged from
//     level Request on, which AuditPolicy gives deletions of pods.
//   - ResourceVersion and UID are the responseObject's metadata (level
//     RequestResponse), as the transport reads them from the response body;
//     the name of a created object with a generated name comes from there
//     too. Watches have neither.
//   - Invoke and Return are requestReceivedTimestamp and stageTimestamp
//     (the API server's wall clock) as nanoseconds since start, the wall
//     time the history's recorder started (RecorderStart): the interval is
//     the server's view of the call, inside the client's. A request the
//     API server received before start has a negative Invoke.
//   - BodyDigest is empty: the audit log holds a re-encoding of the body,
//     not its bytes.
func ConvertAudit(ev AuditEvent, start time.Time) (history.APICall, bool) {
	u := ActingUser(ev)
	id, _ := Identity(u.Username, u.Groups)
	call, err := convertAudit(ev, start, id)
	return call, err == nil && call.Verb != ""
}

// ActingUser returns the user a request acted as: the impersonated user
// when there is one (the API server authorized that user), else the
// authenticated one.
func ActingUser(ev AuditEvent) AuditUser {
	if ev.ImpersonatedUser != nil && ev.ImpersonatedUser.Username != "" {
		return *ev.ImpersonatedUser
	}
	return ev.User
}

// Convert is ConvertAudit with identities from m. It reports false as
// well for the events of podsafe's own users (AddOwn), whose calls its
// transport records: the authenticated user decides, since that is the
// client whose transport recorded the call.
func (m *IdentityMap) Convert(ev AuditEvent, start time.Time) (history.APICall, bool) {
	call, err := m.convert(ev, start)
	return call, err == nil && call.Verb != ""
}

// convert converts ev with m's identities. It returns a zero call and no
// error for an event that is not converted (not final, or of an own
// user), and an error for a final event it cannot convert.
func (m *IdentityMap) convert(ev AuditEvent, start time.Time) (history.APICall, error) {
	if !isFinal(ev) || m.Skipped(ev.User.Username) {
		return history.APICall{}, nil
	}
	u := ActingUser(ev)
	id, _ := m.Identity(u.Username, u.Groups)
	return convertAudit(ev, start, id)
}

// errNoTime: a final audit event with neither timestamp cannot be placed
// in the history.
var errNoTime = errors.New("audit event has no timestamp")

// connectionClosedEarly is the message of the success status
// kube-apiserver fakes for a request whose handler wrote no response.
const connectionClosedEarly = "Connection closed early"

// convertAudit converts a final event (see ConvertAudit); it returns a
// zero call and no error for any other.
func convertAudit(ev AuditEvent, start time.Time, identity string) (history.APICall, error) {
	if !isFinal(ev) {
		return history.APICall{}, nil
	}
	if ev.Verb == "" {
		return history.APICall{}, fmt.Errorf("audit event %s (%s) has no verb", ev.AuditID, ev.Stage)
	}
	invoke, ret, err := times(ev, start)
	if err != nil {
		return history.APICall{}, fmt.Errorf("audit event %s: %w", ev.AuditID, err)
	}
	path, query := splitURI(ev.RequestURI)
	c := history.APICall{Identity: identity, Verb: ev.Verb, Invoke: invoke, Return: ret}
	if ref := ev.ObjectRef; ref != nil {
		c.Group, c.Resource, c.Subresource = ref.APIGroup, ref.Resource, ref.Subresource
		c.Namespace, c.Name = ref.Namespace, ref.Name
		switch c.Verb {
		case "list", "deletecollection":
			c.Name = ""
		case "watch":
			c.Name = nameInPath(path)
		}
	} else {
		c.Path = path
	}
	c.Code, c.Outcome, c.Error = outcome(ev)
	c.GracePeriodSeconds = grace(c, ev, query)
	if c.Verb != "watch" {
		readResponse(ev.ResponseObject, &c)
	}
	return c, nil
}

// isFinal reports whether ev is the event a request's call is recorded
// from (see ConvertAudit).
func isFinal(ev AuditEvent) bool {
	switch ev.Stage {
	case StagePanic:
		return true
	case StageResponseStarted:
		return longRunning(ev)
	case StageResponseComplete:
		return !longRunning(ev)
	}
	return false
}

// longRunning reports the requests kube-apiserver treats as long-running
// (its BasicLongRunningRequestCheck): it sends their ResponseStarted
// event.
func longRunning(ev AuditEvent) bool {
	if ev.Verb == "watch" || ev.Verb == "proxy" {
		return true
	}
	if ev.ObjectRef != nil {
		switch ev.ObjectRef.Subresource {
		case "attach", "exec", "proxy", "log", "portforward":
			return true
		}
		return false
	}
	path, _ := splitURI(ev.RequestURI)
	return strings.HasPrefix(path, "/debug/pprof/")
}

// times returns the event's received and stage times relative to start; a
// missing one is the other.
func times(ev AuditEvent, start time.Time) (invoke, ret int64, err error) {
	recv, stage := ev.RequestReceivedTimestamp, ev.StageTimestamp
	switch {
	case recv.IsZero() && stage.IsZero():
		return 0, 0, errNoTime
	case recv.IsZero():
		recv = stage
	case stage.IsZero():
		stage = recv
	}
	return recv.Sub(start).Nanoseconds(), stage.Sub(start).Nanoseconds(), nil
}

// outcome classifies the response status as the transport does.
func outcome(ev AuditEvent) (code int, out history.Status, msg string) {
	st := ev.ResponseStatus
	if st != nil {
		code = st.Code
	}
	switch {
	case ev.Stage == StagePanic, st == nil, code == 0:
		out = history.StatusUnknown
	case code == http.StatusOK && st.Message == connectionClosedEarly:
		out = history.StatusUnknown
	default:
		out = outcomeOf(ev.Verb, code)
	}
	if out != history.StatusOK && st != nil {
		msg = st.Message
		if msg == "" {
			msg = st.Reason
		}
	}
	return code, out, msg
}

// outcomeOf classifies an HTTP status as history's recording transport
// does: a 503 is a definite refusal, other 5xx may have been applied, and
// a failed deletecollection may have deleted some objects first.
func outcomeOf(verb string, code int) history.Status {
	switch {
	case verb == "deletecollection" && code >= 400:
		return history.StatusUnknown
	case code == http.StatusServiceUnavailable:
		return history.StatusFail
	case code >= 500:
		return history.StatusUnknown
	case code >= 400:
		return history.StatusFail
	default:
		return history.StatusOK
	}
}

// grace returns the grace period a deletion of pods asked for (see
// ConvertAudit), nil for every other call.
func grace(c history.APICall, ev AuditEvent, query url.Values) *int64 {
	if c.Group != "" || c.Resource != "pods" {
		return nil
	}
	body := present(ev.RequestObject)
	switch {
	case c.Subresource == "" && (c.Verb == "delete" || c.Verb == "deletecollection"):
		if body {
			var opts struct {
				GracePeriodSeconds *int64 `json:"gracePeriodSeconds"`
			}
			if json.Unmarshal(ev.RequestObject, &opts) == nil {
				return opts.GracePeriodSeconds
			}
			return nil
		}
		if g := query.Get("gracePeriodSeconds"); g != "" {
			if n, err := strconv.ParseInt(g, 10, 64); err == nil {
				return &n
			}
		}
	case c.Subresource == "eviction" && c.Verb == "create" && body:
		var eviction struct {
			DeleteOptions *struct {
				GracePeriodSeconds *int64 `json:"gracePeriodSeconds"`
			} `json:"deleteOptions"`
		}
		if json.Unmarshal(ev.RequestObject, &eviction) == nil && eviction.DeleteOptions != nil {
			return eviction.DeleteOptions.GracePeriodSeconds
		}
	}
	return nil
}

// present reports a logged body (not absent, not null).
func present(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s != "" && s != "null"
}

// readResponse fills the call's resourceVersion and UID from the response
// object's metadata, and the name of a created object the request did not
// name, as the transport reads them from the response body.
func readResponse(raw json.RawMessage, c *history.APICall) {
	if !present(raw) {
		return
	}
	var obj struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name            string `json:"name"`
			ResourceVersion string `json:"resourceVersion"`
			UID             string `json:"uid"`
		} `json:"metadata"`
	}
	if json.Unmarshal(raw, &obj) != nil {
		return
	}
	c.ResourceVersion, c.UID = obj.Metadata.ResourceVersion, obj.Metadata.UID
	if c.Name == "" && c.Verb == "create" && c.Subresource == "" && c.Outcome == history.StatusOK && obj.Kind != "Status" {
		c.Name = obj.Metadata.Name
	}
}

// splitURI splits a request URI into its path and query; a URI that does
// not parse is all path.
func splitURI(uri string) (string, url.Values) {
	u, err := url.ParseRequestURI(uri)
	if err != nil {
		p, _, _ := strings.Cut(uri, "?")
		return p, url.Values{}
	}
	return u.Path, u.Query()
}

// nameInPath returns the object name an API path names, parsed as the API
// server routes it (and as the transport does): /api/v1 or
// /apis/GROUP/VERSION, an optional "watch", an optional
// namespaces/NAMESPACE, then the resource and the name.
func nameInPath(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return ""
	}
	if parts[0] == "watch" {
		parts = parts[1:]
	}
	if len(parts) >= 2 && parts[0] == "namespaces" && len(parts) > 2 && parts[2] != "status" && parts[2] != "finalize" {
		parts = parts[2:]
	}
	if len(parts) > 1 {
		return parts[1]
	}
	return ""
}
