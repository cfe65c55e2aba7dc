package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

func TestScaleDownOrder(t *testing.T) {
	pods := []*podBuilder{
		makePod("ready-old").node("n").ready().created(1),
		makePod("ready-new").node("n").ready().created(5),
		makePod("unready").node("n").created(2),
		makePod("unscheduled").created(0),
	}
	var in []*corev1.Pod
	for _, b := range pods {
		in = append(in, b.obj())
	}
	got := names(scaleDownOrder(in))
	want := []string{"unscheduled", "unready", "ready-new", "ready-old"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}

func TestPodActive(t *testing.T) {
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"running", makePod("p").node("n").obj(), true},
		{"terminating does not count (PS-7)", makePod("p").node("n").terminating().obj(), false},
		{"failed", makePod("p").phase("Failed").obj(), false},
	} {
		if got := podActive(tc.pod); got != tc.want {
			t.Errorf("%s: podActive = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestUpdateStatusCountsActivePods: the status counts the set's active pods
// (ready ones as ready and available), not terminating or finished ones.
func TestUpdateStatusCountsActivePods(t *testing.T) {
	set := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Generation: 3}}
	cs := fake.NewClientset(set)
	rc, err := NewReplicaSet(ReplicaSetConfig{Client: cs})
	if err != nil {
		t.Fatal(err)
	}
	owned := []*corev1.Pod{
		makePod("a").node("n").ready().obj(),
		makePod("b").node("n").obj(),
		makePod("c").node("n").ready().terminating().obj(),
		makePod("d").node("n").phase(corev1.PodSucceeded).obj(),
	}
	if err := rc.updateStatus(context.Background(), set, owned); err != nil {
		t.Fatal(err)
	}
	got, err := cs.AppsV1().ReplicaSets("default").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := appsv1.ReplicaSetStatus{ObservedGeneration: 3, Replicas: 2, FullyLabeledReplicas: 2, ReadyReplicas: 1, AvailableReplicas: 1}
	if diff := cmp.Diff(want, got.Status); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
}

// TestReplicaSetCreateSeenBeforeReturn: a pod the informer shows, or shows
// and removes, before the create call returns is not counted as in flight,
// and a set with a create the informer never showed is synced again once
// PendingTimeout passes, so that it is not left short (a run found a set
// whose only pod was created and deleted between two looks of the lister
// wait forever with 1 replica wanted and 0 pods).
func TestReplicaSetCreateSeenBeforeReturn(t *testing.T) {
	ctx := context.Background()
	set := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "set-uid"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}},
		},
	}
	cs := fake.NewClientset(set)
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	rc, err := NewReplicaSet(ReplicaSetConfig{Client: cs, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	created := 0
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod).DeepCopy()
		created++
		p.Name = fmt.Sprintf("web-%d", created)
		if created == 1 {
			// The informer delivers the pod's ADDED and DELETED events
			// before the call returns.
			rc.observed(p)
			rc.observed(p)
		}
		return true, p, nil
	})
	if err := rc.factory.Apps().V1().ReplicaSets().Informer().GetStore().Add(set); err != nil {
		t.Fatal(err)
	}
	if err := rc.sync(ctx, "default/web"); err != nil {
		t.Fatal(err)
	}
	if created != 1 {
		t.Fatalf("first sync created %d pods, want 1", created)
	}
	// The pod is gone and its events were handled: the next sync must
	// replace it at once, not count it as still in flight.
	if err := rc.sync(ctx, "default/web"); err != nil {
		t.Fatal(err)
	}
	if created != 2 {
		t.Fatalf("after the pod was created and removed before the create returned, the set made %d pods, want 2", created)
	}
	// web-2 is never shown by the informer: the set counts it as in
	// flight until PendingTimeout, and is queued again for then.
	for rc.queue.q.Len() > 0 {
		k, _ := rc.queue.q.Get()
		rc.queue.q.Done(k)
	}
	if err := rc.sync(ctx, "default/web"); err != nil {
		t.Fatal(err)
	}
	if created != 2 {
		t.Fatalf("a create not yet shown by the informer was repeated: %d pods made, want 2", created)
	}
	clk.Step(DefaultPendingTimeout)
	// The delaying queue moves due items on its own goroutine.
	if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return rc.queue.q.Len() > 0, nil
	}); err != nil {
		t.Fatalf("the set was not queued again once its pending create timed out")
	}
	if err := rc.sync(ctx, "default/web"); err != nil {
		t.Fatal(err)
	}
	if created != 3 {
		t.Fatalf("after PendingTimeout the set made %d pods, want 3 (the never-shown create is forgotten)", created)
	}
}

