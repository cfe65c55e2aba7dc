package controller

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/pingcap/failpoint"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/podsafe/podsafe/internal/fpctx"
)

// Retry back-off of a key whose sync failed, on the controller's clock.
const (
	retryBaseDelay = 100 * time.Millisecond
	retryMaxDelay  = 10 * time.Second
)

// keyQueue is a rate-limited work queue of object keys ("namespace/name")
// drained by a fixed number of workers calling one sync function. A key is
// never synced by two workers at once, so a sync function may assume it
// owns its object for the duration of the call.
type keyQueue struct {
	// fp is the context the controller's failpoint markers see: its
	// identity, fpctx.Controller(name).
	fp    context.Context
	name  string
	q     workqueue.TypedRateLimitingInterface[string]
	sync  func(ctx context.Context, key string) error
	log   *slog.Logger
	clock clock.WithTicker
}

// newKeyQueue builds a queue whose retry delays and AddAfter run on clk.
func newKeyQueue(name string, clk clock.WithTicker, log *slog.Logger, sync func(ctx context.Context, key string) error) *keyQueue {
	rl := workqueue.NewTypedItemExponentialFailureRateLimiter[string](retryBaseDelay, retryMaxDelay)
	return &keyQueue{
		fp:    fpctx.For(fpctx.Controller(name)),
		name:  name,
		q:     workqueue.NewTypedRateLimitingQueueWithConfig(rl, workqueue.TypedRateLimitingQueueConfig[string]{Name: "", Clock: clk}),
		sync:  sync,
		log:   log,
		clock: clk,
	}
}

// add queues key.
func (kq *keyQueue) add(key string) { kq.q.Add(key) }

// addAfter queues key after d of the controller's clock.
func (kq *keyQueue) addAfter(key string, d time.Duration) { kq.q.AddAfter(key, d) }

// addObj queues the key of an informer object (tombstones included).
func (kq *keyQueue) addObj(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		kq.log.Warn("object without a key", "queue", kq.name, "err", err)
		return
	}
	kq.q.Add(key)
}

// run drains the queue with workers goroutines until ctx ends, then shuts
// the queue down and waits for the workers.
func (kq *keyQueue) run(ctx context.Context, workers int) {
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for kq.next(ctx) {
			}
		}()
	}
	<-ctx.Done()
	kq.q.ShutDown()
	wg.Wait()
}

// next processes one key; false once the queue is shut down.
func (kq *keyQueue) next(ctx context.Context) bool {
	key, quit := kq.q.Get()
	if quit {
		return false
	}
	defer kq.q.Done(key)
	// Failpoint syncDelay: a controller that is slow to act on what it saw.
	failpoint.InjectContext(kq.fp, "syncDelay", func() {})
	if err := kq.sync(ctx, key); err != nil {
		if ctx.Err() == nil {
			kq.log.Debug("sync failed, retrying", "queue", kq.name, "key", key, "err", err)
		}
		kq.q.AddRateLimited(key)
		return true
	}
	kq.q.Forget(key)
	return true
}

// handlerFuncs returns informer handlers that queue the object's own key on
// every add, update and delete.
func (kq *keyQueue) handlerFuncs() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    kq.addObj,
		UpdateFunc: func(_, obj any) { kq.addObj(obj) },
		DeleteFunc: kq.addObj,
	}
}

// waitForSync waits until every informer has synced or ctx ends.
func waitForSync(ctx context.Context, name string, synced ...cache.InformerSynced) error {
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("%s: waiting for informer caches: %w", name, context.Cause(ctx))
	}
	return nil
}

// addHandler registers h on informer; registration fails only on a stopped
// informer, which a controller never hands in.
func addHandler(informer cache.SharedIndexInformer, h cache.ResourceEventHandler) error {
	if _, err := informer.AddEventHandler(h); err != nil {
		return fmt.Errorf("registering event handler: %w", err)
	}
	return nil
}
