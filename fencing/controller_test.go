package fencing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

// trace is one ordered log of what the agents did and what the controller
// wrote through the fake clientset.
type trace struct {
	mu    sync.Mutex
	lines []string
}

func (tr *trace) add(format string, args ...any) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.lines = append(tr.lines, fmt.Sprintf(format, args...))
}

func (tr *trace) all() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.lines)
}

// count returns how many lines start with prefix.
func (tr *trace) count(prefix string) int {
	n := 0
	for _, l := range tr.all() {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// index returns the index of the first line starting with prefix, or -1.
func index(lines []string, prefix string) int {
	return slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, prefix) })
}

// traceAgent is an agent that logs to a trace and fails while fail says so.
type traceAgent struct {
	name string
	tr   *trace
	fail func() error
}

func (a *traceAgent) Name() string { return a.name }

func (a *traceAgent) Fence(_ context.Context, node string, token int64) error {
	if a.fail != nil {
		if err := a.fail(); err != nil {
			a.tr.add("agent %s failed %s %d", a.name, node, token)
			return err
		}
	}
	a.tr.add("agent %s fenced %s %d", a.name, node, token)
	return nil
}

func (a *traceAgent) Unfence(_ context.Context, node string) error {
	a.tr.add("agent %s unfenced %s", a.name, node)
	return nil
}

// fakeEnv is a controller on a fake clientset and a fake clock.
type fakeEnv struct {
	cs  *fake.Clientset
	clk *clocktesting.FakeClock
	tr  *trace
	ctl *Controller
}

// startFake runs a controller over objs: node n1 whose lease is an hour old
// and n2 whose lease is renewed in the future.
func startFake(t *testing.T, agents func(*trace) []Agent, objs ...runtime.Object) *fakeEnv {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	objs = append(objs,
		makeNode("n1").obj(), makeNode("n2").obj(),
		nodeLease("n1", t0.Add(-time.Hour)), nodeLease("n2", t0.Add(24*time.Hour)))
	env := &fakeEnv{cs: fake.NewClientset(objs...), clk: clk, tr: &trace{}}
	env.cs.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		switch a := a.(type) {
		case k8stesting.UpdateAction:
			m, _ := metaOf(a.GetObject())
			env.tr.add("update %s/%s %s", a.GetResource().Resource, a.GetSubresource(), m)
		case k8stesting.DeleteAction:
			env.tr.add("delete %s %s/%s", a.GetResource().Resource, a.GetNamespace(), a.GetName())
		}
		return false, nil, nil
	})
	ctl, err := New(Config{Client: env.cs, Clock: clk, Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)),
		Agents: agents(env.tr)})
	if err != nil {
		t.Fatal(err)
	}
	env.ctl = ctl
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := ctl.Run(ctx); err != nil {
			t.Error(err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return env
}

// metaOf names an object for the trace.
func metaOf(obj runtime.Object) (string, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return "?", nil
	}
	return m.GetName(), nil
}

// until steps the fake clock by a second at a time until cond holds.
func (e *fakeEnv) until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; trace:\n%s", what, strings.Join(e.tr.all(), "\n"))
		}
		e.clk.Step(time.Second)
		time.Sleep(5 * time.Millisecond)
	}
}

func (e *fakeEnv) node(t *testing.T, name string) *corev1.Node {
	t.Helper()
	n, err := e.cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func attachment(name, node string) *storagev1.VolumeAttachment {
	pv := "pv-" + name
	return &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: "podsafe.io/storage", NodeName: node,
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv}},
	}
}

func twoAgents(tr *trace) []Agent {
	return []Agent{&traceAgent{name: "power", tr: tr}, &traceAgent{name: "storage", tr: tr}}
}

