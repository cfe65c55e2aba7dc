package specs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

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
	"priorityclasses.scheduling.k8s.io", "statefulsets.apps", "replicasets.apps",
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
