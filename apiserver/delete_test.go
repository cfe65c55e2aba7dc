package apiserver

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// deletePodRaw deletes a pod through the REST client and decodes the object
// the server answers with.
func deletePodRaw(ctx context.Context, c kubernetes.Interface, ns, name string, opts metav1.DeleteOptions) (*corev1.Pod, error) {
	obj, err := c.CoreV1().RESTClient().Delete().Namespace(ns).Resource("pods").Name(name).
		Body(&opts).Do(ctx).Get()
	if err != nil {
		return nil, err
	}
	pod, _ := obj.(*corev1.Pod)
	return pod, nil
}

// deletionState is what a graceful deletion leaves on a pod.
type deletionState struct {
	Exists    bool
	Deadline  time.Time
	GraceSecs int64
}

func deletionStateOf(p *corev1.Pod) deletionState {
	if p == nil {
		return deletionState{}
	}
	s := deletionState{Exists: true}
	if p.DeletionTimestamp != nil {
		s.Deadline = p.DeletionTimestamp.UTC()
	}
	if p.DeletionGracePeriodSeconds != nil {
		s.GraceSecs = *p.DeletionGracePeriodSeconds
	}
	return s
}

// TestGracefulDeletion walks GP-6 and PS-3 through the HTTP API: each case
// seeds a pod, optionally runs earlier deletions, advances the fake clock and
// deletes; it checks the stored state and the object the server returned.
// The rules are kube-apiserver v1.37.2's (see TestGracefulDelete); the rows
// marked "upstream:" are where podsafe's earlier rule (deadlines counted
// from now and compared, a second DELETE judged again by the pod's spec and
// phase) disagreed with it.
func TestGracefulDeletion(t *testing.T) {
	e := newTestEnv(t)
	at := func(secs int) time.Time { return testStart.Add(time.Duration(secs) * time.Second) }
	type step struct {
		advance  time.Duration
		phase    corev1.PodPhase // status.phase the kubelet reports before the step, if any
		identity string
		grace    *int64
	}
	tests := []struct {
		name  string
		pod   *corev1.Pod
		steps []step // all but the last are setup
		want  deletionState
	}{
		{"unscheduled pod is deleted at once", makePod("unscheduled").obj(),
			[]step{{identity: IdentityWorkload}}, deletionState{}},
		{"unscheduled pod ignores a requested grace", makePod("unscheduled-grace").obj(),
			[]step{{identity: IdentityWorkload, grace: int64p(60)}}, deletionState{}},
		{"succeeded pod is deleted at once", makePod("succeeded").node("node-1").phase(corev1.PodSucceeded).obj(),
			[]step{{identity: IdentityReplicaSetController}}, deletionState{}},
		{"failed pod is deleted at once", makePod("failed").node("node-1").phase(corev1.PodFailed).obj(),
			[]step{{identity: IdentityPodGC}}, deletionState{}},
		{"default grace is 30 s", makePod("default").node("node-1").phase(corev1.PodRunning).obj(),
			[]step{{identity: IdentityWorkload}}, deletionState{true, at(30), 30}},
		{"spec grace", makePod("spec").node("node-1").grace(45).obj(),
			[]step{{identity: IdentityWorkload}}, deletionState{true, at(45), 45}},
		{"requested grace wins over spec", makePod("requested").node("node-1").grace(45).obj(),
			[]step{{identity: IdentityWorkload, grace: int64p(10)}}, deletionState{true, at(10), 10}},
		{"negative grace becomes 1", makePod("negative").node("node-1").obj(),
			[]step{{identity: IdentityWorkload, grace: int64p(-7)}}, deletionState{true, at(1), 1}},
		{"second delete shortens, counted from the deletion's start", makePod("shorten").node("node-1").obj(),
			[]step{{identity: IdentityWorkload}, {advance: 5 * time.Second, identity: IdentityNodeController, grace: int64p(10)}},
			deletionState{true, at(10), 10}},
		{"upstream: a shorter grace shortens though now + grace is later than the deadline", makePod("shorter-later").node("node-1").obj(),
			[]step{{identity: IdentityWorkload, grace: int64p(10)}, {advance: 5 * time.Second, identity: IdentityWorkload, grace: int64p(8)}},
			deletionState{true, at(8), 8}},
		{"upstream: a shortened deadline already past becomes now with grace 1", makePod("shorten-past").node("node-1").obj(),
			[]step{{identity: IdentityWorkload, grace: int64p(10)}, {advance: 7500 * time.Millisecond, identity: IdentityWorkload, grace: int64p(5)}},
			deletionState{true, at(8), 1}},
		{"upstream: shortening an overrun deletion moves its deadline to now", makePod("shorten-overrun").node("node-1").obj(),
			[]step{{identity: IdentityWorkload, grace: int64p(5)}, {advance: 10500 * time.Millisecond, identity: IdentityWorkload, grace: int64p(3)}},
			deletionState{true, at(11), 1}},
		{"negative second grace shortens to 1", makePod("shorten-negative").node("node-1").obj(),
			[]step{{identity: IdentityWorkload}, {advance: 500 * time.Millisecond, identity: IdentityWorkload, grace: int64p(-1)}},
			deletionState{true, at(1), 1}},
		{"second delete never lengthens", makePod("lengthen").node("node-1").obj(),
			[]step{{identity: IdentityWorkload, grace: int64p(10)}, {advance: 2 * time.Second, identity: IdentityWorkload, grace: int64p(60)}},
			deletionState{true, at(10), 10}},
		{"second delete with the same grace is pending", makePod("same").node("node-1").obj(),
			[]step{{identity: IdentityWorkload, grace: int64p(10)}, {advance: 2 * time.Second, identity: IdentityWorkload, grace: int64p(10)}},
			deletionState{true, at(10), 10}},
		{"repeating the same grace later leaves the deadline", makePod("repeat").node("node-1").obj(),
			[]step{{identity: IdentityWorkload}, {advance: 5 * time.Second, identity: IdentityWorkload}},
			deletionState{true, at(30), 30}},
		{"upstream: second delete without a grace is pending, not the spec's grace", makePod("nil-spec").node("node-1").grace(5).obj(),
			[]step{{identity: IdentityWorkload, grace: int64p(60)}, {advance: time.Second, identity: IdentityWorkload}},
			deletionState{true, at(60), 60}},
		{"upstream: second delete without a grace is pending though the spec's grace is 0, and no force delete", makePod("nil-spec-0").node("node-1").grace(0).phase(corev1.PodRunning).obj(),
			[]step{{identity: IdentityWorkload, grace: int64p(20)}, {advance: 3 * time.Second, identity: IdentityWorkload}},
			deletionState{true, at(20), 20}},
		{"upstream: second delete of a pod turned Succeeded is pending", makePod("turned-succeeded").node("node-1").phase(corev1.PodRunning).obj(),
			[]step{{identity: IdentityWorkload}, {advance: 2 * time.Second, phase: corev1.PodSucceeded, identity: IdentityReplicaSetController}},
			deletionState{true, at(30), 30}},
		{"upstream: second delete with a longer grace of a pod turned Failed is pending", makePod("turned-failed").node("node-1").phase(corev1.PodRunning).obj(),
			[]step{{identity: IdentityWorkload, grace: int64p(10)}, {advance: 2 * time.Second, phase: corev1.PodFailed, identity: IdentityWorkload, grace: int64p(20)}},
			deletionState{true, at(10), 10}},
		{"upstream: a shorter grace shortens a pod turned Failed", makePod("turned-failed-shorter").node("node-1").phase(corev1.PodRunning).obj(),
			[]step{{identity: IdentityWorkload}, {advance: 2 * time.Second, phase: corev1.PodFailed, identity: IdentityWorkload, grace: int64p(5)}},
			deletionState{true, at(5), 5}},
		{"grace 0 removes a pod turned Succeeded, for anyone", makePod("turned-succeeded-0").node("node-1").phase(corev1.PodRunning).obj(),
			[]step{{identity: IdentityWorkload}, {advance: 2 * time.Second, phase: corev1.PodSucceeded, identity: IdentityReplicaSetController, grace: int64p(0)}},
			deletionState{}},
		{"own kubelet finishes a terminating pod", makePod("finish").node("node-1").obj(),
			[]step{{identity: IdentityWorkload}, {advance: 3 * time.Second, identity: KubeletIdentity("node-1"), grace: int64p(0)}},
			deletionState{}},
		{"admin force deletes a running pod", makePod("force").node("node-1").phase(corev1.PodRunning).obj(),
			[]step{{identity: IdentityAdmin, grace: int64p(0)}}, deletionState{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			e.clock.SetTime(testStart)
			seeded := e.seedPod(tt.pod)
			var got *corev1.Pod
			for _, st := range tt.steps {
				e.clock.Step(st.advance)
				if st.phase != "" {
					e.setPhase(seeded.Name, st.phase)
				}
				var err error
				got, err = deletePodRaw(ctx, e.client(st.identity), "default", seeded.Name,
					metav1.DeleteOptions{GracePeriodSeconds: st.grace})
				if err != nil {
					t.Fatalf("delete as %s: %v", st.identity, err)
				}
			}
			stored := e.storedPod("default", seeded.Name)
			if diff := cmp.Diff(tt.want, deletionStateOf(stored)); diff != "" {
				t.Errorf("stored deletion state (-want +got):\n%s", diff)
			}
			if got == nil || got.Name != seeded.Name {
				t.Fatalf("answer is %v, want the pod", got)
			}
			if tt.want.Exists {
				if diff := cmp.Diff(tt.want, deletionStateOf(got)); diff != "" {
					t.Errorf("answered deletion state (-want +got):\n%s", diff)
				}
			} else if got.DeletionGracePeriodSeconds == nil || *got.DeletionGracePeriodSeconds != 0 {
				t.Errorf("answer of a deletion at once has deletionGracePeriodSeconds %v, want 0", got.DeletionGracePeriodSeconds)
			}
		})
	}
}

