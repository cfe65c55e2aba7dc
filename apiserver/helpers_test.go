package apiserver

import (
	"bytes"
	"context"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/podsafe/podsafe/raftstore"
)

// testStart is the fake clock's start: a fixed instant keeps deletion
// timestamps deterministic.
var testStart = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// testIdentities are the identities every test server knows, each with the
// token "token-" + identity.
var testIdentities = []string{
	IdentityAdmin, IdentityScheduler, IdentityNodeController, IdentityPodGC, IdentityPetController,
	IdentityReplicaSetController, IdentityFencingController, IdentityWorkload,
	KubeletIdentity("node-1"), KubeletIdentity("node-2"),
}

// tokenOf is the test token of an identity.
func tokenOf(identity string) string { return "token-" + identity }

// testTokens maps every test token to its identity.
func testTokens() map[string]string {
	m := map[string]string{}
	for _, id := range testIdentities {
		m[tokenOf(id)] = id
	}
	return m
}

// testEnv is an API server over a real in-memory raftstore, served over
// loopback HTTP.
type testEnv struct {
	t      testing.TB
	srv    *Server
	http   *httptest.Server
	store  *raftstore.Store
	clock  *clocktesting.FakeClock
	config Config

	mu       sync.Mutex
	requests []string
}

// testLogger sends logs to the test log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// newTestEnv starts a 1-member store (indexed as the cluster's are) and a
// server on it; adjust changes the server's Config.
func newTestEnv(t testing.TB, adjust ...func(*Config)) *testEnv {
	t.Helper()
	cluster := raftstore.OpenTestCluster(t, 1, raftstore.WithConfig(func(c *raftstore.Config) { c.Indexes = StoreIndexes() }))
	return newTestEnvOn(t, cluster.Stores[0], adjust...)
}

// newTestEnvOn starts a server on store.
func newTestEnvOn(t testing.TB, store *raftstore.Store, adjust ...func(*Config)) *testEnv {
	return startTestEnv(t, store, false, adjust...)
}

// startTestEnv starts a server on store, over HTTPS when useTLS.
func startTestEnv(t testing.TB, store *raftstore.Store, useTLS bool, adjust ...func(*Config)) *testEnv {
	t.Helper()
	clk := clocktesting.NewFakeClock(testStart)
	cfg := Config{Store: store, Tokens: testTokens(), Clock: clk, Logger: testLogger(t)}
	for _, f := range adjust {
		f(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e := &testEnv{t: t, srv: srv, store: store, clock: clk, config: cfg}
	e.http = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.requests = append(e.requests, r.Method+" "+r.URL.RequestURI())
		e.mu.Unlock()
		srv.ServeHTTP(w, r)
	}))
	// Clients that give up on a TLS handshake are no news.
	e.http.Config.ErrorLog = log.New(io.Discard, "", 0)
	if useTLS {
		e.http.StartTLS()
	} else {
		e.http.Start()
	}
	// Cleanups run last-in first-out: end the watches, then the listener.
	t.Cleanup(e.http.Close)
	t.Cleanup(func() { _ = srv.Close() })
	return e
}

// requestLog returns the requests served so far, as "METHOD URI".
func (e *testEnv) requestLog() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.requests...)
}

// restConfig is a client config for identity with client-go's defaults
// (protobuf requests) and no client-side rate limit.
func (e *testEnv) restConfig(identity string) *rest.Config {
	cfg := &rest.Config{Host: e.http.URL, BearerToken: tokenOf(identity), QPS: -1, Timeout: 30 * time.Second}
	if strings.HasPrefix(e.http.URL, "https:") {
		cfg.TLSClientConfig.Insecure = true
	}
	return cfg
}

// client returns a real clientset acting as identity.
func (e *testEnv) client(identity string) kubernetes.Interface {
	e.t.Helper()
	cs, err := kubernetes.NewForConfig(e.restConfig(identity))
	if err != nil {
		e.t.Fatalf("clientset: %v", err)
	}
	return cs
}

