package workload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/podsafe/podsafe/history"
)

// LeaseResource is the register's resource as the store (and its store
// lines) spell it.
const LeaseResource = "leases.coordination.k8s.io"

// WatchRewind is the history.WatchEvent Reason of a watch request that
// resumes not from the last resourceVersion its watcher received but from
// an older one it received (or its list's): the stream must deliver again
// exactly the changes after it, or answer 410 Gone when they left the
// store's watch window. The checkers spell it alike.
const WatchRewind = "rewind"

// LogWatcherEnd is the message of the log line a watcher writes when it
// stops: attributes "watcher", "resource", "namespace", and the counts
// "streams", "rewinds", "gone" (410 Gone answers) and "lists".
const LogWatcherEnd = "watcher finished"

// Watcher is one long-lived watcher process: it keeps a watch open, as
// client-go's reflector does, and records every watch request and every
// event delivered (history watch lines). The register workload runs one per
// Watcher of its namespace's Leases; SetWatchers runs one per Watcher and
// watched set.
type Watcher struct {
	// Name names the watcher in the history (default "w<index>").
	Name string
	// Client serves the watcher's lists and watches; give each watcher its
	// own, dialing its own API member.
	Client kubernetes.Interface
	// Reader, when set, gets every object the watch delivers as ADDED,
	// over its own connection, as soon as it arrives: a recorded get that
	// begins after the delivery, as a controller reacting to its informer
	// does. Nil: the watcher only watches. Only the register's watchers
	// read.
	Reader kubernetes.Interface
	// Rewind is the percentage (0..100) of resumes that rewind: they
	// resume from an older resourceVersion the watcher received rather
	// than the last (WatchRewind): half the time the oldest it remembers,
	// so that resumes reach the watch window's floor, else one of the last
	// few. 0: none.
	Rewind int

	_ struct{}
}

// Defaults of the watchers.
const (
	// defaultWatchTimeout is the longest timeoutSeconds a watch request
	// asks for; each asks for a whole number of seconds drawn from
	// [minWatchTimeout, WatchTimeout], so streams end and resume often and
	// the longer ones outlive the API server's bookmark interval (10 s).
	defaultWatchTimeout = 20 * time.Second
	minWatchTimeout     = 2 * time.Second
	// watchRetry is the pause before a watcher retries after an error.
	watchRetry = 100 * time.Millisecond
	// readQueue bounds the deliveries waiting for their get; past it a
	// delivery goes unread.
	readQueue = 64
	// rewindMemory bounds the resourceVersions a watcher remembers to
	// rewind to: the last ones received since its list.
	rewindMemory = 256
	// rewindRecent is how far back, in resourceVersions received, a short
	// rewind goes at most.
	rewindRecent = 16
)

// rewindPercent is wt's Rewind, bounded to 0..100.
func (wt Watcher) rewindPercent() int { return min(max(wt.Rewind, 0), 100) }

// runWatcher runs the register's watcher wt (the i-th) until ctx ends: list,
// then watch from the list's resourceVersion; after a watch ends for any
// reason, watch again from the last resourceVersion received (an event's or
// a bookmark's), or now and then from an older one (Watcher.Rewind); after
// 410 Gone, list again and watch from the new list's resourceVersion.
func (w *Register) runWatcher(ctx context.Context, i int, wt Watcher, rec *history.Recorder, seed uint64, stats *Stats, nextPID *atomic.Int64) {
	name := wt.Name
	if name == "" {
		name = fmt.Sprintf("w%d", i)
	}
	rng := rand.New(rand.NewPCG(seed, 1<<32+uint64(i)))
	proc := func(cs kubernetes.Interface) *registerProc {
		return &registerProc{w: w, cs: cs, rec: rec, stats: stats, pid: int(nextPID.Add(1) - 1), nextPID: nextPID, seen: map[string]seenValue{}}
	}
	lister := proc(wt.Client)
	var reads chan string
	if wt.Reader != nil {
		reads = make(chan string, readQueue)
		reader := proc(wt.Reader)
		done := make(chan struct{})
		defer func() { close(reads); <-done }()
		go func() {
			defer close(done)
			// A get in flight when the run ends completes on its own time,
			// as the other processes' operations do.
			rctx := context.WithoutCancel(ctx)
			for key := range reads {
				// The reads count against the rate like every operation;
				// under a rate, what is still queued when the run ends
				// goes unread.
				if w.Limiter != nil && w.Limiter.Wait(ctx) != nil {
					continue
				}
				reader.get(rctx, key)
			}
		}()
	}
	s := &watchStream{name: name, rec: rec, kind: leaseKind, namespace: w.Namespace, reads: reads}
	list := func() (string, uint64, bool) {
		if w.Limiter.Wait(ctx) != nil {
			return "", 0, false
		}
		// Like every other operation, a list in flight when the run ends
		// completes on its own time.
		op, ok := lister.list(context.WithoutCancel(ctx))
		return op.RV, op.ID, ok
	}
	s.run(ctx, wt.Client, rng, list, w.WatchTimeout, wt.rewindPercent())
}

