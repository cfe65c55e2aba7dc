package history

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// encodeProtobuf encodes obj as client-go does for protobuf bodies, with
// apimachinery's own serializer: the decoder under test must agree with it.
func encodeProtobuf(t *testing.T, obj runtime.Object, kind string, apiVersion string) []byte {
	t.Helper()
	obj.GetObjectKind().SetGroupVersionKind(schema.FromAPIVersionAndKind(apiVersion, kind))
	var buf bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(obj, &buf); err != nil {
		t.Fatalf("encoding %s: %v", kind, err)
	}
	return buf.Bytes()
}

func encodeJSON(t *testing.T, obj any) []byte {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestInspectRequest(t *testing.T) {
	uid := types.UID("uid-1")
	opts := func(g *int64) *metav1.DeleteOptions {
		return &metav1.DeleteOptions{GracePeriodSeconds: g, Preconditions: &metav1.Preconditions{UID: &uid}}
	}
	eviction := func(g *int64) *policyv1.Eviction {
		return &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "p1", Namespace: "default"}, DeleteOptions: opts(g)}
	}
	const (
		protoCT = "application/vnd.kubernetes.protobuf"
		jsonCT  = "application/json"
	)
	deletePod := "/api/v1/namespaces/default/pods/p1"
	tests := []struct {
		name        string
		method, url string
		ct          string
		body        []byte
		wantGrace   *int64
		// wantName is the name of a created object; empty: the URL's.
		wantName string
	}{
		{name: "protobuf grace 0", method: "DELETE", url: deletePod, ct: protoCT,
			body: encodeProtobuf(t, opts(ptr.To[int64](0)), "DeleteOptions", "v1"), wantGrace: ptr.To[int64](0)},
		{name: "protobuf grace 30", method: "DELETE", url: deletePod, ct: protoCT,
			body: encodeProtobuf(t, opts(ptr.To[int64](30)), "DeleteOptions", "v1"), wantGrace: ptr.To[int64](30)},
		{name: "protobuf negative grace", method: "DELETE", url: deletePod, ct: protoCT,
			body: encodeProtobuf(t, opts(ptr.To[int64](-1)), "DeleteOptions", "v1"), wantGrace: ptr.To[int64](-1)},
		{name: "protobuf no grace", method: "DELETE", url: deletePod, ct: protoCT,
			body: encodeProtobuf(t, opts(nil), "DeleteOptions", "v1")},
		{name: "JSON grace 0", method: "DELETE", url: deletePod, ct: jsonCT,
			body: encodeJSON(t, opts(ptr.To[int64](0))), wantGrace: ptr.To[int64](0)},
		{name: "JSON no grace", method: "DELETE", url: deletePod, ct: jsonCT, body: encodeJSON(t, opts(nil))},
		{name: "query only", method: "DELETE", url: deletePod + "?gracePeriodSeconds=4", wantGrace: ptr.To[int64](4)},
		{name: "body wins over query", method: "DELETE", url: deletePod + "?gracePeriodSeconds=4", ct: jsonCT,
			body: encodeJSON(t, opts(ptr.To[int64](9))), wantGrace: ptr.To[int64](9)},
		{name: "query when the body has none", method: "DELETE", url: deletePod + "?gracePeriodSeconds=4", ct: protoCT,
			body: encodeProtobuf(t, opts(nil), "DeleteOptions", "v1"), wantGrace: ptr.To[int64](4)},
		{name: "deletecollection", method: "DELETE", url: "/api/v1/namespaces/default/pods", ct: jsonCT,
			body: encodeJSON(t, opts(ptr.To[int64](2))), wantGrace: ptr.To[int64](2)},
		{name: "protobuf eviction", method: "POST", url: deletePod + "/eviction", ct: protoCT,
			body: encodeProtobuf(t, eviction(ptr.To[int64](3)), "Eviction", "policy/v1"), wantGrace: ptr.To[int64](3), wantName: "p1"},
		{name: "JSON eviction", method: "POST", url: deletePod + "/eviction", ct: jsonCT,
			body: encodeJSON(t, eviction(ptr.To[int64](0))), wantGrace: ptr.To[int64](0), wantName: "p1"},
		{name: "eviction without options", method: "POST", url: deletePod + "/eviction", ct: protoCT,
			body: encodeProtobuf(t, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "p1"}}, "Eviction", "policy/v1"), wantName: "p1"},
		{name: "protobuf pod create", method: "POST", url: "/api/v1/namespaces/default/pods", ct: protoCT,
			body: encodeProtobuf(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Labels: map[string]string{"a": "b"}}}, "Pod", "v1"), wantName: "web-0"},
		{name: "JSON node create", method: "POST", url: "/api/v1/nodes", ct: jsonCT,
			body: encodeJSON(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}), wantName: "node-1"},
		{name: "generated name", method: "POST", url: "/api/v1/namespaces/default/pods", ct: protoCT,
			body: encodeProtobuf(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "rs-"}}, "Pod", "v1")},
		{name: "grace of other resources is not read", method: "DELETE", url: "/api/v1/nodes/n1", ct: jsonCT,
			body: encodeJSON(t, opts(ptr.To[int64](0)))},
		{name: "garbled protobuf", method: "DELETE", url: deletePod, ct: protoCT, body: []byte("k8s\x00\x12\xff\xff")},
		{name: "truncated protobuf", method: "DELETE", url: deletePod, ct: protoCT,
			body: encodeProtobuf(t, opts(ptr.To[int64](30)), "DeleteOptions", "v1")[:12]},
		{name: "garbled JSON", method: "DELETE", url: deletePod, ct: jsonCT, body: []byte(`{"gracePeriodSeconds":`)},
		{name: "YAML is not read", method: "DELETE", url: deletePod, ct: "application/yaml", body: []byte("gracePeriodSeconds: 3\n")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, tt.url, bytes.NewReader(tt.body))
			if tt.ct != "" {
				req.Header.Set("Content-Type", tt.ct)
			}
			call := describeRequest(req)
			if tt.wantName == "" {
				tt.wantName = call.Name // the URL's, unchanged
			}
			inspectRequest(&call, req, wantedBody(&call), tt.body)
			if diff := cmp.Diff(tt.wantGrace, call.GracePeriodSeconds); diff != "" {
				t.Errorf("grace (-want +got):\n%s", diff)
			}
			if call.Name != tt.wantName {
				t.Errorf("name = %q, want %q", call.Name, tt.wantName)
			}
		})
	}
}