// rawRequest sends a request with the token of identity ("" for none).
func (e *testEnv) rawRequest(method, path, identity, contentType string, body []byte) *http.Response {
	e.t.Helper()
	req, err := http.NewRequest(method, e.http.URL+path, bytesReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if identity != "" {
		req.Header.Set("Authorization", "Bearer "+tokenOf(identity))
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := e.http.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp
}

// ctx returns a context that ends with the test.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// podBuilder builds test pods: makePod("p").node("node-1").obj().
type podBuilder struct{ pod *corev1.Pod }

func makePod(name string) *podBuilder {
	return &podBuilder{pod: &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:1.36"}}},
	}}
}

func (b *podBuilder) node(n string) *podBuilder { b.pod.Spec.NodeName = n; return b }
func (b *podBuilder) grace(g int64) *podBuilder {
	b.pod.Spec.TerminationGracePeriodSeconds = &g
	return b
}
func (b *podBuilder) label(k, v string) *podBuilder {
	if b.pod.Labels == nil {
		b.pod.Labels = map[string]string{}
	}
	b.pod.Labels[k] = v
	return b
}
func (b *podBuilder) phase(p corev1.PodPhase) *podBuilder { b.pod.Status.Phase = p; return b }
func (b *podBuilder) terminating(at time.Time, grace int64) *podBuilder {
	t := metav1.NewTime(at)
	b.pod.DeletionTimestamp = &t
	b.pod.DeletionGracePeriodSeconds = &grace
	return b
}
func (b *podBuilder) obj() *corev1.Pod { return b.pod.DeepCopy() }

// nodeBuilder builds test nodes.
type nodeBuilder struct{ node *corev1.Node }

func makeNode(name string) *nodeBuilder {
	return &nodeBuilder{node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}}
}

func (b *nodeBuilder) condition(t corev1.NodeConditionType, s corev1.ConditionStatus) *nodeBuilder {
	b.node.Status.Conditions = append(b.node.Status.Conditions, corev1.NodeCondition{Type: t, Status: s})
	return b
}
func (b *nodeBuilder) obj() *corev1.Node { return b.node.DeepCopy() }

// seedPod stores pod as admin would (bound or not) and sets its status
// phase when given; it returns the stored pod.
func (e *testEnv) seedPod(pod *corev1.Pod) *corev1.Pod {
	e.t.Helper()
	ctx := testCtx(e.t)
	admin := e.client(IdentityAdmin)
	phase := pod.Status.Phase
	created, err := admin.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("seeding pod %s: %v", pod.Name, err)
	}
	if phase != "" && phase != created.Status.Phase {
		created.Status.Phase = phase
		if created, err = admin.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			e.t.Fatalf("seeding pod %s phase: %v", pod.Name, err)
		}
	}
	return created
}

// seedNode stores node as admin would, status included.
func (e *testEnv) seedNode(node *corev1.Node) *corev1.Node {
	e.t.Helper()
	ctx := testCtx(e.t)
	admin := e.client(IdentityAdmin)
	created, err := admin.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("seeding node %s: %v", node.Name, err)
	}
	return created
}

// storedPod reads a pod straight from the store (nil if absent).
func (e *testEnv) storedPod(ns, name string) *corev1.Pod {
	e.t.Helper()
	obj, err := e.store.Get(testCtx(e.t), raftstore.Key{Resource: "pods", Namespace: ns, Name: name})
	if err != nil {
		return nil
	}
	res, _ := e.srv.reg.lookup("", "v1", "pods")
	decoded, err := res.decodeStored(obj.Data)
	if err != nil {
		e.t.Fatal(err)
	}
	return decoded.(*corev1.Pod)
}

// storeRevision returns the store's current revision.
func (e *testEnv) storeRevision() uint64 {
	e.t.Helper()
	_, rev, err := e.store.List(testCtx(e.t), "pods", "")
	if err != nil {
		e.t.Fatal(err)
	}
	return rev
}

// bytesReader returns a body reader for a possibly empty body.
func bytesReader(b []byte) io.Reader {
	if b == nil {
		return http.NoBody
	}
	return bytes.NewReader(b)
}

// podSnapshot returns every stored pod's key and resourceVersion.
func (e *testEnv) podSnapshot() map[string]uint64 {
	e.t.Helper()
	objs, _, err := e.store.List(testCtx(e.t), "pods", "")
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, o := range objs {
		out[o.Key.String()] = o.RV
	}
	return out
}
