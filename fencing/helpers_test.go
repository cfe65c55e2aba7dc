package fencing_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/fencing"
)

// timeScale runs the cluster clock 100 times faster than wall time: the
// 20 s threshold takes 0.2 s.
const timeScale = 100

// waitTimeout bounds every wait; generous, since -race on two cores is slow.
const waitTimeout = 60 * time.Second

// env is an in-process cluster without kubelets: the test plays the nodes,
// writing their leases as admin, and the agents are recording fakes.
type env struct {
	c     *cluster.Cluster
	admin kubernetes.Interface
	calls *callLog
	// audit logs what the fencing identity's clients sent, in order.
	audit *auditLog
}

func newEnv(t *testing.T, nodes int) *env {
	t.Helper()
	c := cluster.StartForTest(t, cluster.Config{Topology: cluster.DefaultTopology(1, nodes, 1), TimeScale: timeScale})
	admin, err := c.Clientset(apiserver.IdentityAdmin, cluster.ClientOptions{Host: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	return &env{c: c, admin: admin, calls: &callLog{}, audit: &auditLog{}}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// lease writes node's heart-beat lease with the given renewal time.
func (e *env) lease(t *testing.T, node string, renew time.Time) {
	t.Helper()
	ctx := ctxT(t)
	leases := e.admin.CoordinationV1().Leases(fencing.NodeLeaseNamespace)
	rt := metav1.NewMicroTime(renew)
	l, err := leases.Get(ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: fencing.NodeLeaseNamespace, Name: node},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(node), RenewTime: &rt},
		}, metav1.CreateOptions{})
	} else if err == nil {
		l.Spec.RenewTime = &rt
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatalf("writing lease of %s: %v", node, err)
	}
}

// stale makes node's lease an hour old; healthy renews it a day ahead, so
// it stays fresh for the whole test however slow the test runs.
func (e *env) stale(t *testing.T, node string) { e.lease(t, node, e.c.Clock().Now().Add(-time.Hour)) }

func (e *env) healthy(t *testing.T, node string) {
	e.lease(t, node, e.c.Clock().Now().Add(24*time.Hour))
}

type podOpt func(*corev1.Pod)

func pet(set string) podOpt {
	return func(p *corev1.Pod) {
		p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet",
			Name: set, UID: types.UID("uid-" + set), Controller: ptr.To(true)})
	}
}

func annotated(k, v string) podOpt {
	return func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[k] = v
	}
}

// pod creates a pod bound to node, as admin (only admin may create bound
// pods).
func (e *env) pod(t *testing.T, name, node string, opts ...podOpt) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.PodSpec{NodeName: node, RestartPolicy: corev1.RestartPolicyAlways,
			Containers: []corev1.Container{{Name: "app", Image: "app"}}},
	}
	for _, o := range opts {
		o(p)
	}
	created, err := e.admin.CoreV1().Pods("default").Create(ctxT(t), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating pod %s: %v", name, err)
	}
	return created
}

// attachment creates a VolumeAttachment of a volume to node, as admin.
func (e *env) attachment(t *testing.T, name, node string) {
	t.Helper()
	pv := "pv-" + name
	_, err := e.admin.StorageV1().VolumeAttachments().Create(ctxT(t), &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: "podsafe.io/storage", NodeName: node,
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating volume attachment %s: %v", name, err)
	}
}

func (e *env) node(t *testing.T, name string) *corev1.Node {
	t.Helper()
	n, err := e.admin.CoreV1().Nodes().Get(ctxT(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading node %s: %v", name, err)
	}
	return n
}

// podExists reports whether pod namespace default/name exists.
func (e *env) podExists(t *testing.T, name string) bool {
	t.Helper()
	_, err := e.admin.CoreV1().Pods("default").Get(ctxT(t), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatalf("reading pod %s: %v", name, err)
	}
	return true
}

func (e *env) attachmentExists(t *testing.T, name string) bool {
	t.Helper()
	_, err := e.admin.StorageV1().VolumeAttachments().Get(ctxT(t), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatalf("reading volume attachment %s: %v", name, err)
	}
	return true
}

// events lists the core/v1 Events of reason about object name in ns,
// waiting a while for one: the recorder writes them asynchronously.
func (e *env) events(t *testing.T, ns, name, reason string) []corev1.Event {
	t.Helper()
	sel := fields.Set{"involvedObject.name": name, "reason": reason}.AsSelector().String()
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		l, err := e.admin.CoreV1().Events(ns).List(ctxT(t), metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			t.Fatalf("listing events: %v", err)
		}
		if len(l.Items) > 0 || time.Now().After(deadline) {
			return l.Items
		}
	}
}

// fenced reports whether node carries FencedCondition True.
func (e *env) fenced(t *testing.T, node string) bool { return fencing.Fenced(e.node(t, node)) }

// agents returns a power and a storage agent logging to e.calls.
func (e *env) agents() []fencing.Agent {
	return []fencing.Agent{&agent{name: "power", log: e.calls}, &agent{name: "storage", log: e.calls}}
}