// FuzzWalkProto: the wire-format reader never panics and never reads past
// its input, whatever the body.
func FuzzWalkProto(f *testing.F) {
	f.Add([]byte("k8s\x00\x12\x02\x08\x05"))
	f.Add([]byte("k8s\x00\x12\x0a\x0a\x08\x0a\x06web-00"))
	f.Add([]byte{0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add([]byte{0x12, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, body []byte) {
		protobufGrace(body, false)
		protobufGrace(body, true)
		protobufName(body)
	})
}

// podAPI answers deletions, evictions and creates of pods, decoding every
// request body with apimachinery to know what the client really sent.
type podAPI struct {
	mu     sync.Mutex
	sent   []*int64 // grace periods as the server decoded them, per deletion
	protos int      // request bodies that came as protobuf
}

func (a *podAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	a.mu.Lock()
	if strings.Contains(r.Header.Get("Content-Type"), "protobuf") {
		a.protos++
	}
	a.mu.Unlock()
	decode := func(into runtime.Object) {
		if len(body) == 0 {
			return
		}
		if _, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, into); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
		}
	}
	name := strings.TrimPrefix(r.URL.Path, "/api/v1/namespaces/default/pods")
	name = strings.TrimPrefix(name, "/")
	switch {
	case r.Method == http.MethodDelete:
		opts := &metav1.DeleteOptions{}
		decode(opts)
		g := opts.GracePeriodSeconds
		if q := r.URL.Query().Get("gracePeriodSeconds"); q != "" && g == nil {
			var n int64
			fmt.Sscan(q, &n)
			g = &n
		}
		a.mu.Lock()
		a.sent = append(a.sent, g)
		a.mu.Unlock()
		writeJSON(w, http.StatusOK, podJSON(name, "11", "uid-"+name))
	case strings.HasSuffix(name, "/eviction"):
		ev := &policyv1.Eviction{}
		decode(ev)
		var g *int64
		if ev.DeleteOptions != nil {
			g = ev.DeleteOptions.GracePeriodSeconds
		}
		a.mu.Lock()
		a.sent = append(a.sent, g)
		a.mu.Unlock()
		writeJSON(w, http.StatusCreated, `{"kind":"Status","apiVersion":"v1","status":"Success","code":201}`)
	case r.Method == http.MethodPost:
		pod := &corev1.Pod{}
		decode(pod)
		if pod.Name == "" {
			pod.Name = pod.GenerateName + "x7k2p"
		}
		writeJSON(w, http.StatusCreated, podJSON(pod.Name, "12", "uid-"+pod.Name))
	default:
		http.NotFound(w, r)
	}
}

