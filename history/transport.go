package history

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
)

// WrapTransport returns a wrapper for rest.Config.WrapTransport that records
// every API call made through it, attributed to identity.
//
// The wrapper is transparent to the client: request bodies are read from a
// copy (req.GetBody) or buffered and replaced, never consumed; watch and other
// streaming responses are recorded when their headers arrive and their bodies
// are left alone; other JSON responses are read in full to pick out
// metadata.resourceVersion and metadata.uid, then handed back unchanged.
// Protobuf responses are passed through without that extraction.
//
// Two facts come from request bodies (JSON or protobuf): the grace period a
// deletion of pods asks for (APICall.GracePeriodSeconds), and the name of
// the object a create makes, which its URL does not carry (APICall.Name; for
// a generated name, from the answer's metadata.name once it succeeded).
func (r *Recorder) WrapTransport(identity string) func(http.RoundTripper) http.RoundTripper {
	return func(next http.RoundTripper) http.RoundTripper {
		return &recordingTransport{rec: r, identity: identity, next: next}
	}
}

type recordingTransport struct {
	rec      *Recorder
	identity string
	next     http.RoundTripper
}

// WrappedRoundTripper lets client-go reach the transport underneath (it
// implements k8s.io/apimachinery/pkg/util/net.RoundTripperWrapper).
func (t *recordingTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

func (t *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	call := describeRequest(req)
	call.Identity = t.identity
	kind := wantedBody(&call)
	digest, body, req, err := readBody(req, kind != bodyNone)
	if err != nil {
		call.Invoke = t.rec.Now().Nanoseconds()
		call.Return = call.Invoke
		call.Outcome, call.Error = StatusFail, err.Error()
		t.rec.API(call)
		return nil, err
	}
	call.BodyDigest = digest
	inspectRequest(&call, req, kind, body)

	call.Invoke = t.rec.Now().Nanoseconds()
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		call.Return = t.rec.Now().Nanoseconds()
		call.Outcome, call.Error = StatusUnknown, err.Error()
		t.rec.API(call)
		return resp, err
	}
	call.Code = resp.StatusCode
	call.Outcome = outcomeOf(call.Verb, resp.StatusCode)
	if call.Verb != "watch" && isPlainJSON(resp) && req.Method != http.MethodHead {
		body, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = &replayBody{r: bytes.NewReader(body), err: rerr}
		if rerr != nil {
			if call.Outcome == StatusOK {
				call.Outcome = StatusUnknown
			}
			call.Error = rerr.Error()
		} else {
			readMetadata(body, &call)
		}
	}
	call.Return = t.rec.Now().Nanoseconds()
	t.rec.API(call)
	return resp, nil
}

// outcomeOf classifies an HTTP status. A 503 is a definite refusal (the
// server did not take the request); other 5xx may have been applied. A
// deletecollection deletes one object after another and stops at the first
// error, so its failure may follow partial effects: unknown.
func outcomeOf(verb string, code int) Status {
	switch {
	case verb == "deletecollection" && code >= 400:
		return StatusUnknown
	case code == http.StatusServiceUnavailable:
		return StatusFail
	case code >= 500:
		return StatusUnknown
	case code >= 400:
		return StatusFail
	default:
		return StatusOK
	}
}

// readBody hashes the request body without consuming it, and returns the
// body itself too when keep is set (or when it had to be buffered). When the
// request cannot replay its body, it is buffered into a clone, which is
// returned in place of req.
func readBody(req *http.Request, keep bool) (string, []byte, *http.Request, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return "", nil, req, nil
	}
	if req.GetBody != nil {
		// A copy that cannot be read only costs the digest (and what the
		// body would have told); the request itself goes ahead untouched.
		rc, err := req.GetBody()
		if err != nil {
			return "", nil, req, nil
		}
		defer rc.Close()
		h := sha256.New()
		var kept bytes.Buffer
		w := io.Writer(h)
		if keep {
			w = io.MultiWriter(h, &kept)
		}
		if _, err := io.Copy(w, rc); err != nil {
			return "", nil, req, nil
		}
		return shortDigest(h.Sum(nil)), kept.Bytes(), req, nil
	}
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return "", nil, req, fmt.Errorf("reading request body: %w", err)
	}
	clone := req.Clone(req.Context())
	clone.Body = io.NopCloser(bytes.NewReader(body))
	clone.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	sum := sha256.Sum256(body)
	return shortDigest(sum[:]), body, clone, nil
}

