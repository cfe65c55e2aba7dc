package apiserver

import (
	"context"
	"encoding/json"
	"net/http"
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
func TestGracefulDeletion(t *testing.T) {
	e := newTestEnv(t)
	at := func(secs int) time.Time { return testStart.Add(time.Duration(secs) * time.Second) }
	type step struct {
		advance  time.Duration
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
		{"second delete shortens", makePod("shorten").node("node-1").obj(),
			[]step{{identity: IdentityWorkload}, {advance: 5 * time.Second, identity: IdentityNodeController, grace: int64p(10)}},
			deletionState{true, at(15), 10}},
		{"second delete never lengthens", makePod("lengthen").node("node-1").obj(),
			[]step{{identity: IdentityWorkload, grace: int64p(10)}, {advance: 2 * time.Second, identity: IdentityWorkload, grace: int64p(60)}},
			deletionState{true, at(10), 10}},
		{"repeating the same grace later leaves the deadline", makePod("repeat").node("node-1").obj(),
			[]step{{identity: IdentityWorkload}, {advance: 5 * time.Second, identity: IdentityWorkload}},
			deletionState{true, at(30), 30}},
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