// TestFenceBeforeForceDelete checks the order PS-14 demands on one trace:
// every agent confirms, then the condition is written, then the rest of the
// record, and only then is anything deleted.
func TestFenceBeforeForceDelete(t *testing.T) {
	env := startFake(t, twoAgents,
		makePod("web-0").node("n1").pet().obj(), makePod("plain").node("n1").obj(),
		makePod("db-0").node("n2").pet().obj(),
		attachment("va-1", "n1"), attachment("va-2", "n2"))
	env.until(t, "n1 clear", func() bool {
		return env.tr.count("delete pods") == 2 && env.tr.count("delete volumeattachments") == 1
	})
	lines := env.tr.all()
	power := index(lines, "agent power fenced n1 1")
	storage := index(lines, "agent storage fenced n1 1")
	status := index(lines, "update nodes/status n1")
	spec := index(lines, "update nodes/ n1")
	firstDelete := index(lines, "delete ")
	if power < 0 || !(power < storage && storage < status && status < spec && spec < firstDelete) {
		t.Errorf("order broken: power %d, storage %d, status %d, spec %d, first delete %d in\n%s",
			power, storage, status, spec, firstDelete, strings.Join(lines, "\n"))
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "delete ") && (strings.Contains(l, "db-0") || strings.Contains(l, "va-2")) {
			t.Errorf("touched node n2: %s", l)
		}
	}
	n1 := env.node(t, "n1")
	if c := nodeCondition(n1, FencedCondition); c == nil || c.Status != corev1.ConditionTrue || c.Reason != ReasonFenced ||
		c.Message != "fence token 1 confirmed by power,storage" {
		t.Errorf("condition = %+v", c)
	}
	if tok, ok := FenceToken(n1); !ok || tok != 1 || fencedTaint(n1) == nil || !n1.Spec.Unschedulable {
		t.Errorf("record incomplete: token %d %v, taints %v, unschedulable %v", tok, ok, n1.Spec.Taints, n1.Spec.Unschedulable)
	}
	if Fenced(env.node(t, "n2")) {
		t.Error("n2 fenced")
	}
}

// TestAgentFailureWritesNothing: while an agent fails, nothing is recorded
// and nothing deleted, and the fence is retried.
func TestAgentFailureWritesNothing(t *testing.T) {
	var mu sync.Mutex
	failing := true
	env := startFake(t, func(tr *trace) []Agent {
		return []Agent{&traceAgent{name: "power", tr: tr}, &traceAgent{name: "storage", tr: tr, fail: func() error {
			mu.Lock()
			defer mu.Unlock()
			if failing {
				return fmt.Errorf("storage server unreachable")
			}
			return nil
		}}}
	}, makePod("web-0").node("n1").pet().obj(), attachment("va-1", "n1"))
	env.until(t, "three failed attempts", func() bool { return env.tr.count("agent storage failed n1") >= 3 })
	for _, l := range env.tr.all() {
		if strings.HasPrefix(l, "update nodes") || strings.HasPrefix(l, "delete ") {
			t.Fatalf("wrote while the fence was unconfirmed: %s", l)
		}
	}
	if Fenced(env.node(t, "n1")) {
		t.Fatal("n1 fenced although an agent failed")
	}
	mu.Lock()
	failing = false
	mu.Unlock()
	env.until(t, "n1 fenced and clear", func() bool { return env.tr.count("delete pods") == 1 })
	tok, _ := FenceToken(env.node(t, "n1"))
	if want := int64(env.tr.count("agent storage failed n1") + 1); tok != want {
		t.Errorf("token %d, want %d: one fresh token per attempt", tok, want)
	}
}

// TestResumeAfterStatusOnly: a controller that crashed between writing the
// condition and the rest of the record completes the record from the
// condition's message, then clears the node, without calling any agent.
func TestResumeAfterStatusOnly(t *testing.T) {
	env := startFake(t, twoAgents, makePod("web-0").node("n3").pet().obj(),
		makeNode("n3").fenced(7, "power").obj(), nodeLease("n3", t0.Add(-time.Hour)))
	env.until(t, "n3 clear", func() bool {
		f := env.ctl.Fences()
		return len(f) == 1 && !f[0].PodsDeleted.IsZero()
	})
	n3 := env.node(t, "n3")
	if tok, ok := FenceToken(n3); !ok || tok != 7 || fencedTaint(n3) == nil || !n3.Spec.Unschedulable {
		t.Errorf("record not completed: token %d %v, taints %v, unschedulable %v", tok, ok, n3.Spec.Taints, n3.Spec.Unschedulable)
	}
	if n := env.tr.count("agent "); n != 0 {
		t.Errorf("agents called %d times for a node already fenced", n)
	}
	fences := env.ctl.Fences()
	if len(fences) != 1 || fences[0].Token != 7 || !fences[0].Detected.IsZero() || fences[0].PodsDeleted.IsZero() ||
		!slices.Equal(fences[0].Agents, []string{"power"}) || !slices.Equal(fences[0].Pods, []string{"default/web-0"}) {
		t.Errorf("Fences = %+v", fences)
	}
}

