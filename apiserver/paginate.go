package apiserver

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"weak"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/podsafe/podsafe/raftstore"
)

// Paginated lists (limit and continue) are served as kube-apiserver serves
// them: at most limit items a page, a continue token while objects remain,
// remainingItemCount when no selector filters the list, and every page of
// one list at the first page's resourceVersion.
//
// kube-apiserver reads the later pages from etcd at that revision. The
// raftstore cannot: it keeps only each object's current state, and its
// watch window holds changes without the state they replaced, so a past
// revision cannot be rebuilt from it. Instead the first page's List result
// (every object of the resource in the namespace at revision R, before
// selectors) is kept in memory as a listSnapshot, keyed by the server, the
// resource, the namespace, the store index the selectors narrowed the read
// to and R. The continue token is kube-apiserver's own shape, base64 of
// {"v":"meta.k8s.io/v1","rv":R,"start":KEY}, where KEY is the next object's
// key relative to the listed prefix followed by a NUL; the request's URL
// and selectors name the rest of the snapshot key. Snapshots are shared
// with the store's own encodings (which are never modified), live
// pageSnapshotTTL from the first page, as a token lives until etcd's
// compaction (every five minutes) in kube-apiserver, and are evicted oldest
// first past pageCacheMaxBytes or pageCacheMaxEntries, for all servers of
// the process together. A continue token whose snapshot is gone (expired,
// evicted, or made by another server) gets what kube-apiserver answers for
// a compacted revision: 410 Expired, with a token in the Status's
// metadata.continue that continues at the current revision from the same
// key (rv -1), for a client that accepts an inconsistent list.

// Bounds of the snapshot cache.
const (
	pageSnapshotTTL     = 5 * time.Minute
	pageCacheMaxBytes   = 128 << 20
	pageCacheMaxEntries = 64
)

// continueAPIVersion is the version of kube-apiserver's continue tokens.
const continueAPIVersion = "meta.k8s.io/v1"

// Messages of kube-apiserver's 410 for a continue token past compaction.
const (
	continueExpiredMessage = "The provided continue parameter is too old to display a consistent list result. " +
		"You can start a new list without the continue parameter."
	inconsistentContinueMessage = "The provided continue parameter is too old to display a consistent list result. " +
		"You can start a new list without the continue parameter, or use the continue token in this response to " +
		"retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - " +
		"objects that were created, modified, or deleted between the time the first chunk was returned and now may " +
		"show up in the list."
)

// continueToken is kube-apiserver's continue token: the revision of the
// list (-1: the current one) and the key to start from.
type continueToken struct {
	APIVersion      string `json:"v"`
	ResourceVersion int64  `json:"rv"`
	StartKey        string `json:"start"`
}

// encode renders the token as it goes on the wire.
func (c continueToken) encode() string {
	c.APIVersion = continueAPIVersion
	data, _ := json.Marshal(c) // strings and a number: cannot fail
	return base64.RawURLEncoding.EncodeToString(data)
}

// errInvalidContinue is the message kube-apiserver's malformed tokens share.
var errInvalidContinue = errors.New("continue key is not valid")

// decodeContinue parses a continue token as kube-apiserver does.
func decodeContinue(s string) (continueToken, error) {
	var c continueToken
	data, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return c, fmt.Errorf("%w: %v", errInvalidContinue, err)
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return c, fmt.Errorf("%w: %v", errInvalidContinue, err)
	}
	if c.APIVersion != continueAPIVersion {
		return c, fmt.Errorf("%w: server does not recognize this encoded version %v", errInvalidContinue, c.APIVersion)
	}
	if c.ResourceVersion == 0 {
		return c, fmt.Errorf("%w: incorrect encoded start resourceVersion (version %s)", errInvalidContinue, continueAPIVersion)
	}
	if c.StartKey == "" {
		return c, fmt.Errorf("%w: encoded start key empty (version %s)", errInvalidContinue, continueAPIVersion)
	}
	// A start key may not climb out of the listed prefix.
	key := c.StartKey
	if !strings.HasPrefix(key, "/") {
		key = "/" + key
	}
	if path.Clean(key) != key {
		return c, fmt.Errorf("%w: %v", errInvalidContinue, c.StartKey)
	}
	return c, nil
}

// pageRequest is the pagination of a LIST: limit (0: all) and the parsed
// continue token (nil on a first page).
type pageRequest struct {
	limit int
	token *continueToken
}

// parsePageRequest reads limit and continue. A limit that is not an
// integer, a malformed token, and a token beside a resourceVersion other
// than 0 are 400; a negative limit means none, as in kube-apiserver.
func parsePageRequest(q url.Values) (pageRequest, error) {
	var p pageRequest
	if s := q.Get("limit"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return p, apierrors.NewBadRequest(fmt.Sprintf("invalid limit %q: it is an integer, the most items a page may hold", s))
		}
		if n > 0 {
			p.limit = int(min(n, int64(^uint(0)>>1)))
		}
	}
	if s := q.Get("continue"); s != "" {
		c, err := decodeContinue(s)
		if err != nil {
			return p, apierrors.NewBadRequest(fmt.Sprintf("invalid continue token: %v", err))
		}
		if rv := q.Get("resourceVersion"); rv != "" && rv != "0" {
			return p, apierrors.NewBadRequest("specifying resource version is not allowed when using continue")
		}
		p.token = &c
	}
	if q.Get("resourceVersion") == "0" && p.token == nil {
		// kube-apiserver serves resourceVersion=0 from its watch cache,
		// which ignores limit: a reflector's first list gets everything.
		p.limit = 0
	}
	return p, nil
}

