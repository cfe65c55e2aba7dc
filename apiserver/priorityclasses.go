package apiserver

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	schedulingv1 "k8s.io/api/scheduling/v1"

	"github.com/podsafe/podsafe/raftstore"
)

// priorityClassCache holds the PriorityClasses, kept by a watch on the
// server's store member, so that admitting a pod reads memory rather than
// listing the store linearizably on every create: kube-apiserver's priority
// admission reads a shared informer's lister the same way.
//
// What a pod's admission sees:
//   - a class the pod names that the cache does not hold is read from the
//     store (linearizable), so a class created before the pod is always
//     found, whichever server created it;
//   - a PriorityClass write through this server returns only once the cache
//     holds its result (cachingStore), so a client that creates, changes or
//     deletes a class and then creates a pod through the same server sees
//     the class as it left it, the global default included;
//   - a write through another server reaches the cache when this server's
//     member applies it, within milliseconds, as a write through another
//     kube-apiserver reaches this one's informers; kube-apiserver promises no
//     more (its lister is not even read-your-writes);
//   - until the cache has listed, and while it lists again after its watch
//     ended, admission reads the store as before.
//
// Safe for concurrent use; the classes it returns are shared and read-only.
type priorityClassCache struct {
	store Store
	log   *slog.Logger
	start sync.Once

	mu     sync.Mutex
	synced bool
	// rv is the resourceVersion the cache reflects: every PriorityClass
	// change up to it.
	rv      uint64
	classes map[string]*schedulingv1.PriorityClass
	// def is the global default class: the lowest value among the classes
	// marked globalDefault, the first by name among equals (nil: none).
	def *schedulingv1.PriorityClass
	// changed is closed and replaced whenever rv or synced changes.
	changed chan struct{}
}

// pcResource is the store resource of PriorityClasses.
var pcResource = storeResource(grPriorityClasses)

// Relist back-off after a failed list or watch.
const (
	pcRelistMin = 10 * time.Millisecond
	pcRelistMax = time.Second
)

// pcWriteWait bounds how long a PriorityClass write waits for the cache to
// hold it: past it the cache is declared stale and lists again.
const pcWriteWait = 5 * time.Second

func newPriorityClassCache(store Store, log *slog.Logger) *priorityClassCache {
	return &priorityClassCache{store: store, log: log, changed: make(chan struct{})}
}

// ensureStarted starts the cache's list-and-watch loop, once; it runs until
// ctx ends.
func (c *priorityClassCache) ensureStarted(ctx context.Context) {
	c.start.Do(func() { go c.run(ctx) })
}

// run lists the classes, then follows the watch from the list's
// resourceVersion; when the watch ends (window overflow, snapshot restore,
// store closed) it lists again.
func (c *priorityClassCache) run(ctx context.Context) {
	relistLoop(ctx, c.relist)
	c.setUnsynced()
}

// relist lists the classes and follows the watch until it ends; it reports
// whether it got as far as watching.
func (c *priorityClassCache) relist(ctx context.Context) bool {
	objs, rev, err := c.store.List(ctx, pcResource, "")
	if err != nil {
		c.log.Debug("listing priority classes for admission", "err", err)
		return false
	}
	ch, err := c.store.Watch(ctx, pcResource, rev)
	if err != nil {
		c.log.Debug("watching priority classes for admission", "err", err)
		return false
	}
	classes := make(map[string]*schedulingv1.PriorityClass, len(objs))
	for _, o := range objs {
		if pc := decodePriorityClass(o.Data); pc != nil {
			classes[pc.Name] = pc
		}
	}
	c.mu.Lock()
	c.classes, c.rv, c.synced = classes, rev, true
	c.updateDefaultLocked()
	c.notifyLocked()
	c.mu.Unlock()
	for ev := range ch {
		pc := decodePriorityClass(ev.Object.Data)
		c.mu.Lock()
		switch {
		case ev.Type == raftstore.Deleted:
			delete(c.classes, ev.Object.Key.Name)
		case pc != nil:
			c.classes[ev.Object.Key.Name] = pc
		}
		c.rv = max(c.rv, ev.Object.RV)
		c.updateDefaultLocked()
		c.notifyLocked()
		c.mu.Unlock()
	}
	c.setUnsynced()
	return true
}

