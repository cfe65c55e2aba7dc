package fencing

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// Retry back-off of a node whose sync failed, on the controller's clock. The
// periodic resync retries sooner than the cap anyway.
const (
	retryBaseDelay = 100 * time.Millisecond
	retryMaxDelay  = 10 * time.Second
)

// nodeQueue is a rate-limited work queue of node names drained by a fixed
// number of workers. The work queue never hands one name to two workers at
// once, so a sync owns its node for the duration of the call: one node is
// never fenced twice concurrently.
type nodeQueue struct {
	q    workqueue.TypedRateLimitingInterface[string]
	sync func(ctx context.Context, node string) error
	log  func(node string, err error)
}

func newNodeQueue(clk clock.WithTicker, sync func(context.Context, string) error, log func(string, error)) *nodeQueue {
	rl := workqueue.NewTypedItemExponentialFailureRateLimiter[string](retryBaseDelay, retryMaxDelay)
	return &nodeQueue{
		q:    workqueue.NewTypedRateLimitingQueueWithConfig(rl, workqueue.TypedRateLimitingQueueConfig[string]{Clock: clk}),
		sync: sync,
		log:  log,
	}
}

// add queues node.
func (nq *nodeQueue) add(node string) {
	if node != "" {
		nq.q.Add(node)
	}
}

// run drains the queue with workers goroutines until ctx ends, then shuts
// the queue down and waits for the workers.
func (nq *nodeQueue) run(ctx context.Context, workers int) {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for nq.next(ctx) {
			}
		})
	}
	<-ctx.Done()
	nq.q.ShutDown()
	wg.Wait()
}

// next processes one node; false once the queue is shut down.
func (nq *nodeQueue) next(ctx context.Context) bool {
	node, quit := nq.q.Get()
	if quit {
		return false
	}
	defer nq.q.Done(node)
	if err := nq.sync(ctx, node); err != nil {
		if ctx.Err() == nil {
			nq.log(node, err)
		}
		nq.q.AddRateLimited(node)
		return true
	}
	nq.q.Forget(node)
	return true
}
