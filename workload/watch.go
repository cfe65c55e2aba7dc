package workload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/podsafe/podsafe/history"
)

// LeaseResource is the register's resource as the store (and its store
// lines) spell it.
const LeaseResource = "leases.coordination.k8s.io"

// Watcher is one watcher process of the register workload: it keeps a watch
// of the register's Leases open, as client-go's reflector does, and records
// every watch request and every event delivered (history watch lines).
type Watcher struct {
	// Name names the watcher in the history (default "w<index>").
	Name string
	// Client serves the watcher's lists and watches; give each watcher its
	// own, dialing its own API member.
	Client kubernetes.Interface
	// Reader, when set, gets every object the watch delivers as ADDED,
	// over its own connection, as soon as it arrives: a recorded get that
	// begins after the delivery, as a controller reacting to its informer
	// does. Nil: the watcher only watches.
	Reader kubernetes.Interface

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
)

// runWatcher runs watcher wt (the i-th) until ctx ends: list, then watch from
// the list's resourceVersion; after a watch ends for any reason, watch again
// from the last resourceVersion received (an event's or a bookmark's); after
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
	s := &watchStream{w: w, name: name, rec: rec, reads: reads}
	for ctx.Err() == nil {
		if s.from == "" {
			if w.Limiter.Wait(ctx) != nil {
				return
			}
			// Like every other operation, a list in flight when the run
			// ends completes on its own time.
			op, ok := lister.list(context.WithoutCancel(ctx))
			if !ok {
				sleepCtx(ctx, watchRetry)
				continue
			}
			s.from, s.reason, s.list = op.RV, history.WatchFromList, op.ID
		}
		timeout := w.watchTimeout(rng)
		gone, failed := s.watch(ctx, wt.Client, timeout)
		switch {
		case gone:
			s.from = ""
		case failed:
			sleepCtx(ctx, watchRetry)
		}
	}
}

// watchTimeout draws the timeoutSeconds of the next watch request.
func (w *Register) watchTimeout(rng *rand.Rand) int64 {
	lo, hi := int64(minWatchTimeout/time.Second), int64(w.WatchTimeout/time.Second)
	if hi <= lo {
		return lo
	}
	return lo + rng.Int64N(hi-lo+1)
}

// watchStream is a watcher's position: where its next watch starts and why,
// and how many watch requests it made.
type watchStream struct {
	w      *Register
	name   string
	rec    *history.Recorder
	reads  chan<- string
	stream int
	from   string
	reason string
	list   uint64
}

// watch makes one watch request from s.from and records it; s.from follows
// every resourceVersion received. gone reports 410 Gone (list again);
// failed any other error.
func (s *watchStream) watch(ctx context.Context, cs kubernetes.Interface, timeout int64) (gone, failed bool) {
	s.stream++
	open := history.WatchEvent{Watcher: s.name, Stream: s.stream, Phase: history.WatchOpen,
		Resource: LeaseResource, Namespace: s.w.Namespace, FromRV: s.from, Reason: s.reason}
	if s.reason == history.WatchFromList {
		open.List = s.list
	}
	s.rec.Watch(open)
	// Whatever happens next, a new request resumes from what this one
	// received.
	s.reason, s.list = history.WatchResume, 0
	wi, err := cs.CoordinationV1().Leases(s.w.Namespace).Watch(ctx, metav1.ListOptions{
		ResourceVersion: s.from, AllowWatchBookmarks: true, TimeoutSeconds: &timeout,
	})
	if err != nil {
		code := apiCode(err)
		s.close(err.Error(), code)
		return code == 410, true
	}
	defer wi.Stop()
	for ev := range wi.ResultChan() {
		switch ev.Type {
		case watch.Error:
			err := apierrors.FromObject(ev.Object)
			code := apiCode(err)
			s.close(err.Error(), code)
			return code == 410, true
		case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark:
			l, ok := ev.Object.(*coordinationv1.Lease)
			if !ok {
				s.close(fmt.Sprintf("unexpected %s event object %T", ev.Type, ev.Object), 0)
				return false, true
			}
			line := history.WatchEvent{Watcher: s.name, Stream: s.stream, Phase: history.WatchDeliver,
				Type: string(ev.Type), RV: l.ResourceVersion}
			if ev.Type != watch.Bookmark {
				line.Key, line.Value = l.Name, holder(l)
			}
			s.rec.Watch(line)
			if l.ResourceVersion != "" {
				s.from = l.ResourceVersion
			}
			if ev.Type == watch.Added && s.reads != nil {
				select {
				case s.reads <- l.Name:
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

func (s *watchStream) close(msg string, code int) {
	s.rec.Watch(history.WatchEvent{Watcher: s.name, Stream: s.stream, Phase: history.WatchClose, Error: msg, Code: code})
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