// setPhase writes a stored pod's status.phase as admin, as its kubelet
// would report it.
func (e *testEnv) setPhase(name string, phase corev1.PodPhase) {
	e.t.Helper()
	ctx := testCtx(e.t)
	pods := e.client(IdentityAdmin).CoreV1().Pods("default")
	cur, err := pods.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatalf("reading pod %s: %v", name, err)
	}
	cur.Status.Phase = phase
	if _, err := pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
		e.t.Fatalf("setting phase %s of pod %s: %v", phase, name, err)
	}
}

// TestPendingDeletionAnswer checks a pending graceful deletion as
// kube-apiserver answers it: 200 with the pod as stored, and nothing
// written (no new resourceVersion).
func TestPendingDeletionAnswer(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	e.clock.SetTime(testStart)
	e.seedPod(makePod("p").node("node-1").obj())
	c := e.client(IdentityWorkload)
	if _, err := deletePodRaw(ctx, c, "default", "p", metav1.DeleteOptions{GracePeriodSeconds: int64p(10)}); err != nil {
		t.Fatal(err)
	}
	before := e.storedPod("default", "p")
	e.clock.Step(2 * time.Second)
	resp := e.rawRequest(http.MethodDelete, "/api/v1/namespaces/default/pods/p", IdentityWorkload, "application/json",
		[]byte(`{"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":20}`))
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("pending deletion answered %d, want 200", resp.StatusCode)
	}
	var got corev1.Pod
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	after := e.storedPod("default", "p")
	if after.ResourceVersion != before.ResourceVersion {
		t.Errorf("resourceVersion moved from %s to %s on a pending deletion", before.ResourceVersion, after.ResourceVersion)
	}
	if diff := cmp.Diff(deletionStateOf(before), deletionStateOf(&got)); diff != "" {
		t.Errorf("answered deletion state (-stored +answered):\n%s", diff)
	}
	if got.ResourceVersion != before.ResourceVersion || got.Kind != "Pod" {
		t.Errorf("answer is %s resourceVersion %s, want the Pod at %s", got.Kind, got.ResourceVersion, before.ResourceVersion)
	}
}

