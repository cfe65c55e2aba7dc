package checker

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsafe/podsafe/history"
)

// The view's scheduler objects: the store events of pods, nodes, budgets
// and priority classes in commit order, each decoded once into what
// scheduling depends on, which the preemption and topology-spread checkers
// replay, each with a state of its own.

// schedObjects are the events a schedReplay replays.
type schedObjects struct {
	// events are the store events of pods, nodes, PodDisruptionBudgets and
	// PriorityClasses ordered by resourceVersion (the store's commit
	// order; each resource is recorded by its own watch, so the history's
	// order interleaves them loosely).
	events []history.StoreEvent
	// times[i] is the largest recorder time among events[:i+1]: one
	// resource's recording may trail another's a little, so times are made
	// monotonic for window searches.
	times []int64
	// rvs[i] is events[i]'s resourceVersion (0 when it does not parse).
	rvs []uint64
	// decoded[i] is events[i]'s object.
	decoded []schedDecoded
}

// schedDecoded is the object of one event of schedObjects, decoded: the
// field of its kind, nil when the event deletes the object, or err when it
// does not decode. Decoded objects are shared between states and replays
// and never changed.
type schedDecoded struct {
	pod   *schedPod
	node  *schedNode
	pdb   *schedPDB
	class *schedClass
	err   error
}

// schedObjects returns the view's scheduler objects, decoding them on
// first use.
func (v *view) schedObjects(ctx context.Context) (*schedObjects, bool) {
	return v.schedPart.get(ctx, v, "scheduler objects", func(ctx context.Context) (*schedObjects, bool) {
		nodes, ok := v.nodes(ctx)
		if !ok {
			return nil, false
		}
		return buildSchedObjects(ctx, v.h.Store, nodes)
	})
}

// schedReplay returns a replay of the view's scheduler objects from the
// empty state.
func (v *view) schedReplay(ctx context.Context) (*schedReplay, bool) {
	objs, ok := v.schedObjects(ctx)
	if !ok {
		return nil, false
	}
	return objs.replay(), true
}

// buildSchedObjects orders and decodes the scheduler's events of store, the
// pods on every processor; nodes come from the view's nodes when given. It
// reports false when ctx ended first.
func buildSchedObjects(ctx context.Context, store []history.StoreEvent, nodes *nodeIndex) (*schedObjects, bool) {
	var idx []int
	for i := range store {
		if schedKindOf(store[i].Resource) != schedOther {
			idx = append(idx, i)
		}
	}
	rvOf := func(e *history.StoreEvent) uint64 {
		n, err := strconv.ParseUint(e.RV, 10, 64)
		if err != nil {
			return 0
		}
		return n
	}
	rvs := make([]uint64, len(store))
	for _, i := range idx {
		rvs[i] = rvOf(&store[i])
	}
	sort.SliceStable(idx, func(a, b int) bool { return rvs[idx[a]] < rvs[idx[b]] })
	o := &schedObjects{events: make([]history.StoreEvent, len(idx)), times: make([]int64, len(idx)),
		rvs: make([]uint64, len(idx)), decoded: make([]schedDecoded, len(idx))}
	var hi int64
	for k, i := range idx {
		o.events[k] = store[i]
		hi = max(hi, store[i].T)
		o.times[k], o.rvs[k] = hi, rvs[i]
	}
	var nodeAt map[int]*nodeObject
	if nodes != nil {
		nodeAt = make(map[int]*nodeObject, len(nodes.versions))
		for _, nv := range nodes.versions {
			nodeAt[nv.store] = nv.obj
		}
	}

	// Pods are most of the events and the dearest to decode: every
	// processor takes a share.
	var next atomic.Int64
	var cancelled atomic.Bool
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(idx)/podChunk+1) {
		wg.Go(func() {
			for {
				if ctx.Err() != nil {
					cancelled.Store(true)
					return
				}
				lo := int(next.Add(podChunk)) - podChunk
				if lo >= len(idx) {
					return
				}
				for k := lo; k < min(lo+podChunk, len(idx)); k++ {
					ev, d := &o.events[k], &o.decoded[k]
					switch schedKindOf(ev.Resource) {
					case schedPods:
						d.pod, d.err = schedDecode(ev, "pod", decodeSchedPod)
					case schedNodes:
						if n, ok := nodeAt[idx[k]]; ok && n != nil && ev.Type != history.StoreDeleted {
							d.node = schedNodeOf(n)
							continue
						}
						d.node, d.err = schedDecode(ev, "node", decodeSchedNode)
					case schedPDBs:
						d.pdb, d.err = schedDecode(ev, "PodDisruptionBudget", decodeSchedPDB)
					case schedClasses:
						d.class, d.err = schedDecode(ev, "PriorityClass", decodeSchedClass)
					}
				}
			}
		})
	}
	wg.Wait()
	if cancelled.Load() {
		return nil, false
	}
	return o, true
}

