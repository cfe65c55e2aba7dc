package fencing_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/fencing"
)

// The fencing package cannot import the API server; its copy of the
// condition type must match.
func TestFencedConditionMatchesAPIServer(t *testing.T) {
	if fencing.FencedCondition != apiserver.FencedCondition {
		t.Fatalf("fencing.FencedCondition %q != apiserver.FencedCondition %q", fencing.FencedCondition, apiserver.FencedCondition)
	}
	if fencing.TaintFenced != apiserver.FencedTaint || fencing.AnnotationFenceToken != apiserver.FenceTokenAnnotation {
		t.Fatalf("fence record names differ: taint %q vs %q, annotation %q vs %q",
			fencing.TaintFenced, apiserver.FencedTaint, fencing.AnnotationFenceToken, apiserver.FenceTokenAnnotation)
	}
}

// (a) A node whose lease went stale with a pet on it is fenced: both agents
// in order with token 1, the fence recorded, then its pods force deleted and
// its volume attachments broken; the other node is untouched.
func TestFencesStaleNodeWithPet(t *testing.T) {
	e := newEnv(t, 2)
	e.stale(t, "node-0")
	e.healthy(t, "node-1")
	e.pod(t, "web-0", "node-0", pet("web"))
	e.pod(t, "plain", "node-0")
	e.pod(t, "db-0", "node-1", pet("db"))
	e.attachment(t, "va-0", "node-0")
	e.attachment(t, "va-1", "node-1")
	r := e.start(t, controllerOpts{})

	wait(t, "node-0 fenced and clear", func() bool {
		f := r.ctl.Fences()
		return len(f) == 1 && !f[0].PodsDeleted.IsZero()
	})
	if e.podExists(t, "web-0") || e.podExists(t, "plain") || e.attachmentExists(t, "va-0") {
		t.Error("node-0 still has pods or attachments after PodsDeleted")
	}
	if diff := cmp.Diff([]string{"power fence node-0 1", "storage fence node-0 1"}, e.calls.strings()); diff != "" {
		t.Errorf("agent calls (-want +got):\n%s", diff)
	}
	n := e.node(t, "node-0")
	c := condition(n, fencing.FencedCondition)
	if c == nil || c.Status != corev1.ConditionTrue || c.Reason != fencing.ReasonFenced ||
		c.Message != "fence token 1 confirmed by power,storage" || c.LastTransitionTime.IsZero() {
		t.Errorf("node-0 condition = %+v", c)
	}
	if tok, ok := fencing.FenceToken(n); !ok || tok != 1 {
		t.Errorf("node-0 fence token = %d, %v; want 1", tok, ok)
	}
	if !hasTaint(n, fencing.TaintFenced, corev1.TaintEffectNoExecute) || !n.Spec.Unschedulable {
		t.Errorf("node-0 not tainted and cordoned: taints %v, unschedulable %v", n.Spec.Taints, n.Spec.Unschedulable)
	}
	checkRecordedBeforeDeletes(t, e.audit, "node-0", "web-0", "plain", "va-0")

	if e.fenced(t, "node-1") || !e.podExists(t, "db-0") || !e.attachmentExists(t, "va-1") {
		t.Error("node-1 was touched")
	}
	if got := len(e.events(t, "default", "node-0", fencing.EventFenced)); got != 1 {
		t.Errorf("%d Fenced events on node-0, want 1", got)
	}
	for _, p := range []string{"web-0", "plain"} {
		if got := len(e.events(t, "default", p, fencing.EventForceDeleted)); got != 1 {
			t.Errorf("%d %s events on pod %s, want 1", got, fencing.EventForceDeleted, p)
		}
	}
	if got := len(e.events(t, "default", "node-0", fencing.EventAttachmentBroken)); got != 1 {
		t.Errorf("%d %s events on node-0, want 1", got, fencing.EventAttachmentBroken)
	}

	f := r.ctl.Fences()[0]
	slices.Sort(f.Pods)
	if f.Node != "node-0" || f.Token != 1 || !slices.Equal(f.Agents, []string{"power", "storage"}) ||
		!slices.Equal(f.Pods, []string{"default/plain", "default/web-0"}) {
		t.Errorf("fence record = %+v", f)
	}
	if f.Detected.IsZero() || f.Confirmed.Before(f.Detected) || f.PodsDeleted.Before(f.Confirmed) {
		t.Errorf("fence times out of order: detected %v, confirmed %v, pods deleted %v", f.Detected, f.Confirmed, f.PodsDeleted)
	}
}

