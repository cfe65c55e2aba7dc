package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// fuzzRequests are the requests FuzzRequestBody sends its bodies with:
// every verb and subresource that reads a body, on the pod "fz" (reset
// before each request) or the node "node-1".
var fuzzRequests = []struct {
	method, path, identity string
}{
	{"POST", "/api/v1/namespaces/default/pods", IdentityAdmin},
	{"PUT", "/api/v1/namespaces/default/pods/fz", IdentityAdmin},
	{"PATCH", "/api/v1/namespaces/default/pods/fz", IdentityAdmin},
	{"PUT", "/api/v1/namespaces/default/pods/fz/status", KubeletIdentity("node-1")},
	{"PATCH", "/api/v1/namespaces/default/pods/fz/status", KubeletIdentity("node-1")},
	{"POST", "/api/v1/namespaces/default/pods/fz/binding", IdentityScheduler},
	{"POST", "/api/v1/namespaces/default/pods/fz/eviction", IdentityWorkload},
	{"DELETE", "/api/v1/namespaces/default/pods/fz", IdentityAdmin},
	{"DELETE", "/api/v1/namespaces/default/pods", IdentityAdmin},
	{"PATCH", "/api/v1/nodes/node-1", IdentityAdmin},
	{"PUT", "/apis/coordination.k8s.io/v1/namespaces/default/leases/fz", IdentityAdmin},
	{"POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets", IdentityAdmin},
}

// fuzzMedia are the Content-Type headers of the bodies.
var fuzzMedia = []string{
	mediaJSON, mediaYAML, mediaProtobuf, mediaMergePatch, mediaStrategicPatch, mediaJSONPatch,
	mediaApplyPatch, "", "text/plain", "application/json; charset=utf-8", "application/json;;",
}

// fuzzQueries are the query strings of the requests.
var fuzzQueries = []string{"", "?fieldValidation=Strict", "?fieldValidation=Ignore", "?fieldValidation=Warn", "?dryRun=All", "?gracePeriodSeconds=0"}

// documented5xx are the server errors the package documents: 503 and 504
// while the store has no reachable leader.
var documented5xx = map[int]bool{http.StatusServiceUnavailable: true, http.StatusGatewayTimeout: true}

