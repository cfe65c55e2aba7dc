package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
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
