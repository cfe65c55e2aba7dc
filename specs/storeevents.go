package specs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/history"
	"github.com/podsafe/podsafe/raftstore"
	"github.com/podsafe/podsafe/workload"
)

// StoreEventResources are the resources whose every committed change a run
// records in its history (store lines): what the phase, preemption and
// topology-spread checkers rebuild the cluster's state from. Leases are left
// out: node heart-beats would drown the rest (a register run records the
// Leases of its own namespace, see storeSources).
var StoreEventResources = []string{
	"pods", "nodes", "volumeattachments.storage.k8s.io", "poddisruptionbudgets.policy",
	"priorityclasses.scheduling.k8s.io", "statefulsets.apps", "replicasets.apps", "deployments.apps",
}

// storeSource is one resource whose committed changes a run records, in
// one namespace ("" for all).
type storeSource struct {
	resource, namespace string
}

// storeSources returns what a run of workload records: every resource of
// StoreEventResources and, for the register workload, the Leases of its
// namespace, the committed history its watches and reads are judged against.
func storeSources(workloadName string) []storeSource {
	out := make([]storeSource, 0, len(StoreEventResources)+1)
	for _, res := range StoreEventResources {
		out = append(out, storeSource{resource: res})
	}
	if workloadName == "register" {
		out = append(out, storeSource{resource: workload.LeaseResource, namespace: workload.RegisterNamespace})
	}
	return out
}

// recordStoreEvents follows every source on some running member's store
// (each member applies every committed entry in raft order) and writes each
// change to rec, until ctx ends. When the member it follows goes away it
// resumes on another from the last resourceVersion it saw; a change that was
// compacted meanwhile is lost, and the loss is noted in the history
// (history.LogStoreEventsLost). When ctx ends, a history.LogStoreEventsEnd
// line says up to which resourceVersion the record of each source is
// complete.
func recordStoreEvents(ctx context.Context, c *cluster.Cluster, rec *history.Recorder, sources []storeSource) *sync.WaitGroup {
	var wg sync.WaitGroup
	for _, src := range sources {
		wg.Add(1)
		go func() {
			defer wg.Done()
			followResource(ctx, c, rec, src)
		}()
	}
	return &wg
}

func followResource(ctx context.Context, c *cluster.Cluster, rec *history.Recorder, src storeSource) {
	// From the start of the log (the cluster has just started, so the
	// watch window usually still holds it; when it does not, from a list);
	// 0 would mean from the present.
	var last uint64 = 1
	member := 0
	for ctx.Err() == nil {
		st := c.Store(member % c.Members())
		member++
		if st == nil {
			sleepCtx(ctx, 50*time.Millisecond)
			continue
		}
		ch, err := st.Watch(ctx, src.resource, last)
		if errors.Is(err, raftstore.ErrTooOld) && last == 1 {
			// Nothing recorded yet, and the window no longer reaches back
			// to the log's start: 5,000 kubelets registering write more
			// than it holds before a run begins. The record starts from
			// the objects as listed, whole, rather than from a gap.
			rev, n, err := recordListed(ctx, st, rec, src)
			if err != nil {
				sleepCtx(ctx, 50*time.Millisecond)
				continue
			}
			rec.Log(history.LogStoreEventsListed, map[string]string{"resource": src.resource,
				"rv": strconv.FormatUint(rev, 10), "objects": strconv.Itoa(n)})
			last = rev
			continue
		}
		if errors.Is(err, raftstore.ErrTooOld) {
			rec.Log(history.LogStoreEventsLost, map[string]string{"resource": src.resource, "after_rv": strconv.FormatUint(last, 10)})
			last = 0
			continue
		}
		if err != nil {
			sleepCtx(ctx, 50*time.Millisecond)
			continue
		}
		for ev := range ch {
			// Every change of the resource moves the record on, also those
			// of other namespaces: the end line counts them all.
			if ev.Object.RV > last {
				last = ev.Object.RV
			}
			if src.namespace != "" && ev.Object.Key.Namespace != src.namespace {
				continue
			}
			rec.Store(storeLine(ev.Type, ev.Object))
		}
	}
	end := map[string]string{"resource": src.resource, "rv": strconv.FormatUint(last, 10)}
	if src.namespace != "" {
		end["namespace"] = src.namespace
	}
	rec.Log(history.LogStoreEventsEnd, end)
}

