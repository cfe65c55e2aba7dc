package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/podsafe/podsafe/raftstore"
)

// statusAnswer is what a test checks of an error answer.
type statusAnswer struct {
	Code   int
	Reason metav1.StatusReason
}

// readStatus reads a Status answer, checking it is JSON with kind Status.
func readStatus(t *testing.T, resp *http.Response) (metav1.Status, statusAnswer) {
	t.Helper()
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var st metav1.Status
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("answer is not a Status: %v: %s", err, body)
	}
	if st.Kind != "Status" || st.APIVersion != "v1" || int(st.Code) != resp.StatusCode {
		t.Errorf("Status kind/apiVersion/code = %s/%s/%d for HTTP %d", st.Kind, st.APIVersion, st.Code, resp.StatusCode)
	}
	return st, statusAnswer{Code: resp.StatusCode, Reason: st.Reason}
}

// TestBadInput sends malformed and refused requests over raw HTTP and checks
// each gets a clear Status and leaves the store as it was.
func TestBadInput(t *testing.T) {
	e := newTestEnv(t)
	e.seedPod(makePod("existing").obj())
	const pods = "/api/v1/namespaces/default/pods"
	tests := []struct {
		name        string
		method      string
		path        string
		identity    string
		contentType string
		body        string
		want        statusAnswer
		message     string // a substring the message must contain
	}{
		{"malformed JSON", http.MethodPost, pods, IdentityWorkload, "application/json", `{"metadata": {"name": "x"`,
			statusAnswer{400, metav1.StatusReasonBadRequest}, "decoding Pod"},
		{"unknown field under Strict", http.MethodPost, pods + "?fieldValidation=Strict", IdentityWorkload, "application/json",
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"},"spec":{"foo":1,"containers":[{"name":"c","image":"i"}]}}`,
			statusAnswer{400, metav1.StatusReasonBadRequest}, `strict decoding error: unknown field "spec.foo"`},
		{"duplicate field under Strict", http.MethodPost, pods + "?fieldValidation=Strict", IdentityWorkload, "application/json",
			`{"metadata":{"name":"x","name":"y"},"spec":{"containers":[{"name":"c","image":"i"}]}}`,
			statusAnswer{400, metav1.StatusReasonBadRequest}, `duplicate field "metadata.name"`},
		{"wrong kind", http.MethodPost, pods, IdentityWorkload, "application/json", `{"apiVersion":"v1","kind":"Node","metadata":{"name":"x"}}`,
			statusAnswer{400, metav1.StatusReasonBadRequest}, "the body is a Node, not a Pod"},
		{"empty body", http.MethodPost, pods, IdentityWorkload, "application/json", ``,
			statusAnswer{400, metav1.StatusReasonBadRequest}, "body is empty"},
		{"no token", http.MethodGet, pods, "", "", "", statusAnswer{401, metav1.StatusReasonUnauthorized}, "no bearer token"},
		{"non-JSON content type", http.MethodPost, pods, IdentityWorkload, "text/plain", `name: x`,
			statusAnswer{415, metav1.StatusReasonUnsupportedMediaType}, `unknown format "text/plain"`},
		{"missing namespace", http.MethodPost, "/api/v1/pods", IdentityWorkload, "application/json", `{"metadata":{"name":"x"}}`,
			statusAnswer{405, metav1.StatusReasonMethodNotAllowed}, "/api/v1/namespaces/NAMESPACE/pods"},
		{"namespace mismatch", http.MethodPost, pods, IdentityWorkload, "application/json",
			`{"metadata":{"name":"x","namespace":"other"},"spec":{"containers":[{"name":"c","image":"i"}]}}`,
			statusAnswer{400, metav1.StatusReasonBadRequest}, "does not match the namespace"},
		{"invalid name", http.MethodPost, pods, IdentityWorkload, "application/json",
			`{"metadata":{"name":"Not_Valid"},"spec":{"containers":[{"name":"c","image":"i"}]}}`,
			statusAnswer{422, metav1.StatusReasonInvalid}, "metadata.name"},
		{"no containers", http.MethodPost, pods, IdentityWorkload, "application/json", `{"metadata":{"name":"x"}}`,
			statusAnswer{422, metav1.StatusReasonInvalid}, "spec.containers"},
		{"already exists", http.MethodPost, pods, IdentityWorkload, "application/json",
			`{"metadata":{"name":"existing"},"spec":{"containers":[{"name":"c","image":"i"}]}}`,
			statusAnswer{409, metav1.StatusReasonAlreadyExists}, `"existing" already exists`},
		{"bad label selector", http.MethodGet, pods + "?labelSelector=a%20in%20(", IdentityWorkload, "", "",
			statusAnswer{400, metav1.StatusReasonBadRequest}, "invalid labelSelector"},
		{"unsupported field selector", http.MethodGet, pods + "?fieldSelector=spec.foo%3Dx", IdentityWorkload, "", "",
			statusAnswer{400, metav1.StatusReasonBadRequest}, `"spec.foo" is not a known field selector`},
		{"unknown resource", http.MethodGet, "/api/v1/namespaces/default/widgets", IdentityWorkload, "", "",
			statusAnswer{404, metav1.StatusReasonNotFound}, "could not find the requested resource"},
		{"missing object", http.MethodGet, pods + "/none", IdentityWorkload, "", "",
			statusAnswer{404, metav1.StatusReasonNotFound}, `pods "none" not found`},
		{"verb not supported", http.MethodPost, pods + "/existing", IdentityWorkload, "application/json", `{}`,
			statusAnswer{405, metav1.StatusReasonMethodNotAllowed}, "POST is not supported on pods/NAME"},
		{"apply patch without a field manager", http.MethodPatch, pods + "/existing", IdentityWorkload, "application/apply-patch+yaml", `metadata: {}`,
			statusAnswer{422, metav1.StatusReasonInvalid}, "fieldManager: Required value"},
		{"apply patch in CBOR", http.MethodPatch, pods + "/existing?fieldManager=m", IdentityWorkload, "application/apply-patch+cbor", `x`,
			statusAnswer{415, metav1.StatusReasonUnsupportedMediaType}, "apply-patch+cbor"},
		{"malformed merge patch", http.MethodPatch, pods + "/existing", IdentityWorkload, "application/merge-patch+json", `{"metadata":`,
			statusAnswer{400, metav1.StatusReasonBadRequest}, "not a JSON object"},
		{"failed JSON patch test", http.MethodPatch, pods + "/existing", IdentityWorkload, "application/json-patch+json",
			`[{"op":"test","path":"/metadata/name","value":"other"}]`,
			statusAnswer{422, metav1.StatusReasonInvalid}, `Pod "existing" is invalid: operation 0 of the JSON patch (test /metadata/name) failed`},
		{"patch sets nodeName", http.MethodPatch, pods + "/existing", IdentityWorkload, "application/merge-patch+json",
			`{"spec":{"nodeName":"node-1"}}`, statusAnswer{422, metav1.StatusReasonInvalid}, "spec.nodeName"},
		{"patch with a stale resourceVersion", http.MethodPatch, pods + "/existing", IdentityWorkload, "application/merge-patch+json",
			`{"metadata":{"resourceVersion":"1","labels":{"a":"b"}}}`, statusAnswer{409, metav1.StatusReasonConflict}, "the object has been modified"},
		{"watch list without resourceVersionMatch", http.MethodGet, pods + "?watch=true&sendInitialEvents=true&allowWatchBookmarks=true",
			IdentityWorkload, "", "", statusAnswer{422, metav1.StatusReasonInvalid}, "resourceVersionMatch"},
		{"bad resourceVersion", http.MethodGet, pods + "?watch=true&resourceVersion=abc", IdentityWorkload, "", "",
			statusAnswer{400, metav1.StatusReasonBadRequest}, "invalid resourceVersion"},
		{"dry run of an unknown kind", http.MethodDelete, pods + "/existing?dryRun=Some", IdentityWorkload, "", "",
			statusAnswer{400, metav1.StatusReasonBadRequest}, "dryRun"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.podSnapshot()
			var body []byte
			if tt.body != "" || tt.method == http.MethodPost {
				body = []byte(tt.body)
			}
			st, got := readStatus(t, e.rawRequest(tt.method, tt.path, tt.identity, tt.contentType, body))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("answer (-want +got):\n%s\nmessage: %s", diff, st.Message)
			}
			if !strings.Contains(st.Message, tt.message) {
				t.Errorf("message %q does not contain %q", st.Message, tt.message)
			}
			if diff := cmp.Diff(before, e.podSnapshot()); diff != "" {
				t.Errorf("pods changed (-before +after):\n%s", diff)
			}
		})
	}
}