// deletingPod is p with metadata.generation generation and, unless
// deadline is zero, terminating: deletionTimestamp deadline and
// deletionGracePeriodSeconds grace (nil included). The oracle's
// reproducers (oracle/grace) print TestGracefulDelete rows with it.
func deletingPod(p *corev1.Pod, deadline time.Time, grace *int64, generation int64) *corev1.Pod {
	p = p.DeepCopy()
	p.Generation = generation
	if !deadline.IsZero() {
		ts := metav1.NewTime(deadline)
		p.DeletionTimestamp = &ts
		if grace != nil {
			g := *grace
			p.DeletionGracePeriodSeconds = &g
		}
	}
	return p
}

// TestGracefulDelete checks the pure rule of GP-6 and PS-3 row by row
// against kube-apiserver v1.37.2's (rest.BeforeDelete, the pod strategy's
// CheckGracefulDelete, the registry's Delete): the outcome, and the
// deletionTimestamp, deletionGracePeriodSeconds and generation it leaves.
func TestGracefulDelete(t *testing.T) {
	at := func(ms int) time.Time { return testStart.Add(time.Duration(ms) * time.Millisecond) }
	type result struct {
		Outcome    DeleteOutcome
		Deadline   time.Time // zero: none
		Grace      *int64
		Generation int64
	}
	gen := func(p *corev1.Pod) *corev1.Pod { return deletingPod(p, time.Time{}, nil, 1) }
	running := func() *podBuilder { return makePod("p").node("n").phase(corev1.PodRunning) }
	terminating := func(graceS int64) *corev1.Pod {
		return deletingPod(running().obj(), at(int(graceS)*1000), int64p(graceS), 1)
	}
	tests := []struct {
		name      string
		pod       *corev1.Pod
		requested *int64
		now       time.Time
		want      result
	}{
		// First DELETE: CheckGracefulDelete.
		{"first: unscheduled at once", gen(makePod("p").grace(45).obj()), int64p(10), at(300),
			result{DeleteNow, at(300), int64p(0), 2}},
		{"first: succeeded at once", gen(running().phase(corev1.PodSucceeded).obj()), nil, at(0), result{DeleteNow, at(0), int64p(0), 2}},
		{"first: failed at once", gen(running().phase(corev1.PodFailed).obj()), int64p(10), at(0), result{DeleteNow, at(0), int64p(0), 2}},
		{"first: grace 0 at once", gen(running().obj()), int64p(0), at(0), result{DeleteNow, at(0), int64p(0), 2}},
		{"first: default 30, deadline rounded up", gen(running().obj()), nil, at(300), result{DeleteGraceful, at(31000), int64p(30), 2}},
		{"first: spec grace", gen(running().grace(45).obj()), nil, at(0), result{DeleteGraceful, at(45000), int64p(45), 2}},
		{"first: spec grace 0 at once", gen(running().grace(0).obj()), nil, at(0), result{DeleteNow, at(0), int64p(0), 2}},
		{"first: request wins", gen(running().grace(45).obj()), int64p(5), at(0), result{DeleteGraceful, at(5000), int64p(5), 2}},
		{"first: negative request becomes 1", gen(running().obj()), int64p(-3), at(0), result{DeleteGraceful, at(1000), int64p(1), 2}},
		{"first: negative spec becomes 1", gen(running().grace(-1).obj()), nil, at(0), result{DeleteGraceful, at(1000), int64p(1), 2}},
		{"first: no generation, none bumped", running().obj(), nil, at(0), result{DeleteGraceful, at(30000), int64p(30), 0}},

		// A pod already terminating: only the grace values count.
		{"terminating with no deletionGracePeriodSeconds: at once", deletingPod(running().obj(), at(30000), nil, 1), nil, at(5000),
			result{DeleteNow, at(30000), nil, 1}},
		{"terminating with deletionGracePeriodSeconds 0: at once", terminating(0), int64p(30), at(5000), result{DeleteNow, at(0), int64p(0), 1}},
		{"no grace: pending", terminating(30), nil, at(5000), result{DeletePending, at(30000), int64p(30), 1}},
		{"equal grace: pending", terminating(30), int64p(30), at(5000), result{DeletePending, at(30000), int64p(30), 1}},
		{"longer grace: pending", terminating(30), int64p(60), at(5000), result{DeletePending, at(30000), int64p(30), 1}},
		{"no grace, spec 0: pending", deletingPod(running().grace(0).obj(), at(20000), int64p(20), 1), nil, at(3000),
			result{DeletePending, at(20000), int64p(20), 1}},
		{"no grace, pod turned succeeded: pending", deletingPod(running().phase(corev1.PodSucceeded).obj(), at(30000), int64p(30), 1), nil, at(2000),
			result{DeletePending, at(30000), int64p(30), 1}},
		{"longer grace, pod turned failed: pending", deletingPod(running().phase(corev1.PodFailed).obj(), at(10000), int64p(10), 1), int64p(20), at(2000),
			result{DeletePending, at(10000), int64p(10), 1}},
		{"shorter grace, from the deletion's start", terminating(30), int64p(10), at(5000), result{DeleteGraceful, at(10000), int64p(10), 1}},
		{"shorter grace though now + grace is later", terminating(10), int64p(8), at(5000), result{DeleteGraceful, at(8000), int64p(8), 1}},
		{"shorter grace, deadline exactly now", terminating(10), int64p(5), at(5000), result{DeleteGraceful, at(5000), int64p(5), 1}},
		{"shorter grace past: now, grace 1", terminating(10), int64p(5), at(7500), result{DeleteGraceful, at(8000), int64p(1), 1}},
		{"shorter grace past an overrun deadline: now, later", terminating(5), int64p(3), at(10500), result{DeleteGraceful, at(11000), int64p(1), 1}},
		{"shorter grace, pod turned failed", deletingPod(running().phase(corev1.PodFailed).obj(), at(30000), int64p(30), 1), int64p(5), at(2000),
			result{DeleteGraceful, at(5000), int64p(5), 1}},
		{"shorter grace, unscheduled: no CheckGracefulDelete", deletingPod(makePod("p").obj(), at(30000), int64p(30), 1), int64p(5), at(2000),
			result{DeleteGraceful, at(5000), int64p(5), 1}},
		{"shorter grace off the second: deadline rounded up", deletingPod(running().obj(), at(30750), int64p(30), 2), int64p(5), at(2500),
			result{DeleteGraceful, at(6000), int64p(5), 2}},
		{"negative second grace is 1", terminating(30), int64p(-1), at(500), result{DeleteGraceful, at(1000), int64p(1), 1}},
		{"grace 0: at once at now", terminating(30), int64p(0), at(5000), result{DeleteNow, at(5000), int64p(0), 1}},
		{"grace 0 within the first second: at once at the start", terminating(30), int64p(0), at(0), result{DeleteNow, at(0), int64p(0), 1}},
		{"negative deletionGracePeriodSeconds counts as 1: pending", terminating(-2), int64p(1), at(0), result{DeletePending, at(-2000), int64p(1), 1}},
		{"negative deletionGracePeriodSeconds counts as 1: shortened by 0", terminating(-2), int64p(0), at(-5000),
			result{DeleteNow, at(-3000), int64p(0), 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.pod.DeepCopy()
			upd, outcome := GracefulDelete(tt.pod, tt.requested, tt.now)
			got := result{Outcome: outcome, Grace: upd.DeletionGracePeriodSeconds, Generation: upd.Generation}
			if upd.DeletionTimestamp != nil {
				got.Deadline = upd.DeletionTimestamp.Time
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("GracefulDelete (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tt.pod); diff != "" {
				t.Errorf("GracefulDelete changed its argument (-before +after):\n%s", diff)
			}
		})
	}
}

// TestDeletePreconditions checks DeleteOptions preconditions: a mismatch is
// 409 and leaves the pod alone.
func TestDeletePreconditions(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	c := e.client(IdentityWorkload)
	pod := e.seedPod(makePod("pre").node("node-1").obj())
	wrongUID := types.UID("not-the-uid")
	wrongRV := "1"
	for name, pre := range map[string]*metav1.Preconditions{
		"uid":             {UID: &wrongUID},
		"resourceVersion": {ResourceVersion: &wrongRV},
	} {
		t.Run(name, func(t *testing.T) {
			err := c.CoreV1().Pods("default").Delete(ctx, "pre", metav1.DeleteOptions{Preconditions: pre})
			if !apierrors.IsConflict(err) {
				t.Fatalf("delete with a wrong %s precondition: %v, want 409 Conflict", name, err)
			}
			if got := e.storedPod("default", "pre"); got == nil || got.ResourceVersion != pod.ResourceVersion {
				t.Errorf("pod changed after a refused delete: %v", got)
			}
		})
	}
	t.Run("matching", func(t *testing.T) {
		err := c.CoreV1().Pods("default").Delete(ctx, "pre", metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &pod.UID, ResourceVersion: &pod.ResourceVersion}})
		if err != nil {
			t.Fatalf("delete with matching preconditions: %v", err)
		}
		if got := e.storedPod("default", "pre"); got == nil || got.DeletionTimestamp == nil {
			t.Errorf("pod is not terminating after a graceful delete: %v", got)
		}
	})
}

