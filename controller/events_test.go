package controller

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
)

// eventLines polls cs until its Events, as "Type Reason Kind/name from:
// message", equal want (sorted), or a few seconds passed; it returns the
// last lines seen.
func eventLines(t *testing.T, cs *fake.Clientset, want []string) []string {
	t.Helper()
	sort.Strings(want)
	var got []string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		evs, err := cs.CoreV1().Events("").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, e := range evs.Items {
			got = append(got, fmt.Sprintf("%s %s %s/%s %s/%s from %s: %s", e.Type, e.Reason, e.Namespace,
				e.InvolvedObject.Kind, e.InvolvedObject.Namespace, e.InvolvedObject.Name, e.Source.Component, e.Message))
		}
		sort.Strings(got)
		if cmp.Equal(want, got) {
			break
		}
	}
	return got
}

// TestControllerEvents: the ReplicaSet, pet and node lifecycle controllers
// record upstream's Events, in upstream's words, under
// kube-controller-manager's component names; a create that meets the old
// pet or a delete of a pod already gone is no failure; nothing is
// recorded before the controller runs.
func TestControllerEvents(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := fake.NewClientset()
	rc, err := NewReplicaSet(ReplicaSetConfig{Client: cs})
	if err != nil {
		t.Fatal(err)
	}
	pc, err := NewPet(PetConfig{Client: cs})
	if err != nil {
		t.Fatal(err)
	}
	nl, err := NewNodeLifecycle(NodeLifecycleConfig{Client: cs})
	if err != nil {
		t.Fatal(err)
	}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "rs"}}
	set := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db", UID: "sts"}}
	pod := makePod("web-abc").node("n1").obj()
	gone := apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "x")
	exists := apierrors.NewAlreadyExists(schema.GroupResource{Resource: "pods"}, "db-0")

	rc.createdEvent(rs, pod, nil) // before Run: dropped
	rc.events.start(ctx, cs, rc.cfg.Clock)
	pc.events.start(ctx, cs, pc.cfg.Clock)
	nl.events.start(ctx, cs, nl.cfg.Clock)

	rc.createdEvent(rs, pod, nil)
	rc.createdEvent(rs, nil, errors.New("quota"))
	rc.deletedEvent(rs, pod, nil)
	rc.deletedEvent(rs, pod, gone)
	pc.petEvent(set, "db-0", "Create", nil)
	pc.petEvent(set, "db-0", "Create", exists)
	pc.petEvent(set, "db-1", "Delete", nil)
	pc.petEvent(set, "db-2", "Delete", errors.New("boom"))
	nl.nodeStatusEvent("n1", EventNodeNotReady)
	nl.nodeStatusEvent("n1", EventNodeReady)
	nl.evictionEvent(pod)

	want := []string{
		"Normal SuccessfulCreate default/ReplicaSet default/web from replicaset-controller: Created pod: web-abc",
		"Warning FailedCreate default/ReplicaSet default/web from replicaset-controller: Error creating: quota",
		"Normal SuccessfulDelete default/ReplicaSet default/web from replicaset-controller: Deleted pod: web-abc",
		"Normal SuccessfulCreate default/StatefulSet default/db from statefulset-controller: create Pod db-0 in StatefulSet db successful",
		"Normal SuccessfulDelete default/StatefulSet default/db from statefulset-controller: delete Pod db-1 in StatefulSet db successful",
		"Warning FailedDelete default/StatefulSet default/db from statefulset-controller: delete Pod db-2 in StatefulSet db failed error: boom",
		"Normal NodeNotReady default/Node /n1 from node-controller: Node n1 status is now: NodeNotReady",
		"Normal NodeReady default/Node /n1 from node-controller: Node n1 status is now: NodeReady",
		"Normal TaintManagerEviction default/Pod default/web-abc from taint-eviction-controller: Marking for deletion Pod default/web-abc",
	}
	got := eventLines(t, cs, want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}
