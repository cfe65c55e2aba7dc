package record

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/podsafe/podsafe/history"
)

// The messages of the log lines FollowResource writes besides
// history.LogStoreEventsLost and history.LogStoreEventsEnd. Checkers do
// not read them.
const (
	// LogStoreEventsListed: the resource ("resource", in "namespace" when
	// set) was listed at resourceVersion "rv" ("reason": "start" or
	// "relist" after 410 Gone): "objects" objects, of which "recorded"
	// were recorded as store lines (on a relist, the ones changed since
	// the record's last resourceVersion) and "vanished" objects the record
	// held were gone, deleted at a resourceVersion the record does not
	// know (no DELETED line is made up for them).
	LogStoreEventsListed = "store events listed"
	// LogStoreEventsFailing: a list or watch of "resource" failed
	// ("error"); FollowResource retries. Noted once per run of failures.
	LogStoreEventsFailing = "store events failing"
)

// FollowOptions tune FollowResource. Zero values mean defaults.
type FollowOptions struct {
	// WatchTimeout is the timeoutSeconds each watch request asks for
	// (default 1 minute); the watch then resumes where it ended. A stream
	// still open 15 s after it is taken for a dead connection and resumed
	// as well.
	WatchTimeout time.Duration
	// RetryInterval is the first wait after a failed request; it doubles
	// up to MaxRetryInterval (defaults 100 ms and 2 s).
	RetryInterval    time.Duration
	MaxRetryInterval time.Duration
}

// Defaults of FollowOptions.
const (
	DefaultWatchTimeout     = time.Minute
	DefaultRetryInterval    = 100 * time.Millisecond
	DefaultMaxRetryInterval = 2 * time.Second
)

// StoreResource returns the name store lines give resource: its plural
// for the core group, plural.group otherwise ("pods",
// "statefulsets.apps"), which is how the embedded cluster's store and
// recorder name it.
func StoreResource(resource schema.GroupVersionResource) string {
	return resource.GroupResource().String()
}

// FollowResource records every committed change of resource (in
// namespace, "" for all) as a history.StoreEvent on rec, as the embedded
// cluster's recorder does from its store, but through the Kubernetes API
// of cfg's server; it returns once ctx ends.
//
// It lists the resource with a consistent read (no resourceVersion), then
// watches from the list's resourceVersion with bookmarks, and writes each
// ADDED, MODIFIED and DELETED event with the object as the API served it
// (JSON, the whole object) and its resourceVersion. resourceVersions are
// etcd revisions, one increasing sequence across all resources, so the
// checkers order these lines by resourceVersion as they do the embedded
// store's raft indexes.
//
// The first list records every object already there as ADDED at its own
// resourceVersion, in resourceVersion order: the line the embedded
// recorder, which reads its store from the first index, writes for the
// object's creation, as long as the object was not changed since. The
// record is complete from the list's resourceVersion on; before it, it
// holds each object's latest version only. Start FollowResource right
// after the control plane is up and before anything under test writes,
// so that what was there is the cluster's own bootstrap objects.
//
// A watch that ends or breaks resumes from the last resourceVersion seen
// (an event's or a bookmark's), so nothing is recorded twice (an event at
// or below it is dropped) and nothing is skipped. When the API answers 410
// Gone (the resourceVersion was compacted), the changes since are lost:
// it writes history.LogStoreEventsLost with after_rv the last
// resourceVersion, as the embedded recorder does, lists again and records
// the objects changed since as ADDED (a name it did not hold, or a new
// uid) or MODIFIED at their resourceVersions; the deletions in the gap are
// not recorded (their resourceVersions are unknown), LogStoreEventsListed
// counts them. Each list is noted with LogStoreEventsListed.
//
// When ctx ends it writes history.LogStoreEventsEnd with the resource,
// the last resourceVersion and the namespace when set, exactly as the
// embedded recorder does. Failed requests are retried with back-off
// (noted once per run of failures, LogStoreEventsFailing). It returns an
// error only when the client cannot be built or no list succeeded before
// ctx ended (then nothing is recorded and there is no end line).
//
// cfg's transport may be wrapped (rest.Config.WrapTransport); requests are
// made in JSON whatever cfg's content type.
func FollowResource(ctx context.Context, cfg *rest.Config, resource schema.GroupVersionResource, namespace string, rec *history.Recorder, opts FollowOptions) error {
	client, err := jsonClient(cfg)
	if err != nil {
		return fmt.Errorf("following %s: %w", StoreResource(resource), err)
	}
	f := newFollower(client, resource, namespace, rec, opts)
	return f.run(ctx)
}