// FuzzRequestBody sends arbitrary bodies, in every media type, to every
// request that reads one, through the server's handler. The server never
// panics and never answers a 5xx it does not document; a 2xx answer is a
// JSON object of a kind the scheme knows, and any other answer is a Status
// carrying its HTTP code.
func FuzzRequestBody(f *testing.F) {
	var logs lockedBuffer
	env := newTestEnv(f, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	srv := env.srv
	do := func(method, path, identity, contentType string, body []byte) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tokenOf(identity))
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		req.Header.Set("Accept", mediaJSON)
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		return rec
	}
	node := &corev1.Node{TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	if rec := do("POST", "/api/v1/nodes", IdentityAdmin, mediaJSON, mustJSON(f, node)); rec.Code != http.StatusCreated {
		f.Fatalf("creating node-1: %d %s", rec.Code, rec.Body)
	}
	fz := makePod("fz").obj()
	fz.TypeMeta = metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}
	fzJSON := mustJSON(f, fz)
	// reset makes the pod fz as it was first created, whatever the last
	// request did to it.
	reset := func() error {
		do("DELETE", "/api/v1/namespaces/default/pods/fz?gracePeriodSeconds=0", IdentityAdmin, "", nil)
		if rec := do("POST", "/api/v1/namespaces/default/pods", IdentityAdmin, mediaJSON, fzJSON); rec.Code != http.StatusCreated {
			return fmt.Errorf("creating pod fz: %d %s", rec.Code, rec.Body)
		}
		return nil
	}

	pod := makePod("fz").node("node-1").label("app", "web").obj()
	pod.TypeMeta = metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}
	binding := &corev1.Binding{TypeMeta: metav1.TypeMeta{Kind: "Binding", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "fz", Namespace: "default"}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}
	deleteOpts := &metav1.DeleteOptions{TypeMeta: metav1.TypeMeta{Kind: "DeleteOptions", APIVersion: "v1"}, GracePeriodSeconds: ptr.To[int64](5)}
	eviction := &policyv1.Eviction{TypeMeta: metav1.TypeMeta{Kind: "Eviction", APIVersion: "policy/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "fz", Namespace: "default"}, DeleteOptions: deleteOpts}
	lease := []byte(`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"fz","namespace":"default"},"spec":{"holderIdentity":"x","leaseDurationSeconds":10}}`)
	pdb := []byte(`{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","metadata":{"name":"b"},"spec":{"maxUnavailable":0,"selector":{"matchLabels":{"app":"web"}}}}`)
	status := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"fz","namespace":"default"},"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}`)
	const (
		jsonBody, yamlBody, proto, merge, strategic, jsonPatch = 0, 1, 2, 3, 4, 5
	)
	seed := func(req int, media int, query int, body []byte) {
		f.Add(uint8(req), uint8(media), uint8(query), body)
	}
	seed(0, jsonBody, 0, mustJSON(f, pod))
	seed(0, yamlBody, 1, mustYAML(f, pod))
	seed(0, proto, 0, mustProto(f, pod))
	seed(0, jsonBody, 1, []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x","unknown":1},"spec":{"containers":[{"name":"c","image":"i"}]},"spec":{}}`))
	seed(1, jsonBody, 0, mustJSON(f, pod))
	seed(1, proto, 2, mustProto(f, pod))
	seed(2, merge, 0, []byte(`{"metadata":{"labels":{"a":"b"}},"spec":{"nodeName":"node-1"}}`))
	seed(2, strategic, 1, []byte(`{"spec":{"containers":[{"name":"c","image":"j"}],"$setElementOrder/containers":[{"name":"c"}]}}`))
	seed(2, jsonPatch, 0, []byte(`[{"op":"add","path":"/metadata/labels","value":{"a":"b"}},{"op":"test","path":"/metadata/name","value":"fz"}]`))
	seed(2, jsonPatch, 0, []byte(`[{"op":"move","from":"/spec/containers/0","path":"/spec/containers/-"}]`))
	seed(3, jsonBody, 0, status)
	seed(4, merge, 0, []byte(`{"status":{"phase":"Failed","reason":"x"}}`))
	seed(4, strategic, 0, []byte(`{"status":{"conditions":[{"type":"Ready","status":"False"}]}}`))
	seed(5, jsonBody, 0, mustJSON(f, binding))
	seed(5, proto, 0, mustProto(f, binding))
	seed(6, jsonBody, 0, mustJSON(f, eviction))
	seed(6, proto, 0, mustProto(f, eviction))
	seed(7, jsonBody, 0, mustJSON(f, deleteOpts))
	seed(7, proto, 0, mustProto(f, deleteOpts))
	seed(7, yamlBody, 0, []byte("kind: DeleteOptions\napiVersion: v1\ngracePeriodSeconds: -1\npreconditions: {uid: nope}\n"))
	seed(8, jsonBody, 0, mustJSON(f, deleteOpts))
	seed(9, strategic, 0, []byte(`{"spec":{"taints":[{"key":"k","effect":"NoExecute"}]},"status":{"conditions":[{"type":"Ready","status":"Unknown"}]}}`))
	seed(10, jsonBody, 0, lease)
	seed(11, jsonBody, 0, pdb)
	seed(11, yamlBody, 0, []byte("apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: b2}\nspec: {minAvailable: \"50%\"}\n"))

	var mu sync.Mutex // the requests share pod fz
	f.Fuzz(func(t *testing.T, req, media, query uint8, body []byte) {
		mu.Lock()
		defer mu.Unlock()
		if err := reset(); err != nil {
			t.Fatal(err)
		}
		r := fuzzRequests[int(req)%len(fuzzRequests)]
		ct := fuzzMedia[int(media)%len(fuzzMedia)]
		path := r.path + fuzzQueries[int(query)%len(fuzzQueries)]
		logs.Reset()
		rec := do(r.method, path, r.identity, ct, body)
		what := fmt.Sprintf("%s %s (%s, %q)", r.method, path, r.identity, ct)
		if rec.Code >= 500 && !documented5xx[rec.Code] {
			t.Fatalf("%s: %d %s\nserver log:\n%s", what, rec.Code, rec.Body, logs.String())
		}
		if rec.Code >= 200 && rec.Code < 300 {
			if err := decodesAsObject(rec.Body.Bytes()); err != nil {
				t.Fatalf("%s: %d with a body that does not decode: %v\n%s", what, rec.Code, err, rec.Body)
			}
			return
		}
		var st metav1.Status
		if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil || st.Kind != "Status" || int(st.Code) != rec.Code {
			t.Fatalf("%s: %d with a body that is not its Status (%v): %s", what, rec.Code, err, rec.Body)
		}
	})
}

// decodesAsObject reports whether body is a JSON object of a kind the
// client-go scheme decodes.
func decodesAsObject(body []byte) error {
	if !json.Valid(body) {
		return fmt.Errorf("not JSON")
	}
	_, gvk, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
	if err != nil {
		return err
	}
	if gvk.Kind == "" {
		return fmt.Errorf("no kind")
	}
	return nil
}

func mustJSON(tb testing.TB, v any) []byte {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func mustYAML(tb testing.TB, v any) []byte {
	tb.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// mustProto encodes obj as client-go sends protobuf bodies.
func mustProto(tb testing.TB, obj runtime.Object) []byte {
	tb.Helper()
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Empty() {
		tb.Fatalf("%T without kind", obj)
	}
	var buf bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(obj, &buf); err != nil {
		tb.Fatalf("encoding %s: %v", gvk.Kind, err)
	}
	return buf.Bytes()
}

// lockedBuffer collects the server's log lines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
