package scheduler

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// waitEvents polls the fake clientset until check accepts its Events.
func waitEvents(t *testing.T, cs *fake.Clientset, check func([]corev1.Event) bool) []corev1.Event {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		evs, err := cs.CoreV1().Events("").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if check(evs.Items) || time.Now().After(deadline) {
			return evs.Items
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestSchedulerEvents(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "u1"}}
	cs := fake.NewSimpleClientset(pod)
	b := &binder{client: cs}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	if err := b.bind(ctx, pod, "node-1"); err != nil {
		t.Fatal(err)
	}
	msg := "0/2 nodes are available: 2 Insufficient cpu."
	b.recordFailedScheduling(ctx, pod, msg)
	b.recordFailedScheduling(ctx, pod, msg)
	long := strings.Repeat("x", 2000)
	b.recordFailedScheduling(ctx, pod, long)
	preemptor := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "high", UID: "u2"},
		Spec: corev1.PodSpec{SchedulerName: "my-scheduler"}}
	b.recordPreempted(ctx, pod, preemptor, "node-1")

	byReason := func(evs []corev1.Event) map[string][]corev1.Event {
		out := map[string][]corev1.Event{}
		for _, e := range evs {
			out[e.Reason] = append(out[e.Reason], e)
		}
		return out
	}
	evs := waitEvents(t, cs, func(evs []corev1.Event) bool {
		m := byReason(evs)
		return len(m[reasonScheduled]) == 1 && len(m[reasonPreempted]) == 1 && len(m[reasonFailedScheduling]) == 2 &&
			(m[reasonFailedScheduling][0].Count == 2 || m[reasonFailedScheduling][1].Count == 2)
	})
	m := byReason(evs)
	if got := m[reasonScheduled]; len(got) != 1 || got[0].Message != "Successfully assigned default/web to node-1" ||
		got[0].Type != corev1.EventTypeNormal || got[0].Source.Component != DefaultSchedulerName ||
		got[0].InvolvedObject.UID != "u1" || got[0].Name[:len("web.")] != "web." {
		t.Errorf("Scheduled events %+v, want one on web from %s", got, DefaultSchedulerName)
	}
	counts := map[string]int32{}
	for _, e := range m[reasonFailedScheduling] {
		if e.Type != corev1.EventTypeWarning {
			t.Errorf("FailedScheduling of type %s, want Warning", e.Type)
		}
		counts[e.Message] = e.Count
	}
	truncated := long[:noteLengthLimit-4] + " ..."
	if counts[msg] != 2 || counts[truncated] != 1 {
		t.Errorf("FailedScheduling counts by message %v, want the repeated one aggregated (2) and the long one truncated to %d bytes", counts, noteLengthLimit)
	}
	if got := m[reasonPreempted]; len(got) != 1 || got[0].Message != "Preempted by pod u2 on node node-1" ||
		got[0].InvolvedObject.Name != "web" || got[0].Source.Component != "my-scheduler" {
		t.Errorf("Preempted events %+v, want one on the victim from the preemptor's scheduler", got)
	}

	// The broadcaster ends with its context; a later Event starts another.
	cancel()
	b.recordFailedScheduling(ctx, pod, "dropped: the scheduler stopped")
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	b.recordFailedScheduling(ctx2, pod, "after a restart")
	evs = waitEvents(t, cs, func(evs []corev1.Event) bool {
		return len(byReason(evs)[reasonFailedScheduling]) == 3
	})
	for _, e := range evs {
		if strings.HasPrefix(e.Message, "dropped") {
			t.Errorf("an Event recorded after its context ended was written: %+v", e)
		}
	}
	if got := len(byReason(evs)[reasonFailedScheduling]); got != 3 {
		t.Errorf("%d FailedScheduling events after a restart, want 3", got)
	}
}

// settledActions returns the fake clientset's actions once the recorder's
// asynchronous writes have landed: once their number stayed the same for a
// while.
func settledActions(cs *fake.Clientset) []k8stesting.Action {
	const quiet = 100 * time.Millisecond
	deadline := time.Now().Add(3 * time.Second)
	n := len(cs.Actions())
	for time.Now().Before(deadline) {
		time.Sleep(quiet)
		m := len(cs.Actions())
		if m == n {
			break
		}
		n = m
	}
	return cs.Actions()
}

// inRecordingOrder moves each Event call of calls ("create events ns/pod
// Reason") right after the last other call on the same pod, where the
// scheduler recorded it: the recorder writes Events asynchronously, so
// they land later than that.
func inRecordingOrder(calls []string) []string {
	var out []string
	var evs []string
	for _, c := range calls {
		if strings.Contains(c, " events ") {
			evs = append(evs, c)
			continue
		}
		out = append(out, c)
	}
	for _, e := range evs {
		f := strings.Fields(e) // verb, "events", ns/pod, reason
		at := len(out)
		for i := len(out) - 1; i >= 0; i-- {
			g := strings.Fields(out[i])
			if len(g) >= 3 && g[2] == f[2] {
				at = i + 1
				break
			}
		}
		out = append(out[:at], append([]string{e}, out[at:]...)...)
	}
	return out
}
