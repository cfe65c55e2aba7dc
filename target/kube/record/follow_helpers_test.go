package record

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/history"
	"github.com/podsafe/podsafe/raftstore"
)

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// following is one FollowResource run of a test.
type following struct {
	t      *testing.T
	rec    *history.Recorder
	path   string
	cancel context.CancelFunc
	done   chan error
}

// follow starts FollowResource with cfg on a new history.
func follow(t *testing.T, cfg *rest.Config, gvr schema.GroupVersionResource, namespace string) *following {
	t.Helper()
	return followWith(t, cfg, gvr, namespace, time.Second)
}

// followWith is follow with watches of watchTimeout.
func followWith(t *testing.T, cfg *rest.Config, gvr schema.GroupVersionResource, namespace string, watchTimeout time.Duration) *following {
	t.Helper()
	rec, path := newRecorder(t)
	ctx, cancel := context.WithCancel(context.Background())
	f := &following{t: t, rec: rec, path: path, cancel: cancel, done: make(chan error, 1)}
	opts := FollowOptions{WatchTimeout: watchTimeout, RetryInterval: 10 * time.Millisecond, MaxRetryInterval: 100 * time.Millisecond}
	go func() { f.done <- FollowResource(ctx, cfg, gvr, namespace, rec, opts) }()
	t.Cleanup(func() { f.stop() })
	return f
}

// stop ends the run, closes the history and loads it.
func (f *following) stop() *history.History {
	f.t.Helper()
	if f.cancel == nil {
		return load(f.t, f.path)
	}
	f.cancel()
	f.cancel = nil
	select {
	case err := <-f.done:
		if err != nil {
			f.t.Errorf("FollowResource: %v", err)
		}
	case <-time.After(10 * time.Second):
		f.t.Fatal("FollowResource did not return after its context ended")
	}
	if err := f.rec.Close(); err != nil {
		f.t.Fatal(err)
	}
	return load(f.t, f.path)
}

// waitLogs waits until the history holds n log lines of msg.
func (f *following) waitLogs(msg string, n int) {
	f.t.Helper()
	eventually(f.t, fmt.Sprintf("%d %q lines", n, msg), func() bool { return len(logsWith(load(f.t, f.path), msg)) >= n })
}

// waitRV waits until the history records a store line at rv or later.
func (f *following) waitRV(rv string) {
	f.t.Helper()
	eventually(f.t, "the store line of rv "+rv, func() bool {
		for _, e := range load(f.t, f.path).Store {
			if rvNum(f.t, e.RV) >= rvNum(f.t, rv) {
				return true
			}
		}
		return false
	})
}

func rvNum(t *testing.T, rv string) uint64 {
	t.Helper()
	var n uint64
	if _, err := fmt.Sscan(rv, &n); err != nil {
		t.Fatalf("resourceVersion %q: %v", rv, err)
	}
	return n
}

// startCluster starts an embedded cluster and returns its admin config.
func startCluster(t *testing.T, members int) (*cluster.Cluster, *rest.Config) {
	t.Helper()
	c := cluster.StartForTest(t, cluster.Config{Topology: cluster.DefaultTopology(members, 0, 1)})
	return c, c.RESTConfig(apiserver.IdentityAdmin, cluster.ClientOptions{Host: cluster.ClientHost(1)})
}