// TestTransportRecordsGrace drives a real clientset, with its default
// (protobuf) bodies and with JSON, and checks the recorded grace periods and
// created names against what the server decoded.
func TestTransportRecordsGrace(t *testing.T) {
	for _, contentType := range []string{"", "application/json"} {
		t.Run("content type "+contentType, func(t *testing.T) {
			api := &podAPI{}
			srv := httptest.NewServer(api)
			defer srv.Close()
			rec := mustCreate(t)
			defer rec.Close()
			cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: contentType}, WrapTransport: rec.WrapTransport("tester")})
			if err != nil {
				t.Fatal(err)
			}
			pods := cs.CoreV1().Pods("default")
			ctx := context.Background()
			uid := types.UID("uid-a")
			for _, g := range []*int64{ptr.To[int64](0), ptr.To[int64](30), nil, ptr.To[int64](-5)} {
				if err := pods.Delete(ctx, "a", metav1.DeleteOptions{GracePeriodSeconds: g, Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil {
					t.Fatalf("Delete: %v", err)
				}
			}
			if err := pods.EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "default"},
				DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}}); err != nil {
				t.Fatalf("EvictV1: %v", err)
			}
			if _, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0"}}, metav1.CreateOptions{}); err != nil {
				t.Fatalf("Create: %v", err)
			}
			if _, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "rs-"}}, metav1.CreateOptions{}); err != nil {
				t.Fatalf("Create: %v", err)
			}
			api.mu.Lock()
			sent, protos := api.sent, api.protos
			api.mu.Unlock()
			if contentType == "" && protos == 0 {
				t.Errorf("the default clientset sent no protobuf body: the protobuf path is untested")
			}
			if contentType != "" && protos != 0 {
				t.Errorf("a JSON clientset sent %d protobuf bodies", protos)
			}
			t.Logf("%d of 7 request bodies were protobuf", protos)

			h := mustLoad(t, rec.Path())
			want := []APICall{
				{Verb: "delete", Resource: "pods", Namespace: "default", Name: "a", GracePeriodSeconds: sent[0], UID: "uid-a"},
				{Verb: "delete", Resource: "pods", Namespace: "default", Name: "a", GracePeriodSeconds: sent[1], UID: "uid-a"},
				{Verb: "delete", Resource: "pods", Namespace: "default", Name: "a", GracePeriodSeconds: sent[2], UID: "uid-a"},
				{Verb: "delete", Resource: "pods", Namespace: "default", Name: "a", GracePeriodSeconds: sent[3], UID: "uid-a"},
				{Verb: "create", Resource: "pods", Subresource: "eviction", Namespace: "default", Name: "b", GracePeriodSeconds: sent[4]},
				{Verb: "create", Resource: "pods", Namespace: "default", Name: "web-0", UID: "uid-web-0"},
				{Verb: "create", Resource: "pods", Namespace: "default", Name: "rs-x7k2p", UID: "uid-rs-x7k2p"},
			}
			if diff := cmp.Diff([]*int64{ptr.To[int64](0), ptr.To[int64](30), nil, ptr.To[int64](-5), ptr.To[int64](0)}, sent); diff != "" {
				t.Fatalf("server decoded (-want +got):\n%s", diff)
			}
			ignore := cmpopts.IgnoreFields(APICall{}, "Identity", "BodyDigest", "Code", "ResourceVersion", "Invoke", "Return", "Outcome", "T")
			if diff := cmp.Diff(want, h.API, ignore); diff != "" {
				t.Errorf("recorded calls (-want +got):\n%s", diff)
			}
		})
	}
}
