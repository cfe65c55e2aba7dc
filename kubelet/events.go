package kubelet

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/podsafe/podsafe/internal/eventlog"
)

// Reasons of the kubelet's Events, as upstream's pkg/kubelet/events.
const (
	EventPulling   = "Pulling"
	EventPulled    = "Pulled"
	EventCreated   = "Created"
	EventStarted   = "Started"
	EventFailed    = "Failed"
	EventKilling   = "Killing"
	EventBackOff   = "BackOff"
	EventUnhealthy = "Unhealthy"
	EventEvicted   = ReasonEvicted
)

// evictedMessage is the eviction manager's message on an evicted pod.
const evictedMessage = "The node was low on resource: memory."

// EventComponent is the source component of the kubelet's Events.
const EventComponent = "kubelet"

// kubeletEvents is the kubelet's event recorder: client-go's record
// broadcaster, whose EventCorrelator aggregates similar Events, counts
// repeats in one Event and filters spam on the kubelet's clock, writing
// core/v1 Events with the kubelet's own clientset, source kubelet on the
// node. One per kubelet, as upstream; it starts with the kubelet's first
// Event (a node that runs nothing pays nothing) and stops with the
// context of Run.
type kubeletEvents struct {
	mu  sync.Mutex
	ctx context.Context // the run rec's broadcaster stops with
	rec record.EventRecorder
}

// recorder returns the kubelet's recorder, starting its broadcaster on the
// first call; nil before Run.
func (k *Kubelet) recorder() record.EventRecorder {
	k.events.mu.Lock()
	defer k.events.mu.Unlock()
	k.mu.Lock()
	ctx := k.ctx
	k.mu.Unlock()
	if ctx == nil || ctx.Err() != nil {
		return nil // before Run, or after: the broadcaster stopped with it
	}
	if k.events.rec != nil && k.events.ctx == ctx {
		return k.events.rec
	}
	bc := record.NewBroadcaster(record.WithContext(eventlog.Quiet(ctx)),
		record.WithCorrelatorOptions(record.CorrelatorOptions{Clock: k.clock}))
	var sink record.EventSink = &typedcorev1.EventSinkImpl{Interface: k.cfg.Client.CoreV1().Events("")}
	if k.cfg.EventRecordQPS > 0 {
		sink = &limitedSink{EventSink: sink, ctx: ctx, clock: k.clock,
			lim: rate.NewLimiter(rate.Limit(k.cfg.EventRecordQPS), max(1, k.cfg.EventBurst))}
	}
	bc.StartRecordingToSink(sink)
	k.events.ctx = ctx
	k.events.rec = bc.NewRecorder(scheme.Scheme, corev1.EventSource{Component: EventComponent, Host: k.cfg.NodeName})
	return k.events.rec
}

// limitedSink writes Events at most at its limiter's rate on the kubelet's
// clock, as upstream's kubelet writes them with a client whose QPS and
// burst are --event-qps and --event-burst. While it waits, the recorder's
// queue fills, and the broadcaster drops what does not fit.
type limitedSink struct {
	record.EventSink
	ctx   context.Context
	clock clock.WithTicker
	lim   *rate.Limiter
}

// errEventsStopped is a write refused because the kubelet stopped while it
// waited for the limiter.
var errEventsStopped = errors.New("kubelet stopped: event not written")

// wait takes one token, waiting in clock time.
func (s *limitedSink) wait() error {
	now := s.clock.Now()
	r := s.lim.ReserveN(now, 1)
	if !r.OK() {
		return fmt.Errorf("event rate limiter refused a write (burst %d)", s.lim.Burst())
	}
	d := r.DelayFrom(now)
	if d <= 0 {
		return nil
	}
	t := s.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-s.ctx.Done():
		r.CancelAt(s.clock.Now())
		return errEventsStopped
	}
}

func (s *limitedSink) Create(e *corev1.Event) (*corev1.Event, error) {
	if err := s.wait(); err != nil {
		return nil, err
	}
	return s.EventSink.Create(e)
}

func (s *limitedSink) Update(e *corev1.Event) (*corev1.Event, error) {
	if err := s.wait(); err != nil {
		return nil, err
	}
	return s.EventSink.Update(e)
}

func (s *limitedSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	if err := s.wait(); err != nil {
		return nil, err
	}
	return s.EventSink.Patch(e, data)
}

// event records an Event on obj (a pod, or a container's reference).
func (k *Kubelet) event(obj runtime.Object, eventType, reason, format string, args ...any) {
	if r := k.recorder(); r != nil {
		r.Eventf(obj, eventType, reason, format, args...)
	}
}