// TestInvalidDetails: a 422 names the object, its kind and each cause, so
// that kubectl says which object and which field (`The Pod "existing" is
// invalid: metadata.labels.a: …`) rather than `The Pod "" is invalid`.
func TestInvalidDetails(t *testing.T) {
	e := newTestEnv(t)
	e.seedPod(makePod("existing").obj())
	const pods = "/api/v1/namespaces/default/pods"
	for _, tc := range []struct {
		name, path, contentType, body string
		kind, object                  string
		causes                        []metav1.StatusCause
	}{
		{"the second operation's test fails", pods + "/existing", "application/json-patch+json",
			`[{"op":"add","path":"/metadata/labels","value":{"a":"1"}},{"op":"test","path":"/metadata/labels/a","value":"2"}]`,
			"Pod", "existing", []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid, Field: "metadata.labels.a"}}},
		{"a removal of what is not there", pods + "/existing", "application/json-patch+json",
			`[{"op":"remove","path":"/spec/containers/3/image"}]`,
			"Pod", "existing", []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid, Field: "spec.containers[3].image"}}},
		{"watch options that do not go together", pods + "?watch=true&sendInitialEvents=true&resourceVersionMatch=Exact", "", "",
			"ListOptions", "", []metav1.StatusCause{
				{Type: metav1.CauseTypeForbidden, Field: "resourceVersionMatch"},
				{Type: metav1.CauseTypeForbidden, Field: "allowWatchBookmarks"},
				{Type: metav1.CauseTypeFieldValueNotSupported, Field: "resourceVersionMatch"},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := http.MethodPatch
			var body []byte
			if tc.body == "" {
				method = http.MethodGet
			} else {
				body = []byte(tc.body)
			}
			st, got := readStatus(t, e.rawRequest(method, tc.path, IdentityWorkload, tc.contentType, body))
			if got != (statusAnswer{422, metav1.StatusReasonInvalid}) || st.Details == nil {
				t.Fatalf("answer %+v, details %+v: %s", got, st.Details, st.Message)
			}
			if st.Details.Kind != tc.kind || st.Details.Name != tc.object {
				t.Errorf("details name %s %q, want %s %q", st.Details.Kind, st.Details.Name, tc.kind, tc.object)
			}
			var causes []metav1.StatusCause
			for _, c := range st.Details.Causes {
				if c.Message == "" {
					t.Errorf("cause %+v says nothing", c)
				}
				causes = append(causes, metav1.StatusCause{Type: c.Type, Field: c.Field})
			}
			if diff := cmp.Diff(tc.causes, causes); diff != "" {
				t.Errorf("causes (-want +got):\n%s\nmessage %s", diff, st.Message)
			}
		})
	}
}