// TestDeleteNonPod checks that other resources are deleted at once and
// answered with a success Status.
func TestDeleteNonPod(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	admin := e.client(IdentityAdmin)
	e.seedNode(makeNode("node-9").obj())
	raw, err := admin.CoreV1().RESTClient().Delete().Resource("nodes").Name("node-9").DoRaw(ctx)
	if err != nil {
		t.Fatalf("deleting node: %v", err)
	}
	var st metav1.Status
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	if st.Kind != "Status" || st.Status != metav1.StatusSuccess || st.Details == nil || st.Details.Name != "node-9" {
		t.Errorf("answer = %+v, want a success Status naming node-9", st)
	}
	if _, err := admin.CoreV1().Nodes().Get(ctx, "node-9", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("node after delete: %v, want 404", err)
	}
	if err := admin.CoreV1().Nodes().Delete(ctx, "node-9", metav1.DeleteOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("second delete: %v, want 404", err)
	}
	resp := e.rawRequest(http.MethodDelete, "/api/v1/namespaces/default/pods/none", IdentityAdmin, "", nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("deleting a missing pod: %d, want 404", resp.StatusCode)
	}
}

// TestDeleteCollection deletes selected pods gracefully in one request.
func TestDeleteCollection(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	e.seedPod(makePod("a").node("node-1").label("app", "x").obj())
	e.seedPod(makePod("b").label("app", "x").obj())
	e.seedPod(makePod("c").node("node-1").label("app", "y").obj())
	err := e.client(IdentityWorkload).CoreV1().Pods("default").DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: "app=x"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]deletionState{}
	for _, n := range []string{"a", "b", "c"} {
		got[n] = deletionStateOf(e.storedPod("default", n))
	}
	want := map[string]deletionState{
		"a": {true, testStart.Add(30 * time.Second), 30},
		"b": {},
		"c": {Exists: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after deletecollection (-want +got):\n%s", diff)
	}
}

// The namespaces a cluster starts with may not be deleted, as
// kube-apiserver's NamespaceLifecycle admission refuses it.
func TestImmortalNamespaces(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	c := e.client(IdentityAdmin).CoreV1().Namespaces()
	for _, ns := range []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, "mortal"} {
		if _, err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic} {
		err := c.Delete(ctx, ns, metav1.DeleteOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "this namespace may not be deleted") {
			t.Errorf("deleting %s: %v, want 403", ns, err)
		}
	}
	if err := c.Delete(ctx, "mortal", metav1.DeleteOptions{}); err != nil {
		t.Errorf("deleting another namespace: %v", err)
	}
}
