package history

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func TestDescribeRequest(t *testing.T) {
	tests := []struct {
		method, url string
		want        APICall
	}{
		{"GET", "/api/v1/namespaces/default/pods/p1", APICall{Verb: "get", Resource: "pods", Namespace: "default", Name: "p1"}},
		{"GET", "/api/v1/namespaces/default/pods?labelSelector=a%3Db", APICall{Verb: "list", Resource: "pods", Namespace: "default"}},
		{"GET", "/api/v1/pods?watch=true&resourceVersion=5", APICall{Verb: "watch", Resource: "pods"}},
		{"GET", "/api/v1/watch/namespaces/default/pods", APICall{Verb: "watch", Resource: "pods", Namespace: "default"}},
		{"POST", "/api/v1/namespaces/default/pods", APICall{Verb: "create", Resource: "pods", Namespace: "default"}},
		{"POST", "/api/v1/namespaces/default/pods/p1/binding", APICall{Verb: "create", Resource: "pods", Subresource: "binding", Namespace: "default", Name: "p1"}},
		{"PUT", "/api/v1/namespaces/default/pods/p1/status", APICall{Verb: "update", Resource: "pods", Subresource: "status", Namespace: "default", Name: "p1"}},
		{"PATCH", "/api/v1/nodes/n1/status", APICall{Verb: "patch", Resource: "nodes", Subresource: "status", Name: "n1"}},
		{"DELETE", "/api/v1/namespaces/default/pods/p1", APICall{Verb: "delete", Resource: "pods", Namespace: "default", Name: "p1"}},
		{"DELETE", "/api/v1/namespaces/default/pods", APICall{Verb: "deletecollection", Resource: "pods", Namespace: "default"}},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1", APICall{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: "kube-node-lease", Name: "n1"}},
		{"GET", "/apis/scheduling.k8s.io/v1/priorityclasses", APICall{Verb: "list", Group: "scheduling.k8s.io", Resource: "priorityclasses"}},
		{"GET", "/api/v1/namespaces/kube-system", APICall{Verb: "get", Resource: "namespaces", Namespace: "kube-system", Name: "kube-system"}},
		{"PUT", "/api/v1/namespaces/ns1/finalize", APICall{Verb: "update", Resource: "namespaces", Subresource: "finalize", Namespace: "ns1", Name: "ns1"}},
		{"GET", "/api/v1/namespaces", APICall{Verb: "list", Resource: "namespaces"}},
		{"GET", "/version", APICall{Verb: "get", Path: "/version"}},
		{"GET", "/api/v1", APICall{Verb: "get", Path: "/api/v1"}},
		{"GET", "/apis/apps/v1", APICall{Verb: "get", Path: "/apis/apps/v1"}},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.url, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, tt.url, nil)
			if diff := cmp.Diff(tt.want, describeRequest(req)); diff != "" {
				t.Errorf("describeRequest (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOutcomeOf(t *testing.T) {
	tests := []struct {
		verb string
		code int
		want Status
	}{
		{"get", 200, StatusOK}, {"create", 201, StatusOK}, {"get", 304, StatusOK},
		{"get", 404, StatusFail}, {"update", 409, StatusFail}, {"create", 422, StatusFail}, {"create", 429, StatusFail},
		{"create", 503, StatusFail},
		{"create", 500, StatusUnknown}, {"get", 502, StatusUnknown}, {"update", 504, StatusUnknown},
		// A deletecollection that failed may have deleted some objects first.
		{"deletecollection", 200, StatusOK}, {"deletecollection", 403, StatusUnknown}, {"deletecollection", 503, StatusUnknown},
	}
	for _, tt := range tests {
		if got := outcomeOf(tt.verb, tt.code); got != tt.want {
			t.Errorf("outcomeOf(%s, %d) = %q, want %q", tt.verb, tt.code, got, tt.want)
		}
	}
}

// fakeAPI answers just enough of the Kubernetes JSON protocol for a
// clientset: pods get/list/watch/create/update/delete, with canned failures.
type fakeAPI struct {
	mu          sync.Mutex
	createdBody []byte
	watching    chan struct{} // closed once a watch stream is open
	release     chan struct{} // closing it ends the watch stream
}

func writeJSON(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	io.WriteString(w, body)
}

func status(code int, reason, msg string) string {
	return fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":%q,"reason":%q,"code":%d}`, msg, reason, code)
}

func podJSON(name, rv, uid string) string {
	return fmt.Sprintf(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":%q,"namespace":"default","resourceVersion":%q,"uid":%q}}`, name, rv, uid)
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	const prefix = "/api/v1/namespaces/default/pods"
	name := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, prefix), "/")
	switch {
	case r.Method == http.MethodGet && r.URL.Query().Get("watch") == "true":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, `{"type":"ADDED","object":`+podJSON("w1", "30", "uid-w")+"}\n")
		http.NewResponseController(w).Flush()
		close(f.watching)
		select {
		case <-f.release:
		case <-r.Context().Done():
		}
	case r.Method == http.MethodGet && name == "":
		writeJSON(w, http.StatusOK, `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"9"},"items":[]}`)
	case r.Method == http.MethodGet && name == "p1":
		writeJSON(w, http.StatusOK, podJSON("p1", "7", "uid-1"))
	case r.Method == http.MethodGet && name == "slow":
		<-r.Context().Done()
	case r.Method == http.MethodGet:
		writeJSON(w, http.StatusNotFound, status(404, "NotFound", `pods "`+name+`" not found`))
	case r.Method == http.MethodPost:
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.createdBody = body
		f.mu.Unlock()
		writeJSON(w, http.StatusCreated, podJSON("p2", "10", "uid-2"))
	case r.Method == http.MethodPut:
		io.Copy(io.Discard, r.Body)
		writeJSON(w, http.StatusConflict, status(409, "Conflict", "the object has been modified"))
	case r.Method == http.MethodDelete && name == "busy":
		writeJSON(w, http.StatusServiceUnavailable, status(503, "ServiceUnavailable", "no leader"))
	case r.Method == http.MethodDelete:
		writeJSON(w, http.StatusInternalServerError, status(500, "InternalError", "commit lost"))
	}
}

