package controller

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestPlanGC(t *testing.T) {
	nodes := []*corev1.Node{makeNode("up", true), makeNode("down", false)}
	pods := []*corev1.Pod{
		makePod("old-failed").node("up").phase(corev1.PodFailed).created(1).obj(),
		makePod("mid-succeeded").node("up").phase(corev1.PodSucceeded).created(2).obj(),
		makePod("new-failed").node("up").phase(corev1.PodFailed).created(3).obj(),
		makePod("unbound-failed").phase(corev1.PodFailed).created(4).obj(),
		makePod("failed-on-down-node").node("down").phase(corev1.PodFailed).created(0).obj(),
		makePod("running").node("up").phase(corev1.PodRunning).created(0).obj(),
		makePod("running-on-down-node").node("down").phase(corev1.PodRunning).obj(),
		makePod("orphan-b").node("gone").phase(corev1.PodRunning).obj(),
		makePod("orphan-a").node("gone").terminating().obj(),
	}
	for _, tc := range []struct {
		threshold      int
		wantTerminated []string
	}{
		{threshold: 10},
		{threshold: 4},
		{threshold: 2, wantTerminated: []string{"old-failed", "mid-succeeded"}},
		{threshold: 0, wantTerminated: []string{"old-failed", "mid-succeeded", "new-failed", "unbound-failed"}},
	} {
		plan := planGC(pods, nodes, tc.threshold)
		if diff := cmp.Diff(tc.wantTerminated, names(plan.terminated)); diff != "" {
			t.Errorf("threshold %d: terminated (-want +got):\n%s", tc.threshold, diff)
		}
		if diff := cmp.Diff([]string{"orphan-a", "orphan-b"}, names(plan.orphaned)); diff != "" {
			t.Errorf("threshold %d: orphaned (-want +got):\n%s", tc.threshold, diff)
		}
	}
}

// TestPodGCThreshold runs the controller against a fake API: it deletes
// the oldest terminated pods down to the threshold and nothing else.
func TestPodGCThreshold(t *testing.T) {
	cs := fake.NewClientset(makeNode("up", true))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i, ph := range []corev1.PodPhase{corev1.PodFailed, corev1.PodSucceeded, corev1.PodFailed, corev1.PodRunning, corev1.PodFailed} {
		p := makePod("p" + string(rune('0'+i))).node("up").phase(ph).created(i).obj()
		if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	gc, err := NewPodGC(PodGCConfig{Client: cs, TerminatedPodThreshold: 2, Period: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- gc.Run(ctx) }()
	remaining := func() []string {
		l, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil
		}
		var out []string
		for _, p := range l.Items {
			out = append(out, p.Name)
		}
		return out
	}
	want := []string{"p2", "p3", "p4"}
	deadline := time.Now().Add(10 * time.Second)
	for !cmp.Equal(want, remaining()) {
		if time.Now().After(deadline) {
			t.Fatalf("pods left = %v, want %v", remaining(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
}
