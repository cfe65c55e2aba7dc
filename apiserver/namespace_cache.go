package apiserver

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsafe/podsafe/raftstore"
)

// namespaceCache holds the phase of every Namespace, kept by a watch on the
// server's store member, so that NamespaceLifecycle admission reads memory
// rather than the store on every create, as kube-apiserver's admission reads
// a shared informer's lister. What admission does with it (see
// admitNamespaceLifecycle) follows upstream: a namespace the cache does not
// hold is read from the store before a create is refused, and a namespace
// this server marked terminating is read from the store while the cache
// may still say Active.
//
// Safe for concurrent use.
type namespaceCache struct {
	store Store
	log   *slog.Logger
	start sync.Once

	mu     sync.Mutex
	synced bool
	phases map[string]corev1.NamespacePhase
	// deleted are the namespaces this server marked terminating, with
	// when: upstream's forceLiveLookupCache.
	deleted map[string]time.Time
}

// nsResource is the store resource of Namespaces.
var nsResource = storeResource(grNamespaces)

// forceLiveLookupTTL is how long after marking a namespace terminating the
// server trusts the store over an Active cache entry (upstream's 30 s).
const forceLiveLookupTTL = 30 * time.Second

func newNamespaceCache(store Store, log *slog.Logger) *namespaceCache {
	return &namespaceCache{store: store, log: log, phases: map[string]corev1.NamespacePhase{}, deleted: map[string]time.Time{}}
}

// ensureStarted starts the list-and-watch loop, once; it runs until ctx
// ends.
func (c *namespaceCache) ensureStarted(ctx context.Context) {
	c.start.Do(func() { go c.run(ctx) })
}

// run lists the namespaces, then follows the watch; when the watch ends it
// lists again, backing off after failures.
func (c *namespaceCache) run(ctx context.Context) {
	relistLoop(ctx, c.relist)
	c.setSynced(false)
}

// relist lists and follows the watch until it ends; it reports whether it
// got as far as watching.
func (c *namespaceCache) relist(ctx context.Context) bool {
	objs, rev, err := c.store.List(ctx, nsResource, "")
	if err != nil {
		c.log.Debug("listing namespaces for admission", "err", err)
		return false
	}
	ch, err := c.store.Watch(ctx, nsResource, rev)
	if err != nil {
		c.log.Debug("watching namespaces for admission", "err", err)
		return false
	}
	phases := make(map[string]corev1.NamespacePhase, len(objs))
	for _, o := range objs {
		phases[o.Key.Name] = namespacePhase(o.Data)
	}
	c.mu.Lock()
	c.phases, c.synced = phases, true
	c.mu.Unlock()
	for ev := range ch {
		c.mu.Lock()
		if ev.Type == raftstore.Deleted {
			delete(c.phases, ev.Object.Key.Name)
		} else {
			c.phases[ev.Object.Key.Name] = namespacePhase(ev.Object.Data)
		}
		c.mu.Unlock()
	}
	c.setSynced(false)
	return true
}

func (c *namespaceCache) setSynced(v bool) {
	c.mu.Lock()
	c.synced = v
	c.mu.Unlock()
}

// namespacePhase is a stored namespace's phase (Active when it does not
// decode: the read path reports such an object itself).
func namespacePhase(data []byte) corev1.NamespacePhase {
	ns := &corev1.Namespace{}
	if err := json.Unmarshal(data, ns); err != nil || ns.Status.Phase == "" {
		return corev1.NamespaceActive
	}
	return ns.Status.Phase
}

// phase returns the cached phase of namespace name, whether the cache holds
// it, and whether the cache could answer at all.
func (c *namespaceCache) phase(name string) (phase corev1.NamespacePhase, found, synced bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	phase, found = c.phases[name]
	return phase, found, c.synced
}

// markDeleted records that this server marked name terminating at now.
func (c *namespaceCache) markDeleted(name string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for n, at := range c.deleted {
		if now.Sub(at) > forceLiveLookupTTL {
			delete(c.deleted, n)
		}
	}
	c.deleted[name] = now
}

// recentlyDeleted reports whether this server marked name terminating
// within forceLiveLookupTTL of now.
func (c *namespaceCache) recentlyDeleted(name string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.deleted[name]
	return ok && now.Sub(at) <= forceLiveLookupTTL
}