// (b) While an agent fails nothing is recorded or deleted, and the fence is
// retried, each attempt with a fresh token, until it is confirmed.
func TestAgentFailureRetried(t *testing.T) {
	e := newEnv(t, 2)
	e.stale(t, "node-0")
	e.healthy(t, "node-1")
	e.pod(t, "web-0", "node-0", pet("web"))
	e.attachment(t, "va-0", "node-0")
	var failing atomic.Bool
	failing.Store(true)
	storage := &agent{name: "storage", log: e.calls,
		fail: func(string, int64) error {
			if failing.Load() {
				return errStorageDown
			}
			return nil
		},
		// Each attempt starts from an unrecorded fence and intact pods. This
		// runs on the controller's goroutine: report, never FailNow.
		check: func(node string, token int64) {
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			n, err := e.admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil || fencing.Fenced(n) {
				t.Errorf("attempt with token %d: node %s already recorded as fenced (or unreadable: %v)", token, node, err)
			}
			_, podErr := e.admin.CoreV1().Pods("default").Get(ctx, "web-0", metav1.GetOptions{})
			_, vaErr := e.admin.StorageV1().VolumeAttachments().Get(ctx, "va-0", metav1.GetOptions{})
			if podErr != nil || vaErr != nil {
				t.Errorf("attempt with token %d: web-0 or va-0 gone before the fence was confirmed: %v, %v", token, podErr, vaErr)
			}
		},
	}
	r := e.start(t, controllerOpts{cfg: fencing.Config{Agents: []fencing.Agent{&agent{name: "power", log: e.calls}, storage}}})

	wait(t, "three failed attempts", func() bool { return count(e.calls.all(), "storage", "fence", true) >= 3 })
	if e.fenced(t, "node-0") || !e.podExists(t, "web-0") || !e.attachmentExists(t, "va-0") {
		t.Fatal("fence recorded or pods deleted while an agent fails")
	}
	for _, a := range e.audit.all() {
		if strings.Contains(a, "DELETE") {
			t.Fatalf("fencing identity deleted while an agent fails: %s", a)
		}
	}
	if got := len(e.events(t, "default", "node-0", fencing.EventFenceFailed)); got != 1 {
		t.Errorf("%d FenceFailed events, want 1 per episode", got)
	}

	failing.Store(false)
	wait(t, "node-0 fenced and clear", func() bool {
		f := r.ctl.Fences()
		return len(f) == 1 && !f[0].PodsDeleted.IsZero()
	})
	var tokens []int64
	for _, c := range e.calls.all() {
		if c.Agent == "power" {
			tokens = append(tokens, c.Token)
		}
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Errorf("attempt tokens not strictly increasing: %v", tokens)
		}
	}
	if tok, _ := fencing.FenceToken(e.node(t, "node-0")); tok != tokens[len(tokens)-1] {
		t.Errorf("recorded token %d, want the last attempt's %d", tok, tokens[len(tokens)-1])
	}
	checkRecordedBeforeDeletes(t, e.audit, "node-0", "web-0", "va-0")
}