// admin returns an admin clientset of another client host.
func admin(t *testing.T, c *cluster.Cluster, member int) kubernetes.Interface {
	t.Helper()
	cs, err := c.Clientset(apiserver.IdentityAdmin, cluster.ClientOptions{Host: cluster.ClientHost(2), Member: member, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func pod(ns, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "t"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox"}}},
	}
}

// writes makes pod changes; with retry it retries each until it is done
// (while a crashed member's cluster elects a leader).
type writes struct {
	t     *testing.T
	cs    kubernetes.Interface
	ctx   context.Context
	retry bool
}

// do runs f until it succeeds, once without retry.
func (w writes) do(what string, f func() error) {
	w.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if !w.retry || time.Now().After(deadline) {
			w.t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (w writes) create(ns, name string) *corev1.Pod {
	w.t.Helper()
	var p *corev1.Pod
	// The namespace first: the API server refuses objects in a namespace
	// that does not exist (NamespaceLifecycle).
	w.do("creating namespace "+ns, func() error {
		_, err := w.cs.CoreV1().Namespaces().Create(w.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	w.do("creating "+name, func() (err error) {
		p, err = w.cs.CoreV1().Pods(ns).Create(w.ctx, pod(ns, name), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) && w.retry { // an earlier try went through
			p, err = w.cs.CoreV1().Pods(ns).Get(w.ctx, name, metav1.GetOptions{})
		}
		return err
	})
	return p
}

func (w writes) relabel(ns, name, value string) *corev1.Pod {
	w.t.Helper()
	var p *corev1.Pod
	w.do("relabelling "+name, func() (err error) {
		p, err = w.cs.CoreV1().Pods(ns).Get(w.ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Labels["v"] == value {
			return nil // an earlier try went through
		}
		p.Labels["v"] = value
		p, err = w.cs.CoreV1().Pods(ns).Update(w.ctx, p, metav1.UpdateOptions{})
		return err
	})
	return p
}

func (w writes) delete(ns, name string) {
	w.t.Helper()
	w.do("deleting "+name, func() error {
		err := w.cs.CoreV1().Pods(ns).Delete(w.ctx, name, *metav1.NewDeleteOptions(0))
		if apierrors.IsNotFound(err) && w.retry {
			return nil
		}
		return err
	})
}

// storeEvents returns the committed changes of resource the store of
// member holds, from the first, up to rv.
func storeEvents(t *testing.T, c *cluster.Cluster, member int, resource string, rv uint64) []raftstore.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ch, err := c.Store(member).Watch(ctx, resource, 1)
	if err != nil {
		t.Fatal(err)
	}
	var out []raftstore.Event
	for ev := range ch {
		if ev.Object.RV > rv {
			break
		}
		out = append(out, ev)
		if ev.Object.RV == rv {
			return out
		}
	}
	t.Fatalf("the store's watch of %s ended before rv %d", resource, rv)
	return nil
}

// sameObject reports whether two JSON objects are equal as values.
func sameObject(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}

// checkSameAsStore compares the recorded store lines with the store's own
// committed changes: type, key, resourceVersion and object, in order.
func checkSameAsStore(t *testing.T, got []history.StoreEvent, want []raftstore.Event) {
	t.Helper()
	render := func(typ, ns, name, rv string) string { return fmt.Sprintf("%s %s/%s@%s", typ, ns, name, rv) }
	var g, w []string
	for _, e := range got {
		g = append(g, render(string(e.Type), e.Namespace, e.Name, e.RV))
	}
	for _, e := range want {
		w = append(w, render(string(e.Type), e.Object.Key.Namespace, e.Object.Key.Name, fmt.Sprint(e.Object.RV)))
	}
	if strings.Join(g, "\n") != strings.Join(w, "\n") {
		t.Fatalf("store lines:\n%s\nthe store's changes:\n%s", strings.Join(g, "\n"), strings.Join(w, "\n"))
	}
	for i := range got {
		if got[i].Resource != want[i].Object.Key.Resource {
			t.Errorf("line %d: resource %q, the store's %q", i, got[i].Resource, want[i].Object.Key.Resource)
		}
		if !sameObject(got[i].Object, want[i].Object.Data) {
			t.Errorf("line %d (%s): object\n%s\nthe store's\n%s", i, g[i], got[i].Object, want[i].Object.Data)
		}
	}
}

// faults breaks a client's watches on demand: it cuts its connections,
// holds its watch requests, and answers them 410 Gone.
type faults struct {
	mu      sync.Mutex
	conns   map[net.Conn]bool
	hold    chan struct{} // non-nil: watch requests wait until it is closed
	gone    int           // the next gone watch requests get 410
	stall   int           // the next stall watch requests get a stream that never says anything
	goneAs  string        // "event" (200 with an ERROR event) or "status" (HTTP 410)
	watches int           // watch requests that reached the server
}

// install wraps cfg's dialer and transport.
func (f *faults) install(cfg *rest.Config) {
	f.conns = map[net.Conn]bool{}
	dial := cfg.Dial
	cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err == nil {
			f.mu.Lock()
			f.conns[conn] = true
			f.mu.Unlock()
		}
		return conn, err
	}
	cfg.WrapTransport = func(next http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if req.URL.Query().Get("watch") != "true" {
				return next.RoundTrip(req)
			}
			f.mu.Lock()
			hold := f.hold
			f.mu.Unlock()
			if hold != nil {
				select {
				case <-hold:
				case <-req.Context().Done():
					return nil, req.Context().Err()
				}
			}
			f.mu.Lock()
			gone, as, stall := f.gone > 0, f.goneAs, f.gone == 0 && f.stall > 0
			switch {
			case gone:
				f.gone--
			case stall:
				f.stall--
			default:
				f.watches++
			}
			f.mu.Unlock()
			if gone {
				return goneResponse(req, as), nil
			}
			if stall {
				return stalledResponse(req), nil
			}
			return next.RoundTrip(req)
		})
	}
}

// cutAndHold holds new watch requests and cuts every connection.
func (f *faults) cutAndHold() {
	f.mu.Lock()
	f.hold = make(chan struct{})
	conns := f.conns
	f.conns = map[net.Conn]bool{}
	f.mu.Unlock()
	for c := range conns {
		c.Close()
	}
}

// release lets held watch requests go on, the next n answered Gone.
func (f *faults) release(gone int, as string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gone, f.goneAs = gone, as
	close(f.hold)
	f.hold = nil
}

type roundTripper func(*http.Request) (*http.Response, error)

func (r roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return r(req) }

// goneResponse answers a watch as kube-apiserver does when its
// resourceVersion was compacted: from the watch cache, a 200 whose stream
// holds one ERROR event; from etcd directly, an HTTP 410.
func goneResponse(req *http.Request, as string) *http.Response {
	status := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 5 (90)","reason":"Expired","code":410}`
	resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}}, Request: req,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}
	body := `{"type":"ERROR","object":` + status + "}\n"
	if as == "status" {
		resp.StatusCode, body = http.StatusGone, status
	}
	resp.Status = fmt.Sprintf("%d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	resp.Body = io.NopCloser(strings.NewReader(body))
	resp.ContentLength = int64(len(body))
	return resp
}

// stalledResponse is a watch whose connection died silently: headers, then
// nothing until the client gives up.
func stalledResponse(req *http.Request) *http.Response {
	pr, pw := io.Pipe()
	go func() {
		<-req.Context().Done()
		pw.CloseWithError(req.Context().Err())
	}()
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Header: http.Header{"Content-Type": {"application/json"}},
		Request: req, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Body: pr, ContentLength: -1}
}