func TestTransportWithClientset(t *testing.T) {
	api := &fakeAPI{watching: make(chan struct{}), release: make(chan struct{})}
	srv := httptest.NewServer(api)
	defer srv.Close()
	rec := mustCreate(t)
	defer rec.Close()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, WrapTransport: rec.WrapTransport("tester")})
	if err != nil {
		t.Fatal(err)
	}
	pods := cs.CoreV1().Pods("default")
	ctx := context.Background()

	// A watch is recorded when its headers arrive, and its stream still
	// reaches the client.
	w, err := pods.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	<-api.watching
	select {
	case ev := <-w.ResultChan():
		if p, ok := ev.Object.(*corev1.Pod); !ok || p.Name != "w1" {
			t.Errorf("watch event object = %#v, want pod w1", ev.Object)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event reached the client")
	}
	h := mustLoad(t, rec.Path())
	if len(h.API) != 1 || h.API[0].Verb != "watch" || h.API[0].Outcome != StatusOK || h.API[0].ResourceVersion != "" {
		t.Errorf("while the watch is open the history holds %+v, want one ok watch without a resource version", h.API)
	}
	w.Stop()
	close(api.release)

	got, err := pods.Get(ctx, "p1", metav1.GetOptions{})
	if err != nil || got.Name != "p1" || got.ResourceVersion != "7" {
		t.Errorf("Get = %v, %v; want pod p1 at resourceVersion 7 (the body must reach the client)", got, err)
	}
	if _, err := pods.List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("List: %v", err)
	}
	created, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p2"}}, metav1.CreateOptions{})
	if err != nil || created.UID != "uid-2" {
		t.Errorf("Create = %v, %v; want pod with uid-2", created, err)
	}
	if _, err := pods.Update(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p1", ResourceVersion: "6"}}, metav1.UpdateOptions{}); err == nil {
		t.Errorf("Update succeeded, want a conflict")
	}
	if _, err := pods.Get(ctx, "missing", metav1.GetOptions{}); err == nil {
		t.Errorf("Get missing succeeded")
	}
	if err := pods.Delete(ctx, "busy", metav1.DeleteOptions{}); err == nil {
		t.Errorf("Delete busy succeeded, want 503")
	}
	if err := pods.Delete(ctx, "p1", metav1.DeleteOptions{}); err == nil {
		t.Errorf("Delete p1 succeeded, want 500")
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := pods.Get(short, "slow", metav1.GetOptions{}); err == nil {
		t.Errorf("Get slow succeeded, want a timeout")
	}

	api.mu.Lock()
	sum := sha256.Sum256(api.createdBody)
	api.mu.Unlock()
	if len(api.createdBody) == 0 {
		t.Fatalf("the server received an empty create body: the recorder consumed it")
	}
	h = mustLoad(t, rec.Path())
	want := []APICall{
		{Verb: "watch", Resource: "pods", Namespace: "default", Code: 200, Outcome: StatusOK},
		{Verb: "get", Resource: "pods", Namespace: "default", Name: "p1", Code: 200, ResourceVersion: "7", UID: "uid-1", Outcome: StatusOK},
		{Verb: "list", Resource: "pods", Namespace: "default", Code: 200, ResourceVersion: "9", Outcome: StatusOK},
		{Verb: "create", Resource: "pods", Namespace: "default", Name: "p2", BodyDigest: hex.EncodeToString(sum[:])[:16], Code: 201, ResourceVersion: "10", UID: "uid-2", Outcome: StatusOK},
		{Verb: "update", Resource: "pods", Namespace: "default", Name: "p1", Code: 409, Outcome: StatusFail, Error: "the object has been modified"},
		{Verb: "get", Resource: "pods", Namespace: "default", Name: "missing", Code: 404, Outcome: StatusFail, Error: `pods "missing" not found`},
		{Verb: "delete", Resource: "pods", Namespace: "default", Name: "busy", Code: 503, Outcome: StatusFail, Error: "no leader"},
		{Verb: "delete", Resource: "pods", Namespace: "default", Name: "p1", Code: 500, Outcome: StatusUnknown, Error: "commit lost"},
		{Verb: "get", Resource: "pods", Namespace: "default", Name: "slow", Outcome: StatusUnknown},
	}
	for i := range h.API {
		c := &h.API[i]
		if c.Identity != "tester" || c.Return < c.Invoke || c.Invoke <= 0 {
			t.Errorf("call %d: identity %q, times [%d,%d]; want tester and ordered times", i, c.Identity, c.Invoke, c.Return)
		}
		if c.Name == "slow" && !strings.Contains(c.Error, "context deadline exceeded") {
			t.Errorf("slow get error = %q, want the client's deadline", c.Error)
		}
	}
	// Digests of the protobuf bodies client-go encodes (update, delete
	// options) are checked only for presence, the slow get's error only for
	// its cause.
	for i := range h.API {
		if v := h.API[i].Verb; v == "update" || v == "delete" {
			if h.API[i].BodyDigest == "" {
				t.Errorf("%s recorded without a body digest", v)
			}
			h.API[i].BodyDigest = ""
		}
		if h.API[i].Name == "slow" {
			h.API[i].Error = ""
		}
	}
	if diff := cmp.Diff(want, h.API, cmpopts.IgnoreFields(APICall{}, "Identity", "Invoke", "Return", "T")); diff != "" {
		t.Errorf("recorded calls (-want +got):\n%s", diff)
	}
}

