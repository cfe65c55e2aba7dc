package scheduler

import (
	"container/heap"
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/utils/clock"
)

// QueuedPod is a pod waiting to be scheduled and its history in the queue.
type QueuedPod struct {
	Pod *corev1.Pod
	// Attempts counts failed scheduling cycles; it sets the back-off.
	Attempts int
	// Added is when the pod first entered the queue: its age.
	Added time.Time

	priority     int32
	seq          uint64
	backoffUntil time.Time
	where        place
	index        int
}

type place int

const (
	inActive place = iota
	inBackoff
	inFlight
)

// Queue orders pending pods by priority, then age (PR-3). A pod that failed
// waits out an exponential back-off outside the active heap, so it never
// blocks the pods behind it. It is safe for concurrent use.
type Queue struct {
	clock          clock.Clock
	initial, limit time.Duration

	mu      sync.Mutex
	pods    map[types.UID]*QueuedPod
	active  activeHeap
	closed  bool
	wake    chan struct{}
	backoff int // pods in back-off
	seq     uint64
}

// NewQueue returns an empty queue; clk nil means the real clock.
func NewQueue(clk clock.Clock, initialBackoff, maxBackoff time.Duration) *Queue {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Queue{clock: clk, initial: initialBackoff, limit: maxBackoff,
		pods: map[types.UID]*QueuedPod{}, wake: make(chan struct{}, 1)}
}

// AddOrUpdate queues a new pending pod or refreshes the object of a known
// one without changing its place.
func (q *Queue) AddOrUpdate(pod *corev1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if qp, ok := q.pods[pod.UID]; ok {
		qp.Pod = pod
		if p := corev1helpers.PodPriority(pod); p != qp.priority {
			qp.priority = p
			if qp.where == inActive {
				heap.Fix(&q.active, qp.index)
			}
		}
		return
	}
	q.seq++
	qp := &QueuedPod{Pod: pod, Added: q.clock.Now(), priority: corev1helpers.PodPriority(pod), seq: q.seq}
	q.pushActiveLocked(qp)
}

// Delete forgets a pod (bound, deleted or no longer ours).
func (q *Queue) Delete(uid types.UID) {
	q.mu.Lock()
	defer q.mu.Unlock()
	qp, ok := q.pods[uid]
	if !ok {
		return
	}
	switch qp.where {
	case inActive:
		heap.Remove(&q.active, qp.index)
	case inBackoff:
		q.backoff--
	}
	delete(q.pods, uid)
}

// Done ends the cycle of a popped pod that was scheduled.
func (q *Queue) Done(uid types.UID) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if qp, ok := q.pods[uid]; ok && qp.where == inFlight {
		delete(q.pods, uid)
	}
}

// Requeue puts a popped pod that could not be scheduled into back-off:
// InitialBackoff doubled per failed attempt, at most MaxBackoff (PR-12).
func (q *Queue) Requeue(uid types.UID) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if qp, ok := q.pods[uid]; ok && qp.where == inFlight {
		q.backoffLocked(qp)
	}
}

// AddUnschedulableIfNotPresent puts a popped pod whose cycle failed into
// back-off, as Requeue, with pod (the informer's latest version) as its
// object. A pod the queue no longer knows, because its entry was dropped
// while the cycle ran, is queued again in back-off rather than lost; a pod
// already queued again by an informer event keeps its place.
func (q *Queue) AddUnschedulableIfNotPresent(pod *corev1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	qp, ok := q.pods[pod.UID]
	switch {
	case !ok:
		q.seq++
		qp = &QueuedPod{Pod: pod, Added: q.clock.Now(), priority: corev1helpers.PodPriority(pod), seq: q.seq}
		q.pods[pod.UID] = qp
	case qp.where != inFlight:
		return
	}
	qp.Pod = pod
	qp.priority = corev1helpers.PodPriority(pod)
	q.backoffLocked(qp)
}

func (q *Queue) backoffLocked(qp *QueuedPod) {
	qp.Attempts++
	d := q.initial
	for i := 1; i < qp.Attempts && d < q.limit; i++ {
		d *= 2
	}
	d = min(d, q.limit)
	qp.backoffUntil = q.clock.Now().Add(d)
	qp.where = inBackoff
	q.backoff++
}

// Activate moves a pod out of back-off at once, e.g. when its nomination
// was cleared and it may look elsewhere.
func (q *Queue) Activate(uid types.UID) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if qp, ok := q.pods[uid]; ok && qp.where == inBackoff {
		q.backoff--
		q.pushActiveLocked(qp)
	}
}

// Pop blocks until a pod is ready and returns the most important one. The
// pod stays known to the queue (in flight) until Done or Requeue. What it
// returns is a copy: an informer update of the pod meanwhile (AddOrUpdate)
// changes the queue's entry, not the cycle's.
func (q *Queue) Pop(ctx context.Context) (*QueuedPod, error) {
	for {
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			return nil, ErrQueueClosed
		}
		next := q.flushLocked()
		if q.active.Len() > 0 {
			qp := heap.Pop(&q.active).(*QueuedPod)
			qp.where = inFlight
			out := *qp
			q.mu.Unlock()
			return &out, nil
		}
		q.mu.Unlock()
		wait := time.Second
		if !next.IsZero() {
			wait = min(wait, max(next.Sub(q.clock.Now()), time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-q.wake:
		case <-q.clock.After(wait):
		}
	}
}

// Close wakes Pop callers for good.
func (q *Queue) Close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.signal()
}

// Len counts the pending pods (active, backing off and in flight).
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.pods)
}

// flushLocked moves pods whose back-off expired to the active heap and
// returns the earliest remaining expiry (zero if none).
func (q *Queue) flushLocked() time.Time {
	if q.backoff == 0 {
		return time.Time{}
	}
	now := q.clock.Now()
	var next time.Time
	for _, qp := range q.pods {
		if qp.where != inBackoff {
			continue
		}
		if !qp.backoffUntil.After(now) {
			q.backoff--
			q.pushActiveLocked(qp)
			continue
		}
		if next.IsZero() || qp.backoffUntil.Before(next) {
			next = qp.backoffUntil
		}
	}
	return next
}

func (q *Queue) pushActiveLocked(qp *QueuedPod) {
	qp.where = inActive
	q.pods[qp.Pod.UID] = qp
	heap.Push(&q.active, qp)
	q.signal()
}

func (q *Queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// activeHeap is a max-heap on priority, then the oldest first.
type activeHeap []*QueuedPod

func (h activeHeap) Len() int { return len(h) }
func (h activeHeap) Less(i, j int) bool {
	if h[i].priority != h[j].priority {
		return h[i].priority > h[j].priority
	}
	if !h[i].Added.Equal(h[j].Added) {
		return h[i].Added.Before(h[j].Added)
	}
	return h[i].seq < h[j].seq
}
func (h activeHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *activeHeap) Push(x any) {
	qp := x.(*QueuedPod)
	qp.index = len(*h)
	*h = append(*h, qp)
}
func (h *activeHeap) Pop() any {
	old := *h
	n := len(old)
	qp := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	return qp
}