// schedDecode decodes with decode the object of ev, a store event of the
// what named by its key; it returns nil when ev deletes the object (decode
// itself returns an object or an error).
func schedDecode[T any](ev *history.StoreEvent, what string, decode func([]byte) (*T, error)) (*T, error) {
	if ev.Type == history.StoreDeleted {
		return nil, nil
	}
	v, err := decode(ev.Object)
	if err != nil {
		return nil, fmt.Errorf("store event rv %s of %s %s: %w", ev.RV, what, schedKey(ev), err)
	}
	return v, nil
}

// decodeSchedClass decodes a PriorityClass.
func decodeSchedClass(raw []byte) (*schedClass, error) {
	var pc struct {
		Value            int32   `json:"value"`
		PreemptionPolicy *string `json:"preemptionPolicy"`
	}
	if err := json.Unmarshal(raw, &pc); err != nil {
		return nil, err
	}
	return &schedClass{value: pc.Value, preemptNever: pc.PreemptionPolicy != nil && *pc.PreemptionPolicy == string(corev1.PreemptNever)}, nil
}

// schedNodeOf is the part of a decoded node that scheduling depends on.
func schedNodeOf(n *nodeObject) *schedNode {
	return &schedNode{name: n.Metadata.Name, labels: n.Metadata.Labels, taints: n.Spec.Taints,
		unschedulable: n.Spec.Unschedulable, alloc: schedResOf(n.Status.Allocatable)}
}

// schedReplay replays scheduler objects in commit order, keeping every
// change so that checkers can look back from any event over a window of
// earlier states without replaying from the start.
type schedReplay struct {
	*schedObjects
	state   *schedState
	changes []schedChange
	next    int
}

// replay starts a replay of o from the empty state.
func (o *schedObjects) replay() *schedReplay {
	return &schedReplay{schedObjects: o, state: newSchedState(), changes: make([]schedChange, 0, len(o.events))}
}

// newSchedReplay decodes h's scheduler objects on their own and starts a
// replay of them.
func newSchedReplay(h *history.History) *schedReplay {
	o, _ := buildSchedObjects(context.Background(), h.Store, nil)
	return o.replay()
}

// step applies the next event and returns its change; false when none is
// left. A change that did not decode is kept as an empty change, so that
// indexes stay aligned, and returned with the error.
func (r *schedReplay) step() (*schedChange, bool, error) {
	if r.next >= len(r.events) {
		return nil, false, nil
	}
	i := r.next
	r.next++
	ch, err := r.state.apply(&r.events[i], i, &r.decoded[i])
	if err != nil {
		ch = schedChange{kind: schedOther, idx: i, t: r.events[i].T}
	}
	r.changes = append(r.changes, ch)
	return &r.changes[i], true, err
}

// firstFromRV returns the index of the first event of resourceVersion rv
// or later.
func (r *schedReplay) firstFromRV(rv uint64) int {
	return sort.Search(len(r.rvs), func(i int) bool { return r.rvs[i] >= rv })
}

// firstAtOrAfter returns the index of the first event recorded at or after
// t.
func (r *schedReplay) firstAtOrAfter(t int64) int {
	return sort.Search(len(r.times), func(i int) bool { return r.times[i] >= t })
}