// recordListed records src's objects as listed on st, oldest change first,
// each as an ADDED store line at its own resourceVersion, and returns the
// list's resourceVersion and how many it recorded.
func recordListed(ctx context.Context, st *raftstore.Store, rec *history.Recorder, src storeSource) (uint64, int, error) {
	objs, rev, err := st.List(ctx, src.resource, src.namespace)
	if err != nil {
		return 0, 0, err
	}
	slices.SortFunc(objs, func(a, b raftstore.Object) int { return cmp.Compare(a.RV, b.RV) })
	for _, o := range objs {
		rec.Store(storeLine(raftstore.Added, o))
	}
	return rev, len(objs), nil
}

// storeLine is the history's store line of a change of o.
func storeLine(typ raftstore.EventType, o raftstore.Object) history.StoreEvent {
	return history.StoreEvent{
		Type: history.StoreEventType(typ), Resource: o.Key.Resource,
		Namespace: o.Key.Namespace, Name: o.Key.Name,
		RV: strconv.FormatUint(o.RV, 10), Object: json.RawMessage(o.Data),
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// startWatchers gives a run of w its long-lived watchers, one per
// control-plane member (sys.watchers), whose watch lines the watch checkers
// judge against the store events recorded: the register's watch its Leases
// (and read what they are delivered) as part of its own run; every other
// workload's watch its pods and sets (workload.WatchSets) beside it, from
// now until ctx ends. wait returns once they stopped.
func startWatchers(ctx context.Context, w workload.Workload, sys *system, rec *history.Recorder, seed uint64) (wait func() error, err error) {
	if r, ok := w.(*workload.Register); ok {
		r.Watchers, err = sys.watchers()
		return func() error { return nil }, err
	}
	sets := workload.WatchSets(w)
	if len(sets) == 0 {
		return func() error { return nil }, nil
	}
	ws, err := sys.watchers()
	if err != nil {
		return nil, err
	}
	sw := &workload.SetWatchers{Sets: sets, Watchers: ws, Recorder: rec, Seed: seed, FirstProcess: len(sys.clients)}
	done := make(chan error, 1)
	go func() { done <- sw.Run(ctx) }()
	return func() error { return <-done }, nil
}

// runWatcherRewind is the percentage of a run's watchers' resumes that
// rewind to an older resourceVersion they received (workload.Watcher's
// Rewind), so that resumes near the watch window's floor, and the 410 Gone
// answers below it, happen in ordinary runs; smallWindowRewind is the
// percentage in a run that sizes the window (Scenario.WatchWindow), which
// asks for the floor to be reached.
const (
	runWatcherRewind  = 25
	smallWindowRewind = 50
)

// watcherRewind is the percentage of resumes the watchers of a run of s
// rewind.
func watcherRewind(s Scenario) int {
	if s.WatchWindow > 0 {
		return smallWindowRewind
	}
	return runWatcherRewind
}

// registerWatchers builds a run's watchers: one per control-plane member,
// watching through that member's API server (a watch served by a follower
// delivers what the follower applied, maybe before the leader did), each
// (the register's) reading what it is delivered over a connection to the
// next member. Their client hosts follow the workload's n clients', so a
// partition cuts each on its own. rewind is the percentage of resumes that
// rewind (workload.Watcher's Rewind).
func registerWatchers(c *cluster.Cluster, rec *history.Recorder, n, rewind int) ([]workload.Watcher, error) {
	watchers := make([]workload.Watcher, c.Members())
	for m := range watchers {
		var clients [2]kubernetes.Interface
		for j := range clients {
			rc := c.RESTConfig(apiserver.IdentityWorkload, cluster.ClientOptions{Host: cluster.ClientHost(n + 2*m + j), Member: (m + j) % c.Members()})
			rc.WrapTransport = rec.WrapTransport(apiserver.IdentityWorkload)
			cs, err := kubernetes.NewForConfig(rc)
			if err != nil {
				return nil, fmt.Errorf("building the clients of watcher %d: %w", m, err)
			}
			clients[j] = cs
		}
		watchers[m] = workload.Watcher{Name: fmt.Sprintf("watch-m%d", m), Client: clients[0], Reader: clients[1], Rewind: rewind}
	}
	return watchers, nil
}