// containerRef references container c of pod as upstream's
// GenerateContainerRef does: the pod, with the container's field path.
func containerRef(pod *corev1.Pod, c *corev1.Container, init bool) *corev1.ObjectReference {
	path := fmt.Sprintf("spec.containers{%s}", c.Name)
	if init {
		path = fmt.Sprintf("spec.initContainers{%s}", c.Name)
	}
	return &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name,
		UID: pod.UID, ResourceVersion: pod.ResourceVersion, FieldPath: path}
}

// containerEvent records an Event on one of the worker's containers; none
// for a pod never seen (an orphan's containers).
func (w *podWorker) containerEvent(s *ctrState, eventType, reason, format string, args ...any) {
	if w.pod == nil || s.spec == nil {
		return
	}
	w.k.event(containerRef(w.pod, s.spec, s.init), eventType, reason, format, args...)
}

// imageEvents records what the kubelet's image manager says before a
// container starts. Simulated images are always on the node: under
// IfNotPresent and Never the image is present (upstream's Pulled, with
// KubeletEnsureSecretPulledImages's wording, on by default, for an image
// that needs no credentials); under Always the kubelet pulls anyway, and a
// simulated pull takes no time.
func (w *podWorker) imageEvents(s *ctrState) {
	image := s.spec.Image
	if s.spec.ImagePullPolicy != corev1.PullAlways {
		w.containerEvent(s, corev1.EventTypeNormal, EventPulled, "Container image %q already present on machine and can be accessed by the pod", image)
		return
	}
	w.containerEvent(s, corev1.EventTypeNormal, EventPulling, "Pulling image %q", image)
	w.containerEvent(s, corev1.EventTypeNormal, EventPulled, "Successfully pulled image %q in 0s (0s including waiting). Image size: 0 bytes.", image)
}

// startEvents records a container's start: Created and Started, or
// Failed with the runtime's error.
func (w *podWorker) startEvents(s *ctrState, err error) {
	if err != nil {
		w.containerEvent(s, corev1.EventTypeWarning, EventFailed, "Error: %v", err)
		return
	}
	w.containerEvent(s, corev1.EventTypeNormal, EventCreated, "Container created")
	w.containerEvent(s, corev1.EventTypeNormal, EventStarted, "Container started")
}

// backOffEvent records that a failed container waits out its restart
// back-off, as upstream's doBackOff does on every sync that finds it
// waiting (the correlator folds them).
func (w *podWorker) backOffEvent(s *ctrState) {
	if w.pod == nil || s.spec == nil {
		return
	}
	w.containerEvent(s, corev1.EventTypeWarning, EventBackOff, "Back-off restarting failed container %s in pod %s_%s(%s)",
		s.spec.Name, w.pod.Name, w.pod.Namespace, w.pod.UID)
}

// probeKindNames are the probe types as upstream's prober names them in
// its Events.
var probeKindNames = map[ProbeKind]string{ProbeLiveness: "Liveness", ProbeReadiness: "Readiness", ProbeStartup: "Startup"}

// unhealthyEvent records a failed probe, each failure, as upstream's prober
// does. Simulated probes have no output; the note says which probe failed.
func (w *podWorker) unhealthyEvent(s *ctrState, kind ProbeKind) {
	w.containerEvent(s, corev1.EventTypeWarning, EventUnhealthy, "%s probe failed: simulated container %s failed its %s probe",
		probeKindNames[kind], s.spec.Name, kind)
}

// killingEvent records a container's kill: the pod's termination
// ("Stopping container"), or a failed liveness or startup probe.
func (w *podWorker) killingEvent(s *ctrState, reason KillReason) {
	if w.pod == nil || s.spec == nil {
		return
	}
	msg := fmt.Sprintf("Stopping container %s", s.spec.Name)
	switch reason {
	case ReasonLiveness:
		msg = fmt.Sprintf("Container %s failed liveness probe", s.spec.Name)
	case ReasonStartupProbe:
		msg = fmt.Sprintf("Container %s failed startup probe", s.spec.Name)
	}
	if (reason == ReasonLiveness || reason == ReasonStartupProbe) && w.pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		msg += ", will be restarted"
	}
	w.containerEvent(s, corev1.EventTypeNormal, EventKilling, "%s", msg)
}

// evictedEvent records the eviction manager's Warning Evicted on pod, with
// the message its status gets.
func (k *Kubelet) evictedEvent(pod *corev1.Pod) {
	if pod == nil {
		return
	}
	k.event(pod, corev1.EventTypeWarning, EventEvicted, "%s", evictedMessage)
}

// evictPod is the newest version of the worker's pod, for its Evicted
// Event.
func (w *podWorker) evictPod() *corev1.Pod {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.latest
}
