package specs

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/history"
	"github.com/podsafe/podsafe/raftstore"
)

// StoreEventResources are the resources whose every committed change a run
// records in its history (store lines): what the phase, preemption and
// topology-spread checkers rebuild the cluster's state from. Leases are left
// out: node heart-beats and the register workload would drown the rest.
var StoreEventResources = []string{
	"pods", "nodes", "volumeattachments.storage.k8s.io", "poddisruptionbudgets.policy",
	"priorityclasses.scheduling.k8s.io", "statefulsets.apps", "replicasets.apps",
}

// recordStoreEvents follows every resource of StoreEventResources on some
// running member's store (each member applies every committed entry in raft
// order) and writes each change to rec, until ctx ends. When the member it
// follows goes away it resumes on another from the last recorded
// resourceVersion; a change that was compacted meanwhile is lost, and the
// gap is noted in the history.
func recordStoreEvents(ctx context.Context, c *cluster.Cluster, rec *history.Recorder) *sync.WaitGroup {
	var wg sync.WaitGroup
	for _, res := range StoreEventResources {
		wg.Add(1)
		go func() {
			defer wg.Done()
			followResource(ctx, c, rec, res)
		}()
	}
	return &wg
}

func followResource(ctx context.Context, c *cluster.Cluster, rec *history.Recorder, resource string) {
	// From the start of the log (the cluster has just started, so the
	// watch window still holds it); 0 would mean from the present.
	var last uint64 = 1
	member := 0
	for ctx.Err() == nil {
		st := c.Store(member % c.Members())
		member++
		if st == nil {
			sleepCtx(ctx, 50*time.Millisecond)
			continue
		}
		ch, err := st.Watch(ctx, resource, last)
		if errors.Is(err, raftstore.ErrTooOld) {
			rec.Log("store events lost", map[string]string{"resource": resource, "after_rv": strconv.FormatUint(last, 10)})
			last = 0
			continue
		}
		if err != nil {
			sleepCtx(ctx, 50*time.Millisecond)
			continue
		}
		for ev := range ch {
			if ev.Object.RV > last {
				last = ev.Object.RV
			}
			rec.Store(history.StoreEvent{
				Type: history.StoreEventType(ev.Type), Resource: ev.Object.Key.Resource,
				Namespace: ev.Object.Key.Namespace, Name: ev.Object.Key.Name,
				RV: strconv.FormatUint(ev.Object.RV, 10), Object: json.RawMessage(ev.Object.Data),
			})
		}
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
