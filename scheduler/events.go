package scheduler

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record"

	"github.com/podsafe/podsafe/internal/eventlog"
)

// Reasons and actions of the scheduler's Events, as kube-scheduler's.
const (
	reasonScheduled        = "Scheduled"
	reasonFailedScheduling = "FailedScheduling"
	reasonPreempted        = "Preempted"
	actionBinding          = "Binding"
	actionScheduling       = "Scheduling"
	actionPreempting       = "Preempting"
)

// schedEvents records the scheduler's Events through client-go's event
// machinery: an events.EventRecorder per scheduler name (kube-scheduler's
// recorder per profile, whose reporting controller is the profile's
// name), all fed by one broadcaster that correlates them (aggregation,
// series counts, spam filter) and writes them with the scheduler's own
// clientset. kube-scheduler's events.NewEventBroadcasterAdapter writes
// events.k8s.io Events when the API serves them and core Events through
// record.NewEventRecorderAdapter otherwise; podsafe's API server keeps
// events.k8s.io Events apart from core ones, where kube-apiserver stores
// both as one, so the scheduler takes the adapter's core path: the one
// kubectl describe reads on both.
//
// The broadcaster starts with the first Event and stops when the context
// it was started with ends (the scheduler's Run context); an Event
// recorded after that starts a new one. Safe for concurrent use.
type schedEvents struct {
	mu        sync.Mutex
	ctx       context.Context
	bc        record.EventBroadcaster
	recorders map[string]events.EventRecorder
}

// recorder returns the recorder of schedulerName, starting the
// broadcaster on ctx, writing through client, when none runs; nil when ctx
// has ended.
func (e *schedEvents) recorder(ctx context.Context, client kubernetes.Interface, schedulerName string) events.EventRecorder {
	if ctx.Err() != nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.bc == nil || e.ctx.Err() != nil {
		e.ctx = ctx
		e.bc = record.NewBroadcaster(record.WithContext(eventlog.Quiet(ctx)))
		e.bc.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
		e.recorders = map[string]events.EventRecorder{}
	}
	r := e.recorders[schedulerName]
	if r == nil {
		r = record.NewEventRecorderAdapter(e.bc.NewRecorder(scheme.Scheme, corev1.EventSource{Component: schedulerName}))
		e.recorders[schedulerName] = r
	}
	return r
}

// eventf records an Event on regarding (related: the other pod involved,
// or nil) under the name of the scheduler that serves pod, kube-scheduler's
// profile: the pod's spec.schedulerName, which the API defaults.
func (e *schedEvents) eventf(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, regarding, related runtime.Object, eventType, reason, action, note string, args ...any) {
	name := pod.Spec.SchedulerName
	if name == "" {
		name = DefaultSchedulerName
	}
	if r := e.recorder(ctx, client, name); r != nil {
		r.Eventf(regarding, related, eventType, reason, action, note, args...)
	}
}

// truncateNote cuts an Event's note to the length the API accepts, as
// kube-scheduler's truncateMessage does.
func truncateNote(msg string) string {
	const suffix = " ..."
	if len(msg) <= noteLengthLimit {
		return msg
	}
	return msg[:noteLengthLimit-len(suffix)] + suffix
}
