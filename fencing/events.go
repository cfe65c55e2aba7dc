package fencing

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/podsafe/podsafe/internal/eventlog"
)

// eventRecorder is the controller's event recorder: client-go's record
// broadcaster, whose EventCorrelator aggregates similar Events and counts
// repeats on the controller's clock, writing core/v1 Events with the
// controller's own clientset as component fencing-controller. The zero
// value records nothing until start; it stops with start's context. Safe
// for concurrent use.
type eventRecorder struct {
	mu  sync.Mutex
	ctx context.Context // start's: once it ends, the broadcaster has stopped
	rec record.EventRecorder
}

// start starts the broadcaster until ctx ends (the controller's run),
// writing through client.
func (r *eventRecorder) start(ctx context.Context, client kubernetes.Interface, clk clock.PassiveClock) {
	bc := record.NewBroadcaster(record.WithContext(eventlog.Quiet(ctx)), record.WithCorrelatorOptions(record.CorrelatorOptions{Clock: clk}))
	bc.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ctx, r.rec = ctx, bc.NewRecorder(scheme.Scheme, corev1.EventSource{Component: eventSource})
}

// event records an Event on ref, best effort: a lost Event must not stop
// a fence. A Node's Events go to the default namespace, as in Kubernetes.
func (c *Controller) event(ref corev1.ObjectReference, eventType, reason, msg string) {
	c.events.mu.Lock()
	rec := c.events.rec
	if rec != nil && c.events.ctx.Err() != nil {
		rec = nil // the broadcaster stopped with the controller's run
	}
	c.events.mu.Unlock()
	if rec == nil {
		c.log.Info("event not recorded: the controller is not running", "reason", reason, "object", ref.Name)
		return
	}
	rec.Event(&ref, eventType, reason, msg)
}