// drawWatchTimeout draws the timeoutSeconds of the next watch request, from
// [minWatchTimeout, longest].
func drawWatchTimeout(rng *rand.Rand, longest time.Duration) int64 {
	lo, hi := int64(minWatchTimeout/time.Second), int64(longest/time.Second)
	if hi <= lo {
		return lo
	}
	return lo + rng.Int64N(hi-lo+1)
}

// watchStream is a watcher's position: where its next watch starts and why,
// what it received since its last list, and how many watch requests,
// rewinds, 410 Gone answers and lists it had.
type watchStream struct {
	name      string
	rec       *history.Recorder
	kind      *watchKind
	namespace string
	reads     chan<- string
	stream    int
	from      string
	reason    string
	list      uint64
	// past holds the resourceVersions received since the last list (its
	// own first), increasing, the last rewindMemory of them.
	past                  []uint64
	rewinds, gone, relist int
}

// run is the reflector loop: list (list returns the list's resourceVersion
// and op ID, ok when it succeeded), watch from it, resume or rewind after
// each stream, list again after 410 Gone; until ctx ends. It ends with a
// LogWatcherEnd line.
func (s *watchStream) run(ctx context.Context, cs kubernetes.Interface, rng *rand.Rand, list func() (string, uint64, bool), longest time.Duration, rewind int) {
	defer s.logEnd()
	for ctx.Err() == nil {
		if s.from == "" {
			rv, id, ok := list()
			if !ok {
				sleepCtx(ctx, watchRetry)
				continue
			}
			s.listed(rv, id)
		} else if rewind > 0 && rng.IntN(100) < rewind {
			s.rewind(rng)
		}
		gone, failed := s.watch(ctx, cs, drawWatchTimeout(rng, longest))
		switch {
		case gone:
			s.from = ""
		case failed:
			sleepCtx(ctx, watchRetry)
		}
	}
}

// listed starts the watcher afresh from a list at rv (op id).
func (s *watchStream) listed(rv string, id uint64) {
	s.from, s.reason, s.list = rv, history.WatchFromList, id
	s.relist++
	s.past = s.past[:0]
	if n, err := strconv.ParseUint(rv, 10, 64); err == nil {
		s.past = append(s.past, n)
	}
}

// received moves the position to rv, an event's or a bookmark's.
func (s *watchStream) received(rv string) {
	if rv == "" {
		return
	}
	s.from = rv
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil || (len(s.past) > 0 && n <= s.past[len(s.past)-1]) {
		return
	}
	if len(s.past) == rewindMemory {
		s.past = append(s.past[:0], s.past[1:]...)
	}
	s.past = append(s.past, n)
}

// rewind moves the next request's start back to an older resourceVersion
// the watcher received: the oldest remembered or one of the last few.
// It does nothing when the watcher remembers none older than its position.
func (s *watchStream) rewind(rng *rand.Rand) {
	cur, err := strconv.ParseUint(s.from, 10, 64)
	if err != nil {
		return
	}
	older := sort.Search(len(s.past), func(i int) bool { return s.past[i] >= cur })
	if older == 0 {
		return
	}
	// Half the time the oldest, to probe the window's floor; else one of
	// the last few, a short replay the window still holds.
	pick := 0
	if rng.IntN(2) == 1 {
		pick = older - 1 - rng.IntN(min(older, rewindRecent))
	}
	to := s.past[pick]
	s.past = s.past[:pick+1]
	s.from, s.reason, s.list = strconv.FormatUint(to, 10), WatchRewind, 0
	s.rewinds++
}