func TestFieldOfPointer(t *testing.T) {
	for pointer, want := range map[string]string{
		"/metadata/name": "metadata.name", "/spec/containers/0/image": "spec.containers[0].image",
		"/metadata/labels/a~1b": "metadata.labels.a/b", "/metadata/annotations/x~0y": "metadata.annotations.x~y",
		"/spec/tolerations/-": "spec.tolerations[-]", "": "",
	} {
		if got := fieldOfPointer(pointer); got != want {
			t.Errorf("fieldOfPointer(%q) = %q, want %q", pointer, got, want)
		}
	}
}

// TestUnknownToken checks 401 for a token the server does not know, through
// a real clientset.
func TestUnknownToken(t *testing.T) {
	e := newTestEnv(t)
	cfg := e.restConfig(IdentityAdmin)
	cfg.BearerToken = "no-such-token"
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.CoreV1().Pods("default").List(testCtx(t), metav1.ListOptions{})
	if !apierrors.IsUnauthorized(err) {
		t.Errorf("list with an unknown token: %v, want 401", err)
	}
}

// TestUpdateConflict checks the compare-and-swap of PUT: a stale
// resourceVersion is 409 with the usual message and changes nothing.
func TestUpdateConflict(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	c := e.client(IdentityWorkload)
	pod := e.seedPod(makePod("p").obj())
	first := pod.DeepCopy()
	first.Labels = map[string]string{"v": "1"}
	if _, err := c.CoreV1().Pods("default").Update(ctx, first, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	stale := pod.DeepCopy()
	stale.Labels = map[string]string{"v": "2"}
	_, err := c.CoreV1().Pods("default").Update(ctx, stale, metav1.UpdateOptions{})
	want := `Operation cannot be fulfilled on pods "p": the object has been modified; please apply your changes to the latest version and try again`
	if !apierrors.IsConflict(err) || err.Error() != want {
		t.Fatalf("stale update: %v, want 409 %q", err, want)
	}
	if got := e.storedPod("default", "p").Labels["v"]; got != "1" {
		t.Errorf("label v = %q after a refused update, want 1", got)
	}
	// Without a resourceVersion an update is unconditional.
	stale.ResourceVersion = ""
	if _, err := c.CoreV1().Pods("default").Update(ctx, stale, metav1.UpdateOptions{}); err != nil {
		t.Errorf("unconditional update: %v", err)
	}
}

// panicStore panics on Get, to prove a handler panic becomes a 500 Status.
type panicStore struct{ Store }

func (panicStore) Get(context.Context, raftstore.Key) (raftstore.Object, error) { panic("injected") }

// TestPanicRecovered checks that a panic in a handler is answered with a 500
// Status and that the server keeps serving.
func TestPanicRecovered(t *testing.T) {
	cluster := raftstore.OpenTestCluster(t, 1)
	e := newTestEnvOn(t, cluster.Stores[0], func(c *Config) { c.Store = panicStore{c.Store} })
	_, got := readStatus(t, e.rawRequest(http.MethodGet, "/api/v1/namespaces/default/pods/p", IdentityAdmin, "", nil))
	if diff := cmp.Diff(statusAnswer{500, metav1.StatusReasonInternalError}, got); diff != "" {
		t.Errorf("answer to a panic (-want +got):\n%s", diff)
	}
	resp := e.rawRequest(http.MethodGet, "/api/v1/namespaces/default/pods", IdentityAdmin, "", nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("list after a panic: %d, want 200", resp.StatusCode)
	}
}

// TestConfigValidate checks that Validate names each bad field.
func TestConfigValidate(t *testing.T) {
	cluster := raftstore.OpenTestCluster(t, 1)
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no store", Config{Tokens: testTokens()}, "Store is nil"},
		{"no tokens", Config{Store: cluster.Stores[0]}, "Tokens is empty"},
		{"unknown identity", Config{Store: cluster.Stores[0], Tokens: map[string]string{"t": "kubelet-node-1"}}, `unknown identity "kubelet-node-1"`},
		{"negative interval", Config{Store: cluster.Stores[0], Tokens: testTokens(), BookmarkInterval: -1}, "BookmarkInterval is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New: %v, want an error containing %q", err, tt.want)
			}
		})
	}
	if _, err := New(Config{Store: cluster.Stores[0], Tokens: testTokens()}); err != nil {
		t.Errorf("New with a valid config: %v", err)
	}
}