// controllerOpts tune one controller run.
type controllerOpts struct {
	cfg fencing.Config
	// block, if set, makes the fencing client fail requests it matches
	// (a crash point).
	block func(*http.Request) bool
}

// running is a controller run; stop cancels it and waits for Run to return.
type running struct {
	ctl  *fencing.Controller
	stop func()
}

// start runs a fencing controller as the fencing identity on the cluster
// clock; cfg.Agents defaults to e.agents().
func (e *env) start(t *testing.T, o controllerOpts) *running {
	t.Helper()
	rc := e.c.RESTConfig(apiserver.IdentityFencingController, cluster.ClientOptions{Host: cluster.ControllerHost})
	rc.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return &auditTransport{log: e.audit, block: o.block, next: rt}
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := o.cfg
	cfg.Client = cs
	cfg.Clock = e.c.Clock()
	cfg.Logger = testLogger(t)
	if cfg.Agents == nil {
		cfg.Agents = e.agents()
	}
	ctl, err := fencing.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := ctl.Run(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("fencing controller: %v", err)
		}
	}()
	var once sync.Once
	r := &running{ctl: ctl, stop: func() { once.Do(func() { cancel(); <-done }) }}
	t.Cleanup(r.stop)
	return r
}

// wait polls cond until it holds, failing the test after waitTimeout.
func wait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// call is one agent call.
type call struct {
	Agent, Op, Node string
	Token           int64
	Err             bool
}

func (c call) String() string {
	s := fmt.Sprintf("%s %s %s", c.Agent, c.Op, c.Node)
	if c.Op == "fence" {
		s += fmt.Sprintf(" %d", c.Token)
	}
	if c.Err {
		s += " failed"
	}
	return s
}

// callLog is every agent's calls, in order.
type callLog struct {
	mu    sync.Mutex
	calls []call
}

func (l *callLog) add(c call) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, c)
}

func (l *callLog) all() []call {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

func (l *callLog) strings() []string {
	var out []string
	for _, c := range l.all() {
		out = append(out, c.String())
	}
	return out
}

// agent is a recording fake agent. fail, if set, decides each Fence's
// outcome; check runs inside each Fence call before it returns.
type agent struct {
	name  string
	log   *callLog
	fail  func(node string, token int64) error
	check func(node string, token int64)
}

func (a *agent) Name() string { return a.name }

func (a *agent) Fence(ctx context.Context, node string, token int64) error {
	if a.check != nil {
		a.check(node, token)
	}
	var err error
	if a.fail != nil {
		err = a.fail(node, token)
	}
	a.log.add(call{Agent: a.name, Op: "fence", Node: node, Token: token, Err: err != nil})
	return err
}

func (a *agent) Unfence(ctx context.Context, node string) error {
	a.log.add(call{Agent: a.name, Op: "unfence", Node: node})
	return nil
}

// auditLog records the fencing identity's requests in order: a DELETE when
// it is sent, a node status write when its success comes back.
type auditLog struct {
	mu      sync.Mutex
	entries []string
}

func (a *auditLog) add(s string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.entries = append(a.entries, s)
}

func (a *auditLog) all() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.entries)
}

// errBlocked is what a blocked request fails with.
var errBlocked = errors.New("blocked by the test")

type auditTransport struct {
	log   *auditLog
	block func(*http.Request) bool
	next  http.RoundTripper
}

func (at *auditTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	path := req.URL.Path
	if req.Method == http.MethodDelete {
		if at.block != nil && at.block(req) {
			at.log.add("blocked DELETE " + path)
			return nil, errBlocked
		}
		at.log.add("DELETE " + path)
	}
	resp, err := at.next.RoundTrip(req)
	if err == nil && req.Method == http.MethodPut && strings.HasSuffix(path, "/status") &&
		strings.HasPrefix(path, "/api/v1/nodes/") && resp.StatusCode/100 == 2 {
		at.log.add("PUT " + path)
	}
	return resp, err
}

// checkRecordedBeforeDeletes fails the test unless the first DELETE the
// fencing identity sent for something of node came after a successful
// status write of node: nothing is force deleted before the fence is
// recorded.
func checkRecordedBeforeDeletes(t *testing.T, a *auditLog, node string, objects ...string) {
	t.Helper()
	entries := a.all()
	status := slices.Index(entries, "PUT /api/v1/nodes/"+node+"/status")
	for i, e := range entries {
		if !strings.Contains(e, "DELETE ") {
			continue
		}
		for _, o := range objects {
			if strings.HasSuffix(e, "/"+o) && (status < 0 || i < status) {
				t.Errorf("%q sent before the fence of %s was recorded (audit %q)", e, node, entries)
			}
		}
	}
}

// testLogger logs to t until the test ends.
func testLogger(t *testing.T) *slog.Logger {
	w := &testLogWriter{t: t}
	t.Cleanup(func() { w.done.Store(true) })
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testLogWriter struct {
	t    *testing.T
	done atomic.Bool
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	if !w.done.Load() {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// errStorageDown is the failure of a storage agent that cannot reach its
// storage server.
var errStorageDown = errors.New("storage server unreachable")