func TestTransportPassesBodiesThrough(t *testing.T) {
	proto := []byte("k8s\x00\x0a\x02v1\x12\x03Pod")
	var received []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received, _ = io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/short":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", "1000")
			w.WriteHeader(http.StatusOK)
			io.WriteString(w, `{"kind":"Pod",`)
		default:
			w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf")
			w.Write(proto)
		}
	}))
	defer srv.Close()
	rec := mustCreate(t)
	defer rec.Close()
	client := &http.Client{Transport: rec.WrapTransport("raw")(http.DefaultTransport)}

	// A body that cannot be replayed (no GetBody) is buffered, hashed and
	// still delivered whole.
	body := "a request body that must arrive intact"
	req, err := http.NewRequest(http.MethodPut, srv.URL+"/api/v1/namespaces/default/pods/p1", io.NopCloser(strings.NewReader(body)))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(got, proto) {
		t.Errorf("protobuf response reached the client as %q, want %q", got, proto)
	}
	if string(received) != body {
		t.Errorf("server received %q, want %q", received, body)
	}

	// A JSON body cut short: the client sees the same error, and the call is
	// unknown.
	resp, err = client.Get(srv.URL + "/short")
	if err != nil {
		t.Fatal(err)
	}
	got, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	if rerr == nil || string(got) != `{"kind":"Pod",` {
		t.Errorf("short body read = %q, %v; want the partial bytes and an error", got, rerr)
	}

	h := mustLoad(t, rec.Path())
	sum := sha256.Sum256([]byte(body))
	want := []APICall{
		{Identity: "raw", Verb: "update", Resource: "pods", Namespace: "default", Name: "p1", BodyDigest: hex.EncodeToString(sum[:])[:16], Code: 200, Outcome: StatusOK},
		{Identity: "raw", Verb: "get", Path: "/short", Code: 200, Outcome: StatusUnknown, Error: "unexpected EOF"},
	}
	if diff := cmp.Diff(want, h.API, cmpopts.IgnoreFields(APICall{}, "Invoke", "Return", "T")); diff != "" {
		t.Errorf("recorded calls (-want +got):\n%s", diff)
	}
}