// testWriter sends log lines to t.Log until the test ends.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestRecordRestored: a fenced node whose taint and cordon someone removed
// (only the condition is guarded by the API) gets them back.
func TestRecordRestored(t *testing.T) {
	env := startFake(t, twoAgents, makePod("web-0").node("n1").pet().obj())
	env.until(t, "n1 fenced and clear", func() bool {
		f := env.ctl.Fences()
		return len(f) == 1 && !f[0].PodsDeleted.IsZero()
	})
	n := env.node(t, "n1")
	n.Spec.Taints = nil
	n.Spec.Unschedulable = false
	if _, err := env.cs.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.until(t, "taint and cordon restored", func() bool {
		n := env.node(t, "n1")
		return fencedTaint(n) != nil && n.Spec.Unschedulable
	})
	if got := env.tr.count("agent "); got != 2 {
		t.Errorf("%d agent calls, want the 2 of the one fence", got)
	}
}

// TestCacheClear: a node is clear only when the caches hold neither a pod
// bound to it nor an attachment to it; other nodes' pods and attachments do
// not count.
func TestCacheClear(t *testing.T) {
	ctl, err := New(Config{Client: fake.NewClientset(), Clock: clocktesting.NewFakeClock(t0),
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)), Agents: twoAgents(&trace{})})
	if err != nil {
		t.Fatal(err)
	}
	vas := ctl.factory.Storage().V1().VolumeAttachments().Informer().GetIndexer()
	check := func(when string, want bool) {
		t.Helper()
		if got := ctl.cacheClear("n1"); got != want {
			t.Errorf("%s: cacheClear(n1) = %v, want %v", when, got, want)
		}
	}
	check("empty caches", true)
	if err := ctl.pods.Add(makePod("web-0").node("n2").obj()); err != nil {
		t.Fatal(err)
	}
	if err := vas.Add(attachment("va-n2", "n2")); err != nil {
		t.Fatal(err)
	}
	check("only n2's pod and attachment", true)
	if err := ctl.pods.Add(makePod("web-1").node("n1").obj()); err != nil {
		t.Fatal(err)
	}
	check("a pod on n1", false)
	if err := ctl.pods.Delete(makePod("web-1").node("n1").obj()); err != nil {
		t.Fatal(err)
	}
	if err := vas.Add(attachment("va-n1", "n1")); err != nil {
		t.Fatal(err)
	}
	check("an attachment to n1", false)
}

// TestBreakAttachmentsGoesOnAfterConflict: an attachment replaced under the
// controller (409) leaves the node not clear and is not reported broken;
// the node's other attachments are still deleted in the same pass.
func TestBreakAttachmentsGoesOnAfterConflict(t *testing.T) {
	cs := fake.NewClientset(attachment("va-a", "n1"), attachment("va-b", "n1"), attachment("va-c", "n2"))
	conflicted := ""
	cs.PrependReactor("delete", "volumeattachments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if conflicted != "" {
			return false, nil, nil
		}
		conflicted = a.(k8stesting.DeleteAction).GetName()
		return true, nil, apierrors.NewConflict(storagev1.Resource("volumeattachments"), conflicted, errors.New("uid precondition failed"))
	})
	var logs strings.Builder
	ctl, err := New(Config{Client: cs, Clock: clocktesting.NewFakeClock(t0),
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), Agents: twoAgents(&trace{})})
	if err != nil {
		t.Fatal(err)
	}
	err = ctl.breakAttachments(context.Background(), confirmedFence{node: makeNode("n1").obj()})
	if !errors.Is(err, errNotClear) {
		t.Errorf("breakAttachments = %v, want errNotClear", err)
	}
	list, err := cs.StorageV1().VolumeAttachments().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, va := range list.Items {
		left = append(left, va.Name)
	}
	slices.Sort(left)
	if want := []string{conflicted, "va-c"}; !slices.Equal(left, want) {
		t.Errorf("attachments left %v, want %v", left, want)
	}
	if n := strings.Count(logs.String(), "volume attachment broken"); n != 1 || strings.Contains(logs.String(), "attachment="+conflicted) {
		t.Errorf("%d attachments logged broken, want 1, not %s:\n%s", n, conflicted, logs.String())
	}
}