// TestReplicaSetObservedCreate: a create the informer delivers after the
// call returned stops counting as in flight when it is delivered, even if
// the lister no longer shows it at the next sync.
func TestReplicaSetObservedCreate(t *testing.T) {
	rc, err := NewReplicaSet(ReplicaSetConfig{Client: fake.NewClientset()})
	if err != nil {
		t.Fatal(err)
	}
	if _, n, _ := rc.reconcilePending("set-uid", nil); n != 0 {
		t.Fatalf("in flight %d, want 0", n)
	}
	rc.pending["set-uid"].created["web-1"] = rc.cfg.Clock.Now()
	p := makePod("web-1").obj()
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "set-uid", Controller: ptr.To(true)}}
	if _, n, waiting := rc.reconcilePending("set-uid", nil); n != 1 || !waiting {
		t.Fatalf("before the informer showed web-1: in flight %d, waiting %v; want 1, true", n, waiting)
	}
	rc.observed(p)
	if _, n, waiting := rc.reconcilePending("set-uid", nil); n != 0 || waiting {
		t.Fatalf("after the informer showed web-1: in flight %d, waiting %v; want 0, false", n, waiting)
	}
}

// TestReplicaSetForgetsDeletedSet: what a set had pending goes with it.
func TestReplicaSetForgetsDeletedSet(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	set := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "set-uid"}}
	cs := fake.NewClientset(set)
	rc, err := NewReplicaSet(ReplicaSetConfig{Client: cs})
	if err != nil {
		t.Fatal(err)
	}
	rc.factory.Start(ctx.Done())
	rc.factory.WaitForCacheSync(ctx.Done())
	rc.reconcilePending(set.UID, nil)
	pending := func() int {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		return len(rc.pending)
	}
	if pending() != 1 {
		t.Fatalf("%d sets pending, want 1", pending())
	}
	if err := cs.AppsV1().ReplicaSets("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return pending() == 0, nil
	}); err != nil {
		t.Fatalf("the deleted set is still pending: %d", pending())
	}
}

// TestUpdateStatusSkipsCurrent: a status that already says what the pods
// say is not written again (each sync would otherwise write it).
func TestUpdateStatusSkipsCurrent(t *testing.T) {
	set := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Generation: 3},
		Status: appsv1.ReplicaSetStatus{ObservedGeneration: 3, Replicas: 2, FullyLabeledReplicas: 2, ReadyReplicas: 1, AvailableReplicas: 1}}
	cs := fake.NewClientset(set)
	rc, err := NewReplicaSet(ReplicaSetConfig{Client: cs})
	if err != nil {
		t.Fatal(err)
	}
	owned := []*corev1.Pod{makePod("a").node("n").ready().obj(), makePod("b").node("n").obj()}
	cs.ClearActions()
	if err := rc.updateStatus(context.Background(), set, owned); err != nil {
		t.Fatal(err)
	}
	if n := len(cs.Actions()); n != 0 {
		t.Fatalf("a current status was written again: %d calls (%v)", n, cs.Actions())
	}
	// Any field behind is written.
	for name, behind := range map[string]func(*appsv1.ReplicaSetStatus){
		"observedGeneration": func(s *appsv1.ReplicaSetStatus) { s.ObservedGeneration = 2 },
		"replicas":           func(s *appsv1.ReplicaSetStatus) { s.Replicas = 1 },
		"ready":              func(s *appsv1.ReplicaSetStatus) { s.ReadyReplicas = 0 },
		"available":          func(s *appsv1.ReplicaSetStatus) { s.AvailableReplicas = 0 },
		"fullyLabeled":       func(s *appsv1.ReplicaSetStatus) { s.FullyLabeledReplicas = 1 },
	} {
		old := set.DeepCopy()
		behind(&old.Status)
		cs.ClearActions()
		if err := rc.updateStatus(context.Background(), old, owned); err != nil {
			t.Fatal(err)
		}
		if n := len(cs.Actions()); n != 1 {
			t.Errorf("%s behind: %d calls, want 1 status write", name, n)
		}
	}
}
