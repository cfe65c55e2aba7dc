package record

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/podsafe/podsafe/history"
)

// follower is one FollowResource; only its goroutine uses it.
type follower struct {
	client    rest.Interface
	rec       *history.Recorder
	gvr       schema.GroupVersionResource
	name      string // the resource as store lines spell it
	namespace string
	opts      FollowOptions

	last    uint64            // the record is complete up to this resourceVersion
	known   map[string]string // namespace/name -> uid of the objects the record holds
	failing bool              // a failure was noted and nothing succeeded since
}

func newFollower(client rest.Interface, gvr schema.GroupVersionResource, namespace string, rec *history.Recorder, opts FollowOptions) *follower {
	if opts.WatchTimeout <= 0 {
		opts.WatchTimeout = DefaultWatchTimeout
	}
	if opts.RetryInterval <= 0 {
		opts.RetryInterval = DefaultRetryInterval
	}
	if opts.MaxRetryInterval < opts.RetryInterval {
		opts.MaxRetryInterval = max(DefaultMaxRetryInterval, opts.RetryInterval)
	}
	return &follower{client: client, rec: rec, gvr: gvr, name: StoreResource(gvr), namespace: namespace,
		opts: opts, known: map[string]string{}}
}

// The reasons of a list.
const (
	listStart  = "start"
	listRelist = "relist"
)

// run lists, then watches until ctx ends (see FollowResource).
func (f *follower) run(ctx context.Context) error {
	wait := f.opts.RetryInterval
	backOff := func(err error) {
		f.fail(err)
		sleep(ctx, wait)
		wait = min(2*wait, f.opts.MaxRetryInterval)
	}
	var lastErr error
	for {
		if ctx.Err() != nil {
			if lastErr == nil {
				lastErr = ctx.Err()
			}
			return fmt.Errorf("following %s: no list succeeded: %w", f.name, lastErr)
		}
		if lastErr = f.list(ctx, listStart); lastErr == nil {
			break
		}
		backOff(lastErr)
	}
	wait = f.opts.RetryInterval
	for ctx.Err() == nil {
		got, err := f.watch(ctx)
		switch {
		case ctx.Err() != nil:
		case errors.Is(err, errGone):
			f.rec.Log(history.LogStoreEventsLost, map[string]string{"resource": f.name, "after_rv": strconv.FormatUint(f.last, 10)})
			for ctx.Err() == nil {
				err := f.list(ctx, listRelist)
				if err == nil {
					break
				}
				backOff(err)
			}
			wait = f.opts.RetryInterval
		case err != nil:
			backOff(err)
		case !got:
			// A stream that ended with nothing in it: do not spin.
			f.failing = false
			sleep(ctx, wait)
			wait = min(2*wait, f.opts.MaxRetryInterval)
		default:
			f.failing = false
			wait = f.opts.RetryInterval
		}
	}
	end := map[string]string{"resource": f.name, "rv": strconv.FormatUint(f.last, 10)}
	if f.namespace != "" {
		end["namespace"] = f.namespace
	}
	f.rec.Log(history.LogStoreEventsEnd, end)
	return nil
}

// fail notes a failure once per run of failures.
func (f *follower) fail(err error) {
	if f.failing {
		return
	}
	f.failing = true
	attrs := map[string]string{"resource": f.name, "error": err.Error()}
	if f.namespace != "" {
		attrs["namespace"] = f.namespace
	}
	f.rec.Log(LogStoreEventsFailing, attrs)
}

// path returns the resource's collection path, in the namespace if any.
func (f *follower) path() []string {
	p := []string{"/apis", f.gvr.Group, f.gvr.Version}
	if f.gvr.Group == "" {
		p = []string{"/api", f.gvr.Version}
	}
	if f.namespace != "" {
		p = append(p, "namespaces", f.namespace)
	}
	return append(p, f.gvr.Resource)
}

// listBody is a list as the API serves it.
type listBody struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	Metadata   struct {
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
	Items []json.RawMessage `json:"items"`
}

// listed is one object of a list.
type listed struct {
	obj  json.RawMessage
	meta objectMeta
}

// listTimeout bounds a list request; watchSlack is how long after its
// timeoutSeconds a watch stream that has not ended is taken for a dead
// connection (a partition drops packets, and nothing tells the client).
const listTimeout = time.Minute

var watchSlack = 15 * time.Second // a variable for tests

// list reads the resource with a consistent read and records what it
// must (see FollowResource); the record then goes up to the list's
// resourceVersion.
func (f *follower) list(ctx context.Context, reason string) error {
	start := time.Now()
	lctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	raw, err := f.client.Get().AbsPath(f.path()...).DoRaw(lctx)
	if err != nil {
		return fmt.Errorf("listing: %w", err)
	}
	var l listBody
	if err := json.Unmarshal(raw, &l); err != nil {
		return fmt.Errorf("decoding list: %w", err)
	}
	rv, err := strconv.ParseUint(l.Metadata.ResourceVersion, 10, 64)
	if err != nil {
		return fmt.Errorf("list resourceVersion %q: %w", l.Metadata.ResourceVersion, err)
	}
	kind, _ := strings.CutSuffix(l.Kind, "List")
	items := make([]listed, 0, len(l.Items))
	for i, item := range l.Items {
		m, err := readMeta(item)
		if err != nil {
			return fmt.Errorf("list item %d: %w", i, err)
		}
		items = append(items, listed{obj: withTypeMeta(item, kind, l.APIVersion), meta: m})
	}
	slices.SortStableFunc(items, func(a, b listed) int {
		if a.meta.rv != b.meta.rv {
			if a.meta.rv < b.meta.rv {
				return -1
			}
			return 1
		}
		return 0
	})

	prev := f.known
	f.known = make(map[string]string, len(items))
	recorded := 0
	for _, it := range items {
		key := it.meta.key()
		f.known[key] = it.meta.UID
		if reason == listRelist && it.meta.rvOK && it.meta.rv <= f.last {
			continue // this version was recorded before the gap
		}
		typ := history.StoreAdded
		if uid, ok := prev[key]; ok && reason == listRelist && uid == it.meta.UID {
			typ = history.StoreModified
		}
		f.record(typ, it.obj, it.meta)
		recorded++
	}
	vanished := 0
	for key := range prev {
		if _, ok := f.known[key]; !ok {
			vanished++
		}
	}
	f.last = max(f.last, rv)
	f.failing = false
	attrs := map[string]string{
		"resource": f.name, "rv": l.Metadata.ResourceVersion, "reason": reason,
		"objects": strconv.Itoa(len(items)), "recorded": strconv.Itoa(recorded), "vanished": strconv.Itoa(vanished),
		"took": time.Since(start).Round(time.Millisecond).String(),
	}
	if f.namespace != "" {
		attrs["namespace"] = f.namespace
	}
	f.rec.Log(LogStoreEventsListed, attrs)
	return nil
}
