package controller

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
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