// (c) With a budget of 1 and two stale nodes, one is fenced and the other
// waits until an admin unfences the first.
func TestBudget(t *testing.T) {
	e := newEnv(t, 2)
	for _, n := range []string{"node-0", "node-1"} {
		e.stale(t, n)
	}
	e.pod(t, "a-0", "node-0", pet("a"))
	e.pod(t, "b-0", "node-1", pet("b"))
	r := e.start(t, controllerOpts{})

	wait(t, "one node fenced and the other deferred", func() bool {
		f := r.ctl.Fences()
		if len(f) != 1 || f[0].PodsDeleted.IsZero() {
			return false
		}
		other := map[string]string{"node-0": "node-1", "node-1": "node-0"}[f[0].Node]
		return len(e.events(t, "default", other, fencing.EventFenceDeferred)) > 0
	})
	first := r.ctl.Fences()[0].Node
	second, secondPod := "node-1", "b-0"
	if first == "node-1" {
		second, secondPod = "node-0", "a-0"
	}
	if e.fenced(t, second) || !e.podExists(t, secondPod) {
		t.Fatalf("%s fenced beyond the budget", second)
	}
	if diff := cmp.Diff([]string{"power fence " + first + " 1", "storage fence " + first + " 1"}, e.calls.strings()); diff != "" {
		t.Errorf("agent calls (-want +got):\n%s", diff)
	}

	if err := fencing.Unfence(ctxT(t), e.admin, e.agents(), first); err != nil {
		t.Fatal(err)
	}
	wait(t, second+" fenced and clear", func() bool {
		f := r.ctl.Fences()
		return len(f) == 2 && !f[1].PodsDeleted.IsZero()
	})
	if f := r.ctl.Fences()[1]; f.Node != second || f.Token != 2 {
		t.Errorf("second fence = %+v, want %s with token 2", f, second)
	}
	n := e.node(t, first)
	if c := condition(n, fencing.FencedCondition); c == nil || c.Status != corev1.ConditionFalse || c.Reason != fencing.ReasonUnfenced {
		t.Errorf("%s condition after unfence = %+v", first, c)
	}
	if _, ok := fencing.FenceToken(n); ok || hasTaint(n, fencing.TaintFenced, corev1.TaintEffectNoExecute) || n.Spec.Unschedulable {
		t.Errorf("%s keeps fence marks after unfence: annotations %v, taints %v, unschedulable %v",
			first, n.Annotations, n.Spec.Taints, n.Spec.Unschedulable)
	}
	// The unfenced node is still stale but now empty: it is not fenced again.
	wait(t, first+" judged not worth fencing", func() bool {
		return len(e.events(t, "default", first, fencing.EventFenceNotNeeded)) > 0
	})
	want := []string{
		"power fence " + first + " 1", "storage fence " + first + " 1",
		"storage unfence " + first, "power unfence " + first,
		"power fence " + second + " 2", "storage fence " + second + " 2",
	}
	if diff := cmp.Diff(want, e.calls.strings()); diff != "" {
		t.Errorf("agent calls (-want +got):\n%s", diff)
	}
}

// (d) A stale node with only pods that do not justify fencing is left
// alone; an admin's fence request fences it anyway, and fences a node whose
// lease is fresh, even an empty one.
func TestPolicyAndFenceRequest(t *testing.T) {
	e := newEnv(t, 2)
	e.stale(t, "node-0")
	e.healthy(t, "node-1")
	e.pod(t, "plain", "node-0")
	e.pod(t, "opted-out-0", "node-0", pet("opted-out"), annotated(fencing.AnnotationFencing, "false"))
	r := e.start(t, controllerOpts{cfg: fencing.Config{Budget: 2}})

	wait(t, "node-0 judged not worth fencing", func() bool {
		return len(e.events(t, "default", "node-0", fencing.EventFenceNotNeeded)) > 0
	})
	if e.fenced(t, "node-0") || len(e.calls.all()) != 0 || !e.podExists(t, "plain") || !e.podExists(t, "opted-out-0") {
		t.Fatalf("node-0 fenced without a pet: calls %v", e.calls.strings())
	}

	request(t, e, "node-0")
	wait(t, "node-0 fenced on request and clear", func() bool {
		f := r.ctl.Fences()
		return len(f) == 1 && !f[0].PodsDeleted.IsZero()
	})
	if e.podExists(t, "plain") || e.podExists(t, "opted-out-0") {
		t.Error("node-0's pods survived its fence")
	}

	request(t, e, "node-1")
	wait(t, "healthy empty node-1 fenced on request", func() bool { return e.fenced(t, "node-1") })
	want := []string{"power fence node-0 1", "storage fence node-0 1", "power fence node-1 2", "storage fence node-1 2"}
	if diff := cmp.Diff(want, e.calls.strings()); diff != "" {
		t.Errorf("agent calls (-want +got):\n%s", diff)
	}
}