// jsonClient returns a REST client of cfg's server that sends and
// accepts JSON only.
func jsonClient(cfg *rest.Config) (rest.Interface, error) {
	c := rest.CopyConfig(cfg)
	c.ContentType = "application/json"
	c.AcceptContentTypes = "application/json"
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	// Watches last their timeoutSeconds; each request gets its own bound.
	c.Timeout = 0
	client, err := rest.UnversionedRESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("building REST client: %w", err)
	}
	return client, nil
}

// errGone: the watch's resourceVersion is too old (410 Gone or Expired).
var errGone = errors.New("resourceVersion too old (410)")

// isGone reports an API error of code 410.
func isGone(err error) bool {
	var st apierrors.APIStatus
	return errors.As(err, &st) && st.Status().Code == 410
}

// watchEvent is one event of a JSON watch stream.
type watchEvent struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

// watch watches from f.last until the stream ends and records its events;
// it reports whether anything (an event or a bookmark) came.
func (f *follower) watch(ctx context.Context) (bool, error) {
	timeout := int64(f.opts.WatchTimeout / time.Second)
	wctx, cancel := context.WithTimeout(ctx, f.opts.WatchTimeout+watchSlack)
	defer cancel()
	body, err := f.client.Get().AbsPath(f.path()...).
		Param("watch", "true").
		Param("resourceVersion", strconv.FormatUint(f.last, 10)).
		Param("allowWatchBookmarks", "true").
		Param("timeoutSeconds", strconv.FormatInt(max(timeout, 1), 10)).
		Stream(wctx)
	if err != nil {
		if isGone(err) {
			return false, errGone
		}
		return false, fmt.Errorf("watching from resourceVersion %d: %w", f.last, err)
	}
	defer body.Close()
	dec := json.NewDecoder(body)
	got := false
	for {
		var ev watchEvent
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) {
				return got, nil
			}
			return got, fmt.Errorf("reading watch from resourceVersion %d: %w", f.last, err)
		}
		switch ev.Type {
		case "ADDED", "MODIFIED", "DELETED":
			if err := f.event(history.StoreEventType(ev.Type), ev.Object); err != nil {
				return got, err
			}
		case "BOOKMARK":
			m, err := readMeta(ev.Object)
			if err != nil {
				return got, fmt.Errorf("bookmark: %w", err)
			}
			if m.rvOK {
				f.last = max(f.last, m.rv)
			}
		case "ERROR":
			var st struct {
				Code    int    `json:"code"`
				Reason  string `json:"reason"`
				Message string `json:"message"`
			}
			_ = json.Unmarshal(ev.Object, &st)
			if st.Code == 410 {
				return got, errGone
			}
			return got, fmt.Errorf("watch error from resourceVersion %d: %d %s: %s", f.last, st.Code, st.Reason, st.Message)
		default:
			return got, fmt.Errorf("watch event of unknown type %q", ev.Type)
		}
		got = true
	}
}

// event records one watch event, unless its resourceVersion is not past
// the record's (a change already recorded).
func (f *follower) event(typ history.StoreEventType, obj json.RawMessage) error {
	m, err := readMeta(obj)
	if err != nil {
		return fmt.Errorf("%s event: %w", typ, err)
	}
	if m.rvOK && m.rv <= f.last {
		return nil
	}
	f.record(typ, obj, m)
	if m.rvOK {
		f.last = m.rv
	}
	if typ == history.StoreDeleted {
		delete(f.known, m.key())
	} else {
		f.known[m.key()] = m.UID
	}
	return nil
}

// record writes one store line.
func (f *follower) record(typ history.StoreEventType, obj json.RawMessage, m objectMeta) {
	f.rec.Store(history.StoreEvent{
		Type: typ, Resource: f.name, Namespace: m.Namespace, Name: m.Name,
		RV: m.ResourceVersion, Object: obj,
	})
}