// TestStoreErrors checks that each raftstore sentinel becomes the Status
// kube-apiserver would send.
func TestStoreErrors(t *testing.T) {
	tests := []struct {
		err  error
		want statusAnswer
	}{
		{raftstore.ErrNotFound, statusAnswer{404, metav1.StatusReasonNotFound}},
		{raftstore.ErrExists, statusAnswer{409, metav1.StatusReasonAlreadyExists}},
		{raftstore.ErrConflict, statusAnswer{409, metav1.StatusReasonConflict}},
		{raftstore.ErrTooOld, statusAnswer{410, metav1.StatusReasonExpired}},
		{raftstore.ErrUnavailable, statusAnswer{503, metav1.StatusReasonServiceUnavailable}},
		{raftstore.ErrClosed, statusAnswer{503, metav1.StatusReasonServiceUnavailable}},
		{raftstore.ErrTimeout, statusAnswer{504, metav1.StatusReasonTimeout}},
		{context.DeadlineExceeded, statusAnswer{504, metav1.StatusReasonTimeout}},
		{raftstore.ErrInvalid, statusAnswer{400, metav1.StatusReasonBadRequest}},
		{io.ErrUnexpectedEOF, statusAnswer{500, metav1.StatusReasonInternalError}},
	}
	for _, tt := range tests {
		wrapped := fmt.Errorf("updating pods/default/p: %w", tt.err)
		st := statusOf(storeError(wrapped, grPods, "p"))
		if diff := cmp.Diff(tt.want, statusAnswer{int(st.Code), st.Reason}); diff != "" {
			t.Errorf("%v (-want +got):\n%s", tt.err, diff)
		}
		if st.Kind != "Status" || st.APIVersion != "v1" {
			t.Errorf("%v: kind %q apiVersion %q", tt.err, st.Kind, st.APIVersion)
		}
	}
	if st := statusOf(storeError(raftstore.ErrConflict, grPods, "p")); !strings.Contains(st.Message, optimisticLockMessage) {
		t.Errorf("conflict message %q lacks the optimistic lock message", st.Message)
	}
}

// TestStorePartition checks the answers of a server whose store member is
// cut off from the others: writes and reads fail with 503 (not applied) or
// 504 (outcome unknown), never hang, and succeed again once healed.
func TestStorePartition(t *testing.T) {
	cluster := raftstore.OpenTestCluster(t, 3)
	follower := cluster.Index(cluster.Followers()[0].ID())
	e := newTestEnvOn(t, cluster.Stores[follower])
	ctx := testCtx(t)
	c := e.client(IdentityWorkload)
	cluster.IsolateMember(follower)
	_, err := c.CoreV1().Pods("default").Create(ctx, makePod("p").obj(), metav1.CreateOptions{})
	if !apierrors.IsServiceUnavailable(err) && !apierrors.IsTimeout(err) {
		t.Errorf("create on an isolated member: %v, want 503 or 504", err)
	}
	_, err = c.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{})
	if !apierrors.IsServiceUnavailable(err) && !apierrors.IsTimeout(err) {
		t.Errorf("get on an isolated member: %v, want 503 or 504", err)
	}
	cluster.Net.Heal()
	retryWrite(t, "create", func() error {
		_, err := c.CoreV1().Pods("default").Create(ctx, makePod("p").obj(), metav1.CreateOptions{})
		return err
	})
}