func shortDigest(sum []byte) string { return hex.EncodeToString(sum)[:16] }

// isPlainJSON reports a JSON response that is not a stream and can be read
// whole.
func isPlainJSON(resp *http.Response) bool {
	if resp.StatusCode < 200 {
		return false
	}
	mt, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return false
	}
	_, stream := params["stream"]
	return !stream
}

// readMetadata fills the resource version and UID of an object or list, and
// the message of a failure Status, from a JSON body.
func readMetadata(body []byte, call *APICall) {
	var obj struct {
		Kind     string `json:"kind"`
		Message  string `json:"message"`
		Metadata struct {
			Name            string `json:"name"`
			ResourceVersion string `json:"resourceVersion"`
			UID             string `json:"uid"`
		} `json:"metadata"`
	}
	if json.Unmarshal(body, &obj) != nil {
		return
	}
	call.ResourceVersion = obj.Metadata.ResourceVersion
	call.UID = obj.Metadata.UID
	if call.Name == "" && call.Verb == "create" && call.Subresource == "" && call.Outcome == StatusOK && obj.Kind != "Status" {
		// A generated name (generateName) is known only from the answer.
		call.Name = obj.Metadata.Name
	}
	if obj.Kind == "Status" && call.Outcome != StatusOK && call.Error == "" {
		call.Error = obj.Message
	}
}

// replayBody returns the bytes already read from a response, then the error
// that stopped the read, so the client sees what it would have seen.
type replayBody struct {
	r   *bytes.Reader
	err error
}

func (b *replayBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF && b.err != nil {
		return n, b.err
	}
	return n, err
}

func (b *replayBody) Close() error { return nil }

// describeRequest parses a Kubernetes API path into verb, group, resource,
// subresource, namespace and name, the way the API server routes it.
func describeRequest(req *http.Request) APICall {
	method := strings.ToLower(req.Method)
	path := req.URL.Path
	parts := strings.Split(strings.Trim(path, "/"), "/")
	var group string
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:] // api, version
	case len(parts) >= 4 && parts[0] == "apis":
		group = parts[1]
		parts = parts[3:] // apis, group, version
	default:
		return APICall{Verb: method, Path: path}
	}
	watch := false
	if parts[0] == "watch" {
		watch = true
		parts = parts[1:]
	}
	if q := req.URL.Query().Get("watch"); q == "1" || q == "true" {
		watch = true
	}
	c := APICall{Group: group}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		c.Namespace = parts[1]
		// namespaces/NS/status and namespaces/NS/finalize are subresources
		// of the namespace itself, not resources inside it.
		if len(parts) > 2 && parts[2] != "status" && parts[2] != "finalize" {
			parts = parts[2:]
		}
	}
	if len(parts) > 0 {
		c.Resource = parts[0]
	}
	if len(parts) > 1 {
		c.Name = parts[1]
	}
	if len(parts) > 2 {
		c.Subresource = strings.Join(parts[2:], "/")
	}
	switch {
	case watch:
		c.Verb = "watch"
	case req.Method == http.MethodGet && c.Name == "":
		c.Verb = "list"
	case req.Method == http.MethodGet:
		c.Verb = "get"
	case req.Method == http.MethodPost:
		c.Verb = "create"
	case req.Method == http.MethodPut:
		c.Verb = "update"
	case req.Method == http.MethodPatch:
		c.Verb = "patch"
	case req.Method == http.MethodDelete && c.Name == "":
		c.Verb = "deletecollection"
	case req.Method == http.MethodDelete:
		c.Verb = "delete"
	default:
		c.Verb = method
	}
	return c
}
