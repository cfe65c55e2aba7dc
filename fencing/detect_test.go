package fencing

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestHeartbeat(t *testing.T) {
	leaseNoRenew := nodeLease("n", t0)
	leaseNoRenew.Spec.RenewTime = nil
	for _, tc := range []struct {
		name  string
		node  *corev1.Node
		lease *coordinationv1.Lease
		want  time.Time
	}{
		{"lease renewal wins", makeNode("n").heartbeat(t0.Add(time.Hour)).obj(), nodeLease("n", t0), t0},
		{"no lease: Ready heart-beat", makeNode("n").heartbeat(t0.Add(time.Minute)).created(t0).obj(), nil, t0.Add(time.Minute)},
		{"lease never renewed: Ready heart-beat", makeNode("n").heartbeat(t0.Add(time.Minute)).obj(), leaseNoRenew, t0.Add(time.Minute)},
		{"nothing: creation time", makeNode("n").created(t0).obj(), nil, t0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := heartbeat(tc.node, tc.lease); !got.Equal(tc.want) {
				t.Errorf("heartbeat = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestStaleTimeline walks a fake clock through the life of one node's
// heart-beat as the controller observes it.
func TestStaleTimeline(t *testing.T) {
	const threshold = 20 * time.Second
	clk := clocktesting.NewFakeClock(t0)
	var obs observation
	known := false
	see := func(beat time.Time) {
		obs = observe(obs, known, beat, clk.Now())
		known = true
	}
	type step struct {
		what    string
		advance time.Duration
		beat    *time.Duration // a beat observed at this step, relative to its time
		want    bool
	}
	// at is a beat d from the fake clock's reading when the step runs.
	at := func(d time.Duration) *time.Duration { return &d }
	for _, s := range []step{
		{what: "first sight of an hour-old beat: a full threshold of grace", beat: at(-time.Hour), want: false},
		{what: "threshold not yet passed", advance: threshold, want: false},
		{what: "threshold passed since the controller first saw it", advance: time.Millisecond, want: true},
		{what: "a renewal from a lagging clock is proof of life", beat: at(-30 * time.Minute), want: false},
		{what: "still alive within the threshold", advance: threshold - time.Millisecond, want: false},
		{what: "lagging node stopped renewing", advance: 2 * time.Millisecond, want: true},
		{what: "a fresh beat", beat: at(0), want: false},
		{what: "fresh beat ages past the threshold", advance: threshold + time.Millisecond, want: true},
		{what: "a beat from a clock running an hour ahead", beat: at(time.Hour), want: false},
		{what: "an hour later the beat is only threshold old", advance: time.Hour, want: false},
		{what: "ahead-clock node that stopped is stale once its beat is old", advance: threshold + time.Millisecond, want: true},
	} {
		clk.Step(s.advance)
		if s.beat != nil {
			see(clk.Now().Add(*s.beat))
		}
		if got := stale(obs, clk.Now(), threshold); got != s.want {
			t.Fatalf("%s: stale = %v, want %v (obs %+v, now %v)", s.what, got, s.want, obs, clk.Now())
		}
	}
}

func TestObserveKeepsFirstSight(t *testing.T) {
	o := observe(observation{}, false, t0, t0.Add(time.Second))
	o2 := observe(o, true, t0, t0.Add(time.Minute))
	if o2 != o {
		t.Errorf("re-observing the same beat moved the observation: %+v -> %+v", o, o2)
	}
	o3 := observe(o2, true, t0.Add(time.Millisecond), t0.Add(time.Minute))
	if !o3.seen.Equal(t0.Add(time.Minute)) {
		t.Errorf("a new beat was not seen now: %+v", o3)
	}
}

func TestCandidate(t *testing.T) {
	const threshold = 20 * time.Second
	now := t0.Add(time.Hour)
	staleObs := observation{beat: t0, seen: t0}
	freshObs := observation{beat: now, seen: now}
	for _, tc := range []struct {
		name string
		node *corev1.Node
		obs  observation
		want candidacy
	}{
		{"fresh", makeNode("n").obj(), freshObs, notCandidate},
		{"stale", makeNode("n").obj(), staleObs, candidateStale},
		{"requested though fresh", makeNode("n").annotate(AnnotationFenceRequest, "").obj(), freshObs, candidateRequested},
		{"requested and stale", makeNode("n").annotate(AnnotationFenceRequest, "hung").obj(), staleObs, candidateRequested},
		{"fenced is done, not a candidate", makeNode("n").fenced(3, "power").annotate(AnnotationFenceRequest, "").obj(), staleObs, notCandidate},
		{"unfenced and stale is a candidate again",
			makeNode("n").condition(FencedCondition, corev1.ConditionFalse, "").obj(), staleObs, candidateStale},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := candidate(tc.node, tc.obs, now, threshold); got != tc.want {
				t.Errorf("candidate = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestJustified(t *testing.T) {
	pet := makePod("web-0").node("n").pet().obj()
	plain := makePod("plain").node("n").obj()
	for _, tc := range []struct {
		name    string
		why     candidacy
		pods    []*corev1.Pod
		want    bool
		wantPod string
	}{
		{name: "empty stale node", why: candidateStale, want: false},
		{name: "stale node with plain pods", why: candidateStale, pods: []*corev1.Pod{plain}, want: false},
		{name: "stale node with a pet", why: candidateStale, pods: []*corev1.Pod{plain, pet}, want: true, wantPod: "web-0"},
		{name: "requested empty node", why: candidateRequested, want: true},
		{name: "requested node with a pet names it", why: candidateRequested, pods: []*corev1.Pod{pet}, want: true, wantPod: "web-0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, pod := justified(tc.why, tc.pods, DefaultPolicy{})
			name := ""
			if pod != nil {
				name = pod.Name
			}
			if got != tc.want || name != tc.wantPod {
				t.Errorf("justified = %v, %q; want %v, %q", got, name, tc.want, tc.wantPod)
			}
		})
	}
}
