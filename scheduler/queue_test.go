package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/podsafe/podsafe/scheduler/st"
)

func TestQueueOrderAndBackoff(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	q := NewQueue(clk, time.Second, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	q.AddOrUpdate(st.MakePod().Name("low-old").Priority(1).Obj())
	clk.Step(time.Millisecond)
	q.AddOrUpdate(st.MakePod().Name("high").Priority(10).Obj())
	clk.Step(time.Millisecond)
	q.AddOrUpdate(st.MakePod().Name("low-new").Priority(1).Obj())

	pop := func() string { t.Helper(); return popName(ctx, t, q) }
	// PR-3: the high-priority pod fails and backs off; the lower ones run.
	first := pop()
	q.Requeue("high")
	got := []string{first, pop(), pop()}
	if diff := cmp.Diff([]string{"high", "low-old", "low-new"}, got); diff != "" {
		t.Errorf("pop order (-want +got):\n%s", diff)
	}
	q.Done("low-old")
	q.Done("low-new")
	if n := q.Len(); n != 1 {
		t.Errorf("queue length %d, want 1 (high backing off)", n)
	}
	clk.Step(999 * time.Millisecond)
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	if _, err := q.Pop(short); err == nil {
		t.Errorf("popped a pod still in back-off")
	}
	cancelShort()
	clk.Step(time.Millisecond)
	if got := pop(); got != "high" {
		t.Errorf("after back-off popped %s, want high", got)
	}
	// The second failure doubles the back-off.
	q.Requeue("high")
	clk.Step(1500 * time.Millisecond)
	short, cancelShort = context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	if _, err := q.Pop(short); err == nil {
		t.Errorf("popped before the doubled back-off ended")
	}
}

// TestQueueAddUnschedulableIfNotPresent: a failed cycle puts the popped pod
// into back-off with the informer's version; a pod whose entry went away
// during the cycle is queued again rather than lost; a pod an informer
// event queued again keeps its place.
func TestQueueAddUnschedulableIfNotPresent(t *testing.T) {
	type state struct {
		Len      int
		Attempts int
		Where    place
		Label    string
	}
	pod := st.MakePod().Name("p").Priority(1).Obj()
	fresh := st.MakePod().Name("p").Priority(1).Label("version", "fresh").Obj()
	for _, tc := range []struct {
		name  string
		setup func(q *Queue)
		want  state
	}{
		{
			name:  "in flight: backs off with the fresh version",
			setup: func(q *Queue) {},
			want:  state{Len: 1, Attempts: 1, Where: inBackoff, Label: "fresh"},
		},
		{
			name:  "dropped during the cycle: queued again in back-off",
			setup: func(q *Queue) { q.Delete(pod.UID) },
			want:  state{Len: 1, Attempts: 1, Where: inBackoff, Label: "fresh"},
		},
		{
			name: "queued again by the informer: keeps its place",
			setup: func(q *Queue) {
				q.Delete(pod.UID)
				q.AddOrUpdate(pod)
			},
			want: state{Len: 1, Attempts: 0, Where: inActive, Label: ""},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
			q := NewQueue(clk, time.Second, 10*time.Second)
			q.AddOrUpdate(pod)
			if _, err := q.Pop(context.Background()); err != nil {
				t.Fatal(err)
			}
			tc.setup(q)
			q.AddUnschedulableIfNotPresent(fresh)
			qp := q.pods[pod.UID]
			got := state{Len: q.Len(), Attempts: qp.Attempts, Where: qp.where, Label: qp.Pod.Labels["version"]}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("queue entry (-want +got):\n%s", diff)
			}
		})
	}
}

// TestQueueRequeueOnlyInFlight: Requeue backs off only a popped pod; a pod
// the queue does not know is ignored and a queued one keeps its place.
func TestQueueRequeueOnlyInFlight(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	q := NewQueue(clk, time.Second, 10*time.Second)
	q.Requeue("unknown")
	if n := q.Len(); n != 0 {
		t.Fatalf("queue length %d after requeueing an unknown pod, want 0", n)
	}
	q.AddOrUpdate(st.MakePod().Name("p").Obj())
	q.Requeue("p")
	qp := q.pods["p"]
	if qp.where != inActive || qp.Attempts != 0 || q.backoff != 0 {
		t.Errorf("queued pod after Requeue: where %v, attempts %d, backoff count %d; want active, 0, 0", qp.where, qp.Attempts, q.backoff)
	}
}

// TestQueuePriorityChange: a queued pod whose priority changes moves to its
// new place (PR-3); a pod in flight whose priority changes leaves the
// queued ones where they are.
func TestQueuePriorityChange(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	q := NewQueue(clk, time.Second, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i, name := range []string{"a", "b", "c", "d"} {
		q.AddOrUpdate(st.MakePod().Name(name).UID(name).Priority(int32(i + 1)).Obj())
		clk.Step(time.Millisecond)
	}
	pop := func() string { t.Helper(); return popName(ctx, t, q) }
	if got := pop(); got != "d" {
		t.Fatalf("first pop %s, want d", got)
	}
	// d is in flight: its new priority must not move the queued pods.
	q.AddOrUpdate(st.MakePod().Name("d").UID("d").Priority(0).Obj())
	// a, the lowest, becomes the highest.
	q.AddOrUpdate(st.MakePod().Name("a").UID("a").Priority(10).Obj())
	got := []string{pop(), pop(), pop()}
	if diff := cmp.Diff([]string{"a", "c", "b"}, got); diff != "" {
		t.Errorf("pop order after the priority changes (-want +got):\n%s", diff)
	}
}

// popName pops the next pod of q and returns its name.
func popName(ctx context.Context, t *testing.T, q *Queue) string {
	t.Helper()
	qp, err := q.Pop(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return qp.Pod.Name
}