// startKey is the token's start key relative to the listed prefix: the
// name, or namespace/name in a list of a namespaced resource across all
// namespaces, then a NUL, so that the next page starts strictly after it.
func startKey(ri *requestInfo, k raftstore.Key) string {
	if ri.res.namespaced && ri.namespace == "" {
		return k.Namespace + "/" + k.Name + "\x00"
	}
	return k.Name + "\x00"
}

// startPosition is the index of the first of objs (sorted by key, as the
// store lists them) at or after the token's start key.
func startPosition(ri *requestInfo, objs []raftstore.Object, start string) int {
	ns, name := ri.namespace, start
	if ri.res.namespaced && ri.namespace == "" {
		ns, name, _ = strings.Cut(start, "/")
	}
	return sort.Search(len(objs), func(i int) bool {
		k := objs[i].Key
		return k.Namespace > ns || (k.Namespace == ns && k.Name >= name)
	})
}

// expiredContinue is the 410 for a token whose snapshot is gone.
func expiredContinue(start string) error {
	err := apierrors.NewResourceExpired(inconsistentContinueMessage)
	err.ErrStatus.ListMeta.Continue = continueToken{ResourceVersion: -1, StartKey: start}.encode()
	return err
}

// snapshotKey names one listSnapshot.
type snapshotKey struct {
	server    weak.Pointer[Server]
	resource  string
	namespace string
	narrow    raftstore.Narrowing
	rev       uint64
}

// listSnapshot is a List result kept for the later pages of a list.
type listSnapshot struct {
	objs    []raftstore.Object
	bytes   int
	expires time.Time
}

// pageCache holds listSnapshots within a time and memory bound. It is safe
// for concurrent use; expired entries are dropped whenever it is used.
type pageCache struct {
	mu         sync.Mutex
	now        func() time.Time
	ttl        time.Duration
	maxBytes   int
	maxEntries int
	entries    map[snapshotKey]*listSnapshot
	bytes      int
}

// pageSnapshots is the process's snapshot cache. It is shared by every
// Server of the process so that the memory bound is one bound; its keys
// hold their server weakly, and a token can only find its own server's
// snapshots.
var pageSnapshots = newPageCache(time.Now, pageSnapshotTTL, pageCacheMaxBytes, pageCacheMaxEntries)

func newPageCache(now func() time.Time, ttl time.Duration, maxBytes, maxEntries int) *pageCache {
	return &pageCache{now: now, ttl: ttl, maxBytes: maxBytes, maxEntries: maxEntries, entries: map[snapshotKey]*listSnapshot{}}
}

// get returns the snapshot under k, if it is still kept.
func (c *pageCache) get(k snapshotKey) ([]raftstore.Object, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireLocked()
	snap, ok := c.entries[k]
	if !ok {
		return nil, false
	}
	return snap.objs, true
}

// put keeps objs under k (a snapshot already kept stays as it is) and
// reports whether it is kept: one larger than the whole bound is not.
func (c *pageCache) put(k snapshotKey, objs []raftstore.Object) bool {
	size := 0
	for _, o := range objs {
		size += len(o.Data) + len(o.Key.Namespace) + len(o.Key.Name)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireLocked()
	if _, ok := c.entries[k]; ok {
		return true
	}
	if size > c.maxBytes {
		return false
	}
	for len(c.entries) > 0 && (c.bytes+size > c.maxBytes || len(c.entries) >= c.maxEntries) {
		c.evictOldestLocked()
	}
	c.entries[k] = &listSnapshot{objs: objs, bytes: size, expires: c.now().Add(c.ttl)}
	c.bytes += size
	return true
}

// expireLocked drops the expired snapshots and those of collected servers.
func (c *pageCache) expireLocked() {
	now := c.now()
	for k, snap := range c.entries {
		if !now.Before(snap.expires) || k.server.Value() == nil {
			c.dropLocked(k)
		}
	}
}

// evictOldestLocked drops the snapshot that would expire first.
func (c *pageCache) evictOldestLocked() {
	var oldest snapshotKey
	var at time.Time
	first := true
	for k, snap := range c.entries {
		if first || snap.expires.Before(at) {
			oldest, at, first = k, snap.expires, false
		}
	}
	c.dropLocked(oldest)
}

func (c *pageCache) dropLocked(k snapshotKey) {
	if snap, ok := c.entries[k]; ok {
		c.bytes -= snap.bytes
		delete(c.entries, k)
	}
}