// (e) Fence tokens strictly increase across fences and across controller
// restarts, continuing from the counter already in the token lease.
func TestTokensIncrease(t *testing.T) {
	e := newEnv(t, 3)
	_, err := e.admin.CoordinationV1().Leases(fencing.TokenLeaseNamespace).Create(ctxT(t), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: fencing.TokenLeaseNamespace, Name: fencing.TokenLeaseName},
		Spec:       coordinationv1.LeaseSpec{LeaseTransitions: ptr.To[int32](41)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.stale(t, "node-0")
	e.healthy(t, "node-1")
	e.healthy(t, "node-2")
	e.pod(t, "a-0", "node-0", pet("a"))
	cfg := fencing.Config{Budget: 3}
	r := e.start(t, controllerOpts{cfg: cfg})
	wait(t, "node-0 fenced", func() bool { return recorded(t, e, "node-0") })
	r.stop()

	r = e.start(t, controllerOpts{cfg: cfg})
	request(t, e, "node-1")
	wait(t, "node-1 fenced", func() bool { return recorded(t, e, "node-1") })
	e.pod(t, "c-0", "node-2", pet("c"))
	e.stale(t, "node-2")
	wait(t, "node-2 fenced", func() bool { return recorded(t, e, "node-2") })

	for node, want := range map[string]int64{"node-0": 42, "node-1": 43, "node-2": 44} {
		if tok, ok := fencing.FenceToken(e.node(t, node)); !ok || tok != want {
			t.Errorf("%s token = %d, %v; want %d", node, tok, ok, want)
		}
	}
	var tokens []int64
	for _, c := range e.calls.all() {
		if c.Agent == "power" {
			tokens = append(tokens, c.Token)
		}
	}
	if diff := cmp.Diff([]int64{42, 43, 44}, tokens); diff != "" {
		t.Errorf("tokens given to the power agent (-want +got):\n%s", diff)
	}
}

// (f) A controller that stops after recording the fence but before the
// force deletions is replaced by one that finishes them from the API state,
// without fencing again.
func TestRestartFinishesDeletions(t *testing.T) {
	e := newEnv(t, 2)
	e.stale(t, "node-0")
	e.healthy(t, "node-1")
	e.pod(t, "web-0", "node-0", pet("web"))
	e.attachment(t, "va-0", "node-0")
	crashPoint := func(req *http.Request) bool {
		return strings.Contains(req.URL.Path, "/pods/") || strings.Contains(req.URL.Path, "/volumeattachments/")
	}
	first := e.start(t, controllerOpts{block: crashPoint})
	wait(t, "fence recorded and a deletion attempted", func() bool {
		return e.fenced(t, "node-0") && slices.ContainsFunc(e.audit.all(), func(s string) bool { return strings.HasPrefix(s, "blocked") })
	})
	first.stop()
	if !e.podExists(t, "web-0") || !e.attachmentExists(t, "va-0") {
		t.Fatal("deletions got through the crash point")
	}
	before := e.calls.strings()

	second := e.start(t, controllerOpts{})
	wait(t, "node-0 clear", func() bool { return !e.podExists(t, "web-0") && !e.attachmentExists(t, "va-0") })
	wait(t, "the record of the resumed fence complete", func() bool {
		f := second.ctl.Fences()
		return len(f) == 1 && !f[0].PodsDeleted.IsZero()
	})
	if diff := cmp.Diff(before, e.calls.strings()); diff != "" {
		t.Errorf("the restarted controller called agents again (-before +after):\n%s", diff)
	}
	f := second.ctl.Fences()[0]
	if f.Node != "node-0" || f.Token != 1 || !f.Detected.IsZero() || !slices.Equal(f.Agents, []string{"power", "storage"}) ||
		!slices.Equal(f.Pods, []string{"default/web-0"}) {
		t.Errorf("resumed fence record = %+v", f)
	}
	checkRecordedBeforeDeletes(t, e.audit, "node-0", "web-0", "va-0")
}

// recorded reports whether node is fenced and its fence token recorded.
func recorded(t *testing.T, e *env, node string) bool {
	n := e.node(t, node)
	_, ok := fencing.FenceToken(n)
	return ok && fencing.Fenced(n)
}

// request sets the admin fence request annotation on node.
func request(t *testing.T, e *env, node string) {
	t.Helper()
	n := e.node(t, node)
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations[fencing.AnnotationFenceRequest] = "test"
	if _, err := e.admin.CoreV1().Nodes().Update(ctxT(t), n, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("requesting the fence of %s: %v", node, err)
	}
}

func condition(n *corev1.Node, ct corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == ct {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func hasTaint(n *corev1.Node, key string, effect corev1.TaintEffect) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key && t.Effect == effect })
}

// count counts the calls of agent and op that failed (or not).
func count(calls []call, agent, op string, failed bool) int {
	n := 0
	for _, c := range calls {
		if c.Agent == agent && c.Op == op && c.Err == failed {
			n++
		}
	}
	return n
}
