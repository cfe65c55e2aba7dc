package controller

import (
	"context"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/podsafe/podsafe/internal/eventlog"
)

// Source components of the controllers' Events: kube-controller-manager's
// names for the controllers podsafe's mirror.
const (
	ComponentReplicaSet    = "replicaset-controller"
	ComponentStatefulSet   = "statefulset-controller"
	ComponentNodeLifecycle = "node-controller"
	ComponentTaintEviction = "taint-eviction-controller"
)

// Reasons of the controllers' Events, as upstream's.
const (
	EventSuccessfulCreate     = "SuccessfulCreate"
	EventSuccessfulDelete     = "SuccessfulDelete"
	EventFailedCreate         = "FailedCreate"
	EventFailedDelete         = "FailedDelete"
	EventNodeNotReady         = "NodeNotReady"
	EventNodeReady            = "NodeReady"
	EventTaintManagerEviction = "TaintManagerEviction"
)

// eventRecorder is one controller's event recorder: client-go's record
// broadcaster, whose EventCorrelator aggregates similar Events and counts
// repeats on the controller's clock, writing core/v1 Events with the
// controller's own clientset, and a recorder per source component (the
// node lifecycle controller speaks as node-controller and as
// taint-eviction-controller). The zero value records nothing until start;
// it stops with start's context. Safe for concurrent use.
type eventRecorder struct {
	mu   sync.Mutex
	ctx  context.Context // start's: once it ends, the broadcaster has stopped
	bc   record.EventBroadcaster
	recs map[string]record.EventRecorder
}

// start starts the broadcaster until ctx ends (the controller's run),
// writing through client.
func (r *eventRecorder) start(ctx context.Context, client kubernetes.Interface, clk clock.PassiveClock) {
	bc := record.NewBroadcaster(record.WithContext(eventlog.Quiet(ctx)), record.WithCorrelatorOptions(record.CorrelatorOptions{Clock: clk}))
	bc.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ctx, r.bc, r.recs = ctx, bc, map[string]record.EventRecorder{}
}

// eventf records an Event on obj from component; nothing before start.
func (r *eventRecorder) eventf(component string, obj runtime.Object, eventType, reason, format string, args ...any) {
	r.mu.Lock()
	if r.bc == nil || r.ctx.Err() != nil { // not started, or stopped
		r.mu.Unlock()
		return
	}
	rec := r.recs[component]
	if rec == nil {
		rec = r.bc.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component})
		r.recs[component] = rec
	}
	r.mu.Unlock()
	rec.Eventf(obj, eventType, reason, format, args...)
}

// nodeRef references a Node as upstream's node controller does in its
// Events: by name, with the name as UID.
func nodeRef(name string) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: name, UID: types.UID(name)}
}

// createdEvent records the outcome of creating a replica, as upstream's
// pod control does on the ReplicaSet.
func (rc *ReplicaSet) createdEvent(set *appsv1.ReplicaSet, created *corev1.Pod, err error) {
	if err != nil {
		rc.events.eventf(ComponentReplicaSet, set, corev1.EventTypeWarning, EventFailedCreate, "Error creating: %v", err)
		return
	}
	rc.events.eventf(ComponentReplicaSet, set, corev1.EventTypeNormal, EventSuccessfulCreate, "Created pod: %v", created.Name)
}

// deletedEvent records the outcome of deleting a replica; a replica
// already gone or replaced is no failure.
func (rc *ReplicaSet) deletedEvent(set *appsv1.ReplicaSet, p *corev1.Pod, err error) {
	switch {
	case err == nil:
		rc.events.eventf(ComponentReplicaSet, set, corev1.EventTypeNormal, EventSuccessfulDelete, "Deleted pod: %v", p.Name)
	case !apierrors.IsNotFound(err) && !apierrors.IsConflict(err):
		rc.events.eventf(ComponentReplicaSet, set, corev1.EventTypeWarning, EventFailedDelete, "Error deleting: %v", err)
	}
}

// petEvent records the outcome of creating or deleting (verb "Create" or
// "Delete") pet name, as upstream's StatefulSet pod control words it. A
// create that meets the old pet, or a delete that finds it gone or
// replaced, records nothing: the next sync sees the truth.
func (pc *Pet) petEvent(set *appsv1.StatefulSet, name, verb string, err error) {
	lower := strings.ToLower(verb)
	switch {
	case err == nil:
		pc.events.eventf(ComponentStatefulSet, set, corev1.EventTypeNormal, "Successful"+verb,
			"%s Pod %s in StatefulSet %s successful", lower, name, set.Name)
	case !apierrors.IsAlreadyExists(err) && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err):
		pc.events.eventf(ComponentStatefulSet, set, corev1.EventTypeWarning, "Failed"+verb,
			"%s Pod %s in StatefulSet %s failed error: %s", lower, name, set.Name, err)
	}
}

// nodeStatusEvent records a node's readiness change on the Node, as
// upstream's RecordNodeStatusChange.
func (nl *NodeLifecycle) nodeStatusEvent(node, status string) {
	nl.events.eventf(ComponentNodeLifecycle, nodeRef(node), corev1.EventTypeNormal, status, "Node %s status is now: %s", node, status)
}

// evictionEvent records, on a pod whose toleration of its node's
// unreachable taint ran out, that it is about to be deleted, as upstream's
// taint eviction controller does.
func (nl *NodeLifecycle) evictionEvent(p *corev1.Pod) {
	nl.events.eventf(ComponentTaintEviction, p, corev1.EventTypeNormal, EventTaintManagerEviction,
		"Marking for deletion Pod %s/%s", p.Namespace, p.Name)
}