func (c *priorityClassCache) setUnsynced() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.synced {
		c.synced = false
		c.notifyLocked()
	}
}

func (c *priorityClassCache) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *priorityClassCache) updateDefaultLocked() {
	c.def = nil
	for _, pc := range c.classes {
		if pc.GlobalDefault && (c.def == nil || pc.Value < c.def.Value || pc.Value == c.def.Value && pc.Name < c.def.Name) {
			c.def = pc
		}
	}
}

// decodePriorityClass decodes a stored class; nil if it does not decode
// (the store read path reports such an object as an internal error).
func decodePriorityClass(data []byte) *schedulingv1.PriorityClass {
	pc := &schedulingv1.PriorityClass{}
	if err := json.Unmarshal(data, pc); err != nil {
		return nil
	}
	return pc
}

// get returns the class named name (nil when the cache holds none) and
// whether the cache could answer at all.
func (c *priorityClassCache) get(name string) (*schedulingv1.PriorityClass, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.classes[name], c.synced
}

// globalDefault returns the global default class (nil when there is none)
// and whether the cache could answer at all.
func (c *priorityClassCache) globalDefault() (*schedulingv1.PriorityClass, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.def, c.synced
}

// waitFor returns once the cache reflects rv, or is not synced (admission
// then reads the store, which reflects it), or ctx ends. A cache that does
// not catch up within pcWriteWait is behind for a reason of its own: it is
// marked stale (admission reads the store) until it lists again.
func (c *priorityClassCache) waitFor(ctx context.Context, rv uint64) {
	timeout := time.NewTimer(pcWriteWait)
	defer timeout.Stop()
	for {
		c.mu.Lock()
		if !c.synced || c.rv >= rv {
			c.mu.Unlock()
			return
		}
		changed := c.changed
		c.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return
		case <-timeout.C:
			c.log.Warn("priority class cache fell behind a write through this server; reading the store until it lists again", "rv", rv)
			c.setUnsynced()
			return
		}
	}
}

// cachingStore is the Store the server reads and writes through: writes of
// PriorityClasses return once the server's class cache holds them.
type cachingStore struct {
	Store
	classes *priorityClassCache
}

// Create creates the object; see cachingStore.
func (s cachingStore) Create(ctx context.Context, key raftstore.Key, data []byte) (raftstore.Object, error) {
	obj, err := s.Store.Create(ctx, key, data)
	s.written(ctx, key, obj, err)
	return obj, err
}

// Update updates the object; see cachingStore.
func (s cachingStore) Update(ctx context.Context, key raftstore.Key, data []byte, pre raftstore.Preconditions) (raftstore.Object, error) {
	obj, err := s.Store.Update(ctx, key, data, pre)
	s.written(ctx, key, obj, err)
	return obj, err
}

// Delete deletes the object; see cachingStore.
func (s cachingStore) Delete(ctx context.Context, key raftstore.Key, pre raftstore.Preconditions) (raftstore.Object, error) {
	obj, err := s.Store.Delete(ctx, key, pre)
	s.written(ctx, key, obj, err)
	return obj, err
}

func (s cachingStore) written(ctx context.Context, key raftstore.Key, obj raftstore.Object, err error) {
	if err == nil && key.Resource == pcResource {
		s.classes.waitFor(ctx, obj.RV)
	}
}

// relistLoop runs relist (a list, then the watch from the list's
// resourceVersion, until it ends) until ctx ends: at once after a relist
// that got going, after a doubling back-off (pcRelistMin to pcRelistMax)
// after one that failed. The server's watch-fed caches share it.
func relistLoop(ctx context.Context, relist func(context.Context) bool) {
	backoff := pcRelistMin
	for ctx.Err() == nil {
		if relist(ctx) {
			backoff = pcRelistMin
			continue
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, pcRelistMax)
	}
}
