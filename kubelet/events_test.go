package kubelet

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestKubeletEvents: the kubelet's Events carry upstream's reasons and
// wording, reference the container by field path, come from component
// kubelet on the node, and a repeated one is counted in one Event.
func TestKubeletEvents(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := fake.NewClientset()
	k, err := New(Config{Client: cs, NodeName: "node-1", Runtime: NewSimRuntime("node-1", nil, nil)})
	if err != nil {
		t.Fatal(err)
	}
	k.ctx = ctx
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "u1"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways,
			InitContainers: []corev1.Container{{Name: "init", Image: "busybox", ImagePullPolicy: corev1.PullIfNotPresent}},
			Containers:     []corev1.Container{{Name: "app", Image: "nginx:latest", ImagePullPolicy: corev1.PullAlways}}}}
	w := newPodWorker(k, pod.UID, pod.Namespace, pod.Name, nil)
	w.pod = pod
	initC := &ctrState{spec: &pod.Spec.InitContainers[0], init: true}
	app := &ctrState{spec: &pod.Spec.Containers[0]}

	w.imageEvents(initC)
	w.startEvents(initC, nil)
	w.imageEvents(app)
	w.startEvents(app, errors.New("no room"))
	w.unhealthyEvent(app, ProbeLiveness)
	w.killingEvent(app, ReasonLiveness)
	w.backOffEvent(app)
	w.backOffEvent(app)
	w.killingEvent(app, "")
	k.evictedEvent(pod)

	want := []string{
		"Normal Pulled spec.initContainers{init} x1: Container image \"busybox\" already present on machine and can be accessed by the pod",
		"Normal Created spec.initContainers{init} x1: Container created",
		"Normal Started spec.initContainers{init} x1: Container started",
		"Normal Pulling spec.containers{app} x1: Pulling image \"nginx:latest\"",
		"Normal Pulled spec.containers{app} x1: Successfully pulled image \"nginx:latest\" in 0s (0s including waiting). Image size: 0 bytes.",
		"Warning Failed spec.containers{app} x1: Error: no room",
		"Warning Unhealthy spec.containers{app} x1: Liveness probe failed: simulated container app failed its liveness probe",
		"Normal Killing spec.containers{app} x1: Container app failed liveness probe, will be restarted",
		"Warning BackOff spec.containers{app} x2: Back-off restarting failed container app in pod web_default(u1)",
		"Normal Killing spec.containers{app} x1: Stopping container app",
		"Warning Evicted  x1: The node was low on resource: memory.",
	}
	sort.Strings(want)
	// Events are written asynchronously, and the two BackOffs become one
	// Event counted twice: poll until the list settles.
	var got []string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		evs, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, e := range evs.Items {
			if e.Source.Component != "kubelet" || e.Source.Host != "node-1" || e.ReportingController != "kubelet" || e.InvolvedObject.UID != "u1" {
				t.Fatalf("event %s from %+v on %+v, want kubelet on node-1, on the pod", e.Reason, e.Source, e.InvolvedObject)
			}
			got = append(got, fmt.Sprintf("%s %s %s x%d: %s", e.Type, e.Reason, e.InvolvedObject.FieldPath, e.Count, e.Message))
		}
		sort.Strings(got)
		if cmp.Equal(want, got) {
			break
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	// Once Run's context ends the recorder is gone: nothing more is written.
	cancel()
	time.Sleep(50 * time.Millisecond)
	w.killingEvent(initC, "")
	time.Sleep(100 * time.Millisecond)
	evs, err := cs.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if e.InvolvedObject.FieldPath == "spec.initContainers{init}" && e.Reason == EventKilling {
			t.Errorf("an Event recorded after the kubelet stopped was written: %+v", e)
		}
	}
}

// TestKubeletEventsNeedRun: a kubelet not running has no recorder, and an
// orphan's containers (no pod object) get no Event.
func TestKubeletEventsNeedRun(t *testing.T) {
	cs := fake.NewClientset()
	k, err := New(Config{Client: cs, NodeName: "node-1", Runtime: NewSimRuntime("node-1", nil, nil)})
	if err != nil {
		t.Fatal(err)
	}
	if k.recorder() != nil {
		t.Error("a kubelet that never ran has a recorder")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	k.ctx = ctx
	w := newPodWorker(k, "u1", "default", "gone", nil)
	w.killingEvent(&ctrState{spec: &corev1.Container{Name: "app"}}, "")
	w.backOffEvent(&ctrState{spec: &corev1.Container{Name: "app"}})
	time.Sleep(100 * time.Millisecond)
	if n := len(cs.Actions()); n != 0 {
		t.Errorf("%d API calls for an orphan's container, want none: %v", n, cs.Actions())
	}
}

// countingSink counts the Events written through it.
type countingSink struct{ n atomic.Int64 }

func (s *countingSink) Create(e *corev1.Event) (*corev1.Event, error) { s.n.Add(1); return e, nil }
func (s *countingSink) Update(e *corev1.Event) (*corev1.Event, error) { s.n.Add(1); return e, nil }
func (s *countingSink) Patch(e *corev1.Event, _ []byte) (*corev1.Event, error) {
	s.n.Add(1)
	return e, nil
}

// TestEventRateLimit: the kubelet writes its Events at most at
// EventRecordQPS per second of its clock after a burst of EventBurst, as
// upstream's --event-qps and --event-burst, and a write still waiting when
// the kubelet stops is dropped.
func TestEventRateLimit(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	ctx, cancel := context.WithCancel(context.Background())
	inner := &countingSink{}
	s := &limitedSink{EventSink: inner, ctx: ctx, clock: clk, lim: rate.NewLimiter(2, 3)}
	done := make(chan error, 10)
	for range 5 {
		go func() { _, err := s.Create(&corev1.Event{}); done <- err }()
	}
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if got := inner.n.Load(); got != 3 {
		t.Fatalf("%d Events written at once, want the burst of 3", got)
	}
	// Two wait; half a second of the kubelet's clock lets one through.
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	clk.Step(500 * time.Millisecond)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := inner.n.Load(); got != 4 {
		t.Fatalf("%d Events written after 0.5 s at 2/s, want 4", got)
	}
	cancel()
	if err := <-done; !errors.Is(err, errEventsStopped) {
		t.Fatalf("a write waiting when the kubelet stopped returned %v, want %v", err, errEventsStopped)
	}
	if got := inner.n.Load(); got != 4 {
		t.Fatalf("%d Events written, want 4: the stopped kubelet's wait must not write", got)
	}
}

// TestEventLimitDefaults: the limits default to upstream's, and a negative
// QPS lifts them.
func TestEventLimitDefaults(t *testing.T) {
	c := Config{}
	c.setDefaults()
	if c.EventRecordQPS != 50 || c.EventBurst != 100 {
		t.Errorf("defaults %v/%d, want upstream's 50/100", c.EventRecordQPS, c.EventBurst)
	}
	c = Config{EventBurst: -1}
	c.Client, c.NodeName, c.Runtime = fake.NewClientset(), "n1", NewSimRuntime("n1", nil, nil)
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "EventBurst") {
		t.Errorf("a negative EventBurst: %v", err)
	}
}
