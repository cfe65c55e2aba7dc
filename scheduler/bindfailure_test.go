package scheduler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/scheduler/st"
)

// bindPath matches the scheduler's binding requests.
var bindPath = regexp.MustCompile(`^/api/v1/namespaces/([^/]+)/pods/([^/]+)/binding$`)

// statusPath matches the scheduler's status patches.
var statusPath = regexp.MustCompile(`^/api/v1/namespaces/([^/]+)/pods/([^/]+)/status$`)

// bindFault is how one binding attempt fails.
type bindFault int

const (
	// faultNotFound answers 404, as a store read that lags behind the
	// scheduler's informer does for a pod that exists.
	faultNotFound bindFault = iota
	// faultConflict answers 409, as a stale view of the pod does.
	faultConflict
	// faultLostAnswer lets the binding through to the API server, which
	// binds the pod, and fails the call as a timeout would: the scheduler
	// cannot tell whether it landed. Its informer is held back until its
	// next status patch of the pod, so it handles the failure on a view
	// from before the binding, the worst case.
	faultLostAnswer
)

// bindFaults is a round-tripper on the scheduler's client that fails the
// first attempts at binding every pod, one fault per attempt, in plan
// order; everything else, and later attempts, reach the real API server.
type bindFaults struct {
	plan []bindFault
	// held gates the scheduler's pod watch (see faultLostAnswer).
	held *gate

	mu       sync.Mutex
	attempts map[string]int // pod name -> binding requests seen
	failed   map[string]int // pod name -> binding requests failed here or by the server
	// conflicts counts status patches the API server refused with 409.
	conflicts map[string]int
}

func newBindFaults(plan ...bindFault) *bindFaults {
	return &bindFaults{plan: plan, held: newGate(), attempts: map[string]int{}, failed: map[string]int{}, conflicts: map[string]int{}}
}

func (f *bindFaults) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method == http.MethodGet && req.URL.Path == "/api/v1/pods" && req.URL.Query().Get("watch") != "" {
			resp, err := rt.RoundTrip(req)
			if err == nil {
				resp.Body = &gatedBody{ReadCloser: resp.Body, g: f.held}
			}
			return resp, err
		}
		if m := statusPath.FindStringSubmatch(req.URL.Path); req.Method == http.MethodPatch && m != nil {
			resp, err := rt.RoundTrip(req)
			if err == nil && resp.StatusCode == http.StatusConflict {
				f.mu.Lock()
				f.conflicts[m[2]]++
				f.mu.Unlock()
			}
			f.held.release(m[2])
			return resp, err
		}
		m := bindPath.FindStringSubmatch(req.URL.Path)
		if req.Method != http.MethodPost || m == nil {
			return rt.RoundTrip(req)
		}
		name := m[2]
		f.mu.Lock()
		n := f.attempts[name]
		f.attempts[name]++
		f.mu.Unlock()
		fail := func() {
			f.mu.Lock()
			f.failed[name]++
			f.mu.Unlock()
		}
		if n >= len(f.plan) {
			resp, err := rt.RoundTrip(req)
			if err != nil || resp.StatusCode >= 300 {
				fail()
			}
			return resp, err
		}
		fail()
		switch f.plan[n] {
		case faultNotFound:
			return statusResponse(req, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("pods %q not found", name)), nil
		case faultConflict:
			return statusResponse(req, http.StatusConflict, metav1.StatusReasonConflict,
				fmt.Sprintf("Operation cannot be fulfilled on pods/binding %q: the object has been modified; please apply your changes to the latest version and try again", name)), nil
		default:
			f.held.hold(name)
			resp, err := rt.RoundTrip(req)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			return nil, fmt.Errorf("injected: the answer to binding pod %s was lost", name)
		}
	})
}

func (f *bindFaults) counts(name string) (attempts, failed, conflicts int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.attempts[name], f.failed[name], f.conflicts[name]
}

// gate holds back readers while any pod is held. A hold that is never
// released lifts by itself after a while, so a broken scheduler fails the
// test's assertions instead of hanging it.
type gate struct {
	mu    sync.Mutex
	cond  *sync.Cond
	holds map[string]bool
}

func newGate() *gate {
	g := &gate{holds: map[string]bool{}}
	g.cond = sync.NewCond(&g.mu)
	return g
}

func (g *gate) hold(name string) {
	g.mu.Lock()
	g.holds[name] = true
	g.mu.Unlock()
	time.AfterFunc(10*time.Second, func() { g.release(name) })
}

func (g *gate) release(name string) {
	g.mu.Lock()
	delete(g.holds, name)
	g.mu.Unlock()
	g.cond.Broadcast()
}

func (g *gate) wait() {
	g.mu.Lock()
	for len(g.holds) > 0 {
		g.cond.Wait()
	}
	g.mu.Unlock()
}

// gatedBody hands a watch stream's bytes on only while the gate is open.
type gatedBody struct {
	io.ReadCloser
	g *gate
}

func (b *gatedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.g.wait()
	return n, err
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// statusResponse is an API error as the API server writes it.
func statusResponse(req *http.Request, code int, reason metav1.StatusReason, msg string) *http.Response {
	body, _ := json.Marshal(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Message: msg, Reason: reason, Code: int32(code)})
	return &http.Response{StatusCode: code, Status: http.StatusText(code), Request: req,
		Header: http.Header{"Content-Type": []string{"application/json"}}, Body: io.NopCloser(bytes.NewReader(body))}
}