// watch makes one watch request from s.from and records it; s.from follows
// every resourceVersion received. gone reports 410 Gone (list again);
// failed any other error.
func (s *watchStream) watch(ctx context.Context, cs kubernetes.Interface, timeout int64) (gone, failed bool) {
	s.stream++
	open := history.WatchEvent{Watcher: s.name, Stream: s.stream, Phase: history.WatchOpen,
		Resource: s.kind.resource, Namespace: s.namespace, FromRV: s.from, Reason: s.reason}
	if s.reason == history.WatchFromList {
		open.List = s.list
	}
	s.rec.Watch(open)
	// Whatever happens next, a new request resumes from what this one
	// received.
	s.reason, s.list = history.WatchResume, 0
	wi, err := s.kind.watch(ctx, cs, s.namespace, metav1.ListOptions{
		ResourceVersion: s.from, AllowWatchBookmarks: true, TimeoutSeconds: &timeout,
	})
	if err != nil {
		return s.fail(err.Error(), apiCode(err)), true
	}
	defer wi.Stop()
	for ev := range wi.ResultChan() {
		switch ev.Type {
		case watch.Error:
			err := apierrors.FromObject(ev.Object)
			return s.fail(err.Error(), apiCode(err)), true
		case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark:
			o, ok := s.kind.read(ev.Object)
			if !ok {
				s.close(fmt.Sprintf("unexpected %s event object %T", ev.Type, ev.Object), 0)
				return false, true
			}
			line := history.WatchEvent{Watcher: s.name, Stream: s.stream, Phase: history.WatchDeliver,
				Type: string(ev.Type), RV: o.rv}
			if ev.Type != watch.Bookmark {
				line.Key, line.Value = o.name, o.value
			}
			s.rec.Watch(line)
			s.received(o.rv)
			if ev.Type == watch.Added && s.reads != nil {
				select {
				case s.reads <- o.name:
				default:
				}
			}
		}
	}
	// The stream ended without an error event: its timeout, the run's end,
	// or a connection the client saw end.
	msg := ""
	if err := ctx.Err(); err != nil {
		msg = err.Error()
	}
	s.close(msg, 0)
	return false, false
}

// fail records the stream's end by an error and reports whether it was
// 410 Gone.
func (s *watchStream) fail(msg string, code int) bool {
	s.close(msg, code)
	if code == 410 {
		s.gone++
		return true
	}
	return false
}

func (s *watchStream) close(msg string, code int) {
	s.rec.Watch(history.WatchEvent{Watcher: s.name, Stream: s.stream, Phase: history.WatchClose, Error: msg, Code: code})
}

// logEnd writes the watcher's LogWatcherEnd line.
func (s *watchStream) logEnd() {
	s.rec.Log(LogWatcherEnd, map[string]string{
		"watcher": s.name, "resource": s.kind.resource, "namespace": s.namespace,
		"streams": strconv.Itoa(s.stream), "rewinds": strconv.Itoa(s.rewinds),
		"gone": strconv.Itoa(s.gone), "lists": strconv.Itoa(s.relist),
	})
}

// apiCode is the HTTP status of an API error, 0 for any other error.
func apiCode(err error) int {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return int(st.Status().Code)
	}
	return 0
}

// list lists the register's namespace as a recorded "list" op (Key the
// namespace, Items the Leases, RV the list's resourceVersion) and returns
// it, with ok when it succeeded.
func (p *registerProc) list(ctx context.Context) (*history.Op, bool) {
	op := p.begin("list", p.w.Namespace)
	p.rec.Invoke(op)
	octx, cancel := context.WithTimeout(ctx, p.w.OpTimeout)
	l, err := p.cs.CoordinationV1().Leases(p.w.Namespace).List(octx, metav1.ListOptions{})
	cancel()
	if err == nil {
		op.RV = l.ResourceVersion
		op.Found = len(l.Items) > 0
		for i := range l.Items {
			it := &l.Items[i]
			op.Items = append(op.Items, history.Item{Key: it.Name, Value: holder(it), RV: it.ResourceVersion})
		}
		sort.Slice(op.Items, func(i, j int) bool { return op.Items[i].Key < op.Items[j].Key })
	}
	p.finish(op, err)
	return op, err == nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
