package workload

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/podsafe/podsafe/history"
)

// FuncWatchList is the recorded operation of a SetWatchers watcher's list:
// Key "<namespace>/<resource>", Items the objects (name, watch value,
// resourceVersion), RV the list's resourceVersion. It is not the register's
// "list": the register's checkers leave it alone.
const FuncWatchList = "watch-list"

// WatchSet is what one watcher watches: a resource, spelled as the store
// spells it, in one namespace.
type WatchSet struct {
	Resource, Namespace string
}

// WatchSets returns what the long-lived watchers of a run of w watch: the
// objects its operations and controllers change, in its namespaces — the
// pods, and the StatefulSets or ReplicaSets that own them. The register
// watches its Leases with watchers of its own (Register.Watchers): none
// here. It is pure: w is not changed (its defaults are applied to a copy).
func WatchSets(w Workload) []WatchSet {
	pods := func(ns string, owners ...string) []WatchSet {
		out := []WatchSet{{PodResource, ns}}
		for _, r := range owners {
			out = append(out, WatchSet{r, ns})
		}
		return out
	}
	switch w := w.(type) {
	case *Pets:
		c := *w
		c.defaults()
		return pods(c.Namespace, StatefulSetResource)
	case *Replicas:
		c := *w
		c.defaults()
		return pods(c.Namespace, ReplicaSetResource)
	case *Spread:
		c := *w
		c.defaults()
		return pods(c.Namespace, ReplicaSetResource)
	case *Priority:
		c := *w
		c.defaults(0)
		return pods(c.Namespace)
	case *Lifecycle:
		c := *w
		c.defaults()
		return pods(c.Namespace)
	case *Mix:
		var out []WatchSet
		for _, p := range w.Parts {
			out = append(out, WatchSets(p)...)
		}
		return out
	}
	return nil
}

// SetWatchers runs long-lived watchers of a workload's objects beside it:
// each Watcher watches each set, as a reflector (list, watch from the
// list's resourceVersion, resume from the last resourceVersion received,
// bookmarks included, or now and then rewind to an older one; list again
// after 410 Gone), recording the history's watch lines that the watch
// checkers judge against the store's committed history.
type SetWatchers struct {
	// Sets are what each watcher watches (see WatchSets).
	Sets []WatchSet
	// Watchers are the watching processes, typically one per
	// control-plane member, each with its own client. Reader is not used.
	Watchers []Watcher
	// Recorder receives the watch lines and the lists (FuncWatchList).
	Recorder *history.Recorder
	// Seed makes the watch timeouts and rewinds reproducible.
	Seed uint64
	// FirstProcess is the first process number the watchers' lists are
	// recorded under; give one above every workload process.
	FirstProcess int
	// WatchTimeout is the longest timeoutSeconds a watch request asks for
	// (default 20 s); OpTimeout bounds a list (default 2 s, as the
	// workloads' operations).
	WatchTimeout, OpTimeout time.Duration

	_ struct{}
}

// Run runs every watcher on every set until ctx ends, and returns when all
// have stopped (a list in flight when ctx ends completes first).
func (sw *SetWatchers) Run(ctx context.Context) error {
	longest := sw.WatchTimeout
	if longest <= 0 {
		longest = defaultWatchTimeout
	}
	opTimeout := sw.OpTimeout
	if opTimeout <= 0 {
		opTimeout = defaultOpTimeout
	}
	if sw.Recorder == nil {
		return fmt.Errorf("watchers: no recorder")
	}
	var nextPID atomic.Int64
	nextPID.Store(int64(sw.FirstProcess))
	var wg sync.WaitGroup
	n := 0
	for i, wt := range sw.Watchers {
		if wt.Client == nil {
			return fmt.Errorf("watchers: watcher %d has no client", i)
		}
		name := wt.Name
		if name == "" {
			name = fmt.Sprintf("w%d", i)
		}
		for _, set := range sw.Sets {
			kind, ok := watchKinds[set.Resource]
			if !ok {
				return fmt.Errorf("watchers: cannot watch resource %q; choose one of %s", set.Resource, strings.Join(watchableResources(), ", "))
			}
			l := &watchLister{cs: wt.Client, kind: kind, ns: set.Namespace, rec: sw.Recorder, timeout: opTimeout,
				nextPID: &nextPID, pid: int(nextPID.Add(1) - 1)}
			s := &watchStream{name: name + "/" + set.Namespace + "/" + set.Resource, rec: sw.Recorder, kind: kind, namespace: set.Namespace}
			rng := rand.New(rand.NewPCG(sw.Seed, 2<<32+uint64(n)))
			n++
			wg.Add(1)
			go func() {
				defer wg.Done()
				// A list in flight when the run ends completes on its own
				// time, like every other recorded operation.
				list := func() (string, uint64, bool) { return l.list(context.WithoutCancel(ctx)) }
				s.run(ctx, wt.Client, rng, list, longest, wt.rewindPercent())
			}()
		}
	}
	wg.Wait()
	return nil
}

// watchableResources lists the resources SetWatchers can watch, sorted.
func watchableResources() []string {
	out := []string{LeaseResource, PodResource, ReplicaSetResource, StatefulSetResource}
	return out
}

// watchLister makes a SetWatchers watcher's lists, each a recorded
// FuncWatchList operation.
type watchLister struct {
	cs      kubernetes.Interface
	kind    *watchKind
	ns      string
	rec     *history.Recorder
	timeout time.Duration
	nextPID *atomic.Int64
	pid     int
}

// list lists the set and returns the list's resourceVersion and op ID, with
// ok when it succeeded. A list of unknown outcome moves the lister to a
// new process number, as every process whose operation may still be
// running does.
func (l *watchLister) list(ctx context.Context) (string, uint64, bool) {
	op := &history.Op{Process: l.pid, Func: FuncWatchList, Key: l.ns + "/" + l.kind.resource}
	l.rec.Invoke(op)
	octx, cancel := context.WithTimeout(ctx, l.timeout)
	rv, items, err := l.kind.list(octx, l.cs, l.ns)
	cancel()
	switch {
	case err == nil:
		op.Status, op.RV, op.Items, op.Found = history.StatusOK, rv, items, len(items) > 0
	case Classify(err) != "":
		op.Status, op.Error = history.StatusFail, Classify(err)
	default:
		op.Status, op.Error = history.StatusUnknown, err.Error()
	}
	l.rec.Complete(op)
	if op.Status == history.StatusUnknown {
		l.pid = int(l.nextPID.Add(1) - 1)
	}
	return rv, op.ID, err == nil
}