// podSeen is what the test's own informer saw of one pod over its life.
type podSeen struct {
	bound string
	// failedConditions are the distinct reason: message pairs of
	// PodScheduled=False the pod carried while unbound.
	failedConditions map[string]bool
	// falseWhileBound counts versions that were bound yet said
	// PodScheduled=False: a status patch landed on a bound pod.
	falseWhileBound int
}

type podWatch struct {
	mu   sync.Mutex
	pods map[string]*podSeen
}

func (w *podWatch) observe(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.pods[pod.Name]
	if s == nil {
		s = &podSeen{failedConditions: map[string]bool{}}
		w.pods[pod.Name] = s
	}
	for _, c := range pod.Status.Conditions {
		if c.Type != corev1.PodScheduled || c.Status != corev1.ConditionFalse {
			continue
		}
		if pod.Spec.NodeName != "" {
			s.falseWhileBound++
		} else {
			s.failedConditions[c.Reason+": "+c.Message] = true
		}
	}
	if pod.Spec.NodeName != "" {
		s.bound = pod.Spec.NodeName
	}
}

func (w *podWatch) seen(name string) podSeen {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s := w.pods[name]; s != nil {
		return *s
	}
	return podSeen{}
}

// TestBindFailuresRequeue: the scheduler's bindings fail for the first
// attempts of every pod, answered 404 and 409 by a stand-in for a lagging
// store and then lost after the API server bound the pod (with the
// scheduler's informer held back until it has written the failure), while
// the API server itself stays real. No pod is dropped: each one is retried
// after back-off until it is bound, carries PodScheduled=False with reason
// SchedulerError and the bind error while it waits, gets one Warning Event
// FailedScheduling per failed attempt at most, and no PodScheduled=False
// ever lands on a pod already bound (the binding whose answer was lost):
// the scheduler's status patch, computed from the older view, is refused.
func TestBindFailuresRequeue(t *testing.T) {
	faults := newBindFaults(faultNotFound, faultConflict, faultLostAnswer)
	c := cluster.StartForTest(t, cluster.Config{
		Topology:  cluster.DefaultTopology(1, 3, 1),
		Scheduler: true,
		// Back-off runs on the cluster's scaled clock: 1 s, 2 s and 4 s
		// of it take milliseconds.
		TimeScale: 20,
		WrapTransport: func(identity string) func(http.RoundTripper) http.RoundTripper {
			if identity != apiserver.IdentityScheduler {
				return nil
			}
			return faults.wrap
		},
		Logger: slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	cs, err := c.Clientset(apiserver.IdentityAdmin, cluster.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watch := &podWatch{pods: map[string]*podSeen{}}
	observePods(t, cs, watch.observe)

	var names []string
	for i := range 6 {
		pod := st.MakePod().Name(fmt.Sprintf("k%d", i)).Req("100m", "").Obj()
		pod.UID = ""
		if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		names = append(names, pod.Name)
	}

	// Every pod ends bound; the polling is bounded only to end a broken
	// run, not to time the scheduler.
	for _, name := range names {
		waitFor(t, fmt.Sprintf("pod %s bound", name), func() bool { return watch.seen(name).bound != "" })
	}
	for _, name := range names {
		seen := watch.seen(name)
		attempts, failed, conflicts := faults.counts(name)
		if attempts < len(faults.plan) {
			t.Errorf("pod %s: %d binding attempts, want at least %d (every injected fault)", name, attempts, len(faults.plan))
		}
		if conflicts == 0 {
			t.Errorf("pod %s: no status patch was refused: the scheduler never wrote from a view older than its binding, the case the test must cover", name)
		}
		if seen.falseWhileBound > 0 {
			t.Errorf("pod %s: %d bound versions said PodScheduled=False", name, seen.falseWhileBound)
		}
		var reasons []string
		for rm := range seen.failedConditions {
			reasons = append(reasons, rm)
		}
		sort.Strings(reasons)
		for _, want := range []string{`pods "` + name + `" not found`, "the object has been modified"} {
			if !anyHas(reasons, corev1.PodReasonSchedulerError+": binding pod default/"+name, want) {
				t.Errorf("pod %s: PodScheduled=False conditions %q, want one of reason SchedulerError naming the bind error %q", name, reasons, want)
			}
		}
		evs, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name + ",reason=FailedScheduling"})
		if err != nil {
			t.Fatal(err)
		}
		var msgs []string
		for _, e := range evs.Items {
			if e.Type != corev1.EventTypeWarning {
				t.Errorf("pod %s: FailedScheduling event of type %s, want Warning", name, e.Type)
			}
			msgs = append(msgs, e.Message)
		}
		// The first two attempts failed with the pod surely pending; later
		// ones only while the informer had not shown the binding yet.
		if len(msgs) < 2 || len(msgs) > failed {
			t.Errorf("pod %s: %d FailedScheduling events %q for %d failed attempts, want 2..%d", name, len(msgs), msgs, failed, failed)
		}
		for _, want := range []string{"not found", "the object has been modified"} {
			if !anyHas(msgs, "binding pod default/"+name, want) {
				t.Errorf("pod %s: FailedScheduling events %q, want one naming %q", name, msgs, want)
			}
		}
	}
}

// anyHas reports whether some string has the prefix and contains sub.
func anyHas(list []string, prefix, sub string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) && strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// waitFor polls cond until it holds; the bound is generous and only ends a
// run that is broken.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < 6000; i++ {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("gave up waiting for %s", what)
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// observePods runs a pod informer over the default namespace that hands
// every added and updated pod to observe, until the test ends; it returns
// once the informer has synced.
func observePods(t *testing.T, cs kubernetes.Interface, observe func(any)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("default"))
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj) },
	}); err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	factory.WaitForCacheSync(ctx.Done())
}
