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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	resourcehelper "k8s.io/component-helpers/resource"

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
	// decoded[i] is events[i]'s object, once the chunk of podChunk events
	// it is in was decoded (chunks[i/podChunk]); a replay decodes what it
	// reaches, a checker that replays everything has it decoded
	// beforehand on every processor (decodeAll).
	decoded []schedDecoded
	chunks  []sync.Once
	// nodes[i] is events[i]'s node as the view's nodes decoded it, if any.
	nodes []*nodeObject
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
		return buildSchedObjects(v.h.Store, nodes), true
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

// buildSchedObjects orders the scheduler's events of store; their objects
// are decoded later, a chunk at a time (see decode), the nodes' taken from
// the view's nodes when given.
func buildSchedObjects(store []history.StoreEvent, nodes *nodeIndex) *schedObjects {
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
		rvs: make([]uint64, len(idx)), decoded: make([]schedDecoded, len(idx)),
		nodes: make([]*nodeObject, len(idx)), chunks: make([]sync.Once, (len(idx)+podChunk-1)/podChunk)}
	var nodeAt map[int]*nodeObject
	if nodes != nil {
		nodeAt = make(map[int]*nodeObject, len(nodes.versions))
		for _, nv := range nodes.versions {
			nodeAt[nv.store] = nv.obj
		}
	}
	var hi int64
	for k, i := range idx {
		o.events[k] = store[i]
		hi = max(hi, store[i].T)
		o.times[k], o.rvs[k] = hi, rvs[i]
		o.nodes[k] = nodeAt[i]
	}
	return o
}

// decode makes sure the object of event k is decoded: it decodes the chunk
// of events k is in, once, whichever replay (or warm) gets there first.
func (o *schedObjects) decode(k int) {
	c := k / podChunk
	o.chunks[c].Do(func() {
		for k := c * podChunk; k < min((c+1)*podChunk, len(o.events)); k++ {
			ev, d := &o.events[k], &o.decoded[k]
			switch schedKindOf(ev.Resource) {
			case schedPods:
				d.pod, d.err = schedDecode(ev, "pod", decodeSchedPod)
			case schedNodes:
				if n := o.nodes[k]; n != nil && ev.Type != history.StoreDeleted {
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
	})
}

// decodeAll decodes every object on every processor, for a checker that
// replays them all (the spread checker), until ctx ends.
func (o *schedObjects) decodeAll(ctx context.Context) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(o.chunks)) {
		wg.Go(func() {
			for ctx.Err() == nil {
				c := int(next.Add(1)) - 1
				if c >= len(o.chunks) {
					return
				}
				o.decode(c * podChunk)
			}
		})
	}
	wg.Wait()
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

// schedPodJSON decodes only the fields of a pod that scheduling reads.
type schedPodJSON struct {
	Metadata struct {
		Name              string                  `json:"name"`
		Namespace         string                  `json:"namespace"`
		UID               string                  `json:"uid"`
		Labels            map[string]string       `json:"labels"`
		DeletionTimestamp *string                 `json:"deletionTimestamp"`
		OwnerReferences   []metav1.OwnerReference `json:"ownerReferences"`
	} `json:"metadata"`
	Spec   schedPodSpecJSON `json:"spec"`
	Status struct {
		Phase             corev1.PodPhase `json:"phase"`
		NominatedNodeName string          `json:"nominatedNodeName"`
	} `json:"status"`
}

// schedPodSpecJSON is the part of a pod spec scheduling reads.
type schedPodSpecJSON struct {
	NodeName                  string                            `json:"nodeName"`
	Priority                  *int32                            `json:"priority"`
	PreemptionPolicy          *string                           `json:"preemptionPolicy"`
	NodeSelector              map[string]string                 `json:"nodeSelector"`
	Affinity                  *corev1.Affinity                  `json:"affinity"`
	Tolerations               []corev1.Toleration               `json:"tolerations"`
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints"`
	Containers                []schedContainerJSON              `json:"containers"`
	InitContainers            []schedContainerJSON              `json:"initContainers"`
	Overhead                  corev1.ResourceList               `json:"overhead"`
	Resources                 *corev1.ResourceRequirements      `json:"resources"`
	Volumes                   []struct {
		PersistentVolumeClaim *struct{} `json:"persistentVolumeClaim"`
		Ephemeral             *struct{} `json:"ephemeral"`
	} `json:"volumes"`
	ResourceClaims []struct{} `json:"resourceClaims"`
}

type schedContainerJSON struct {
	Resources struct {
		Requests corev1.ResourceList `json:"requests"`
	} `json:"resources"`
	Ports []struct {
		HostPort int32 `json:"hostPort"`
	} `json:"ports"`
	// RestartPolicy Always on an init container makes it a sidecar.
	RestartPolicy *corev1.ContainerRestartPolicy `json:"restartPolicy"`
}

// schedRequests computes what the pod asks of a node as the scheduler does
// (framework.PodRequests, with component-helpers' PodRequests): pod-level
// requests where set; otherwise the containers' plus the sidecars', at
// least what any init container needs beside the sidecars started before
// it; plus the overhead; and one pod slot.
func schedRequests(sp *schedPodSpecJSON) schedRes {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Overhead: sp.Overhead, Resources: sp.Resources,
		Containers: make([]corev1.Container, len(sp.Containers)), InitContainers: make([]corev1.Container, len(sp.InitContainers))}}
	for i, c := range sp.Containers {
		pod.Spec.Containers[i].Resources.Requests = c.Resources.Requests
	}
	for i, c := range sp.InitContainers {
		pod.Spec.InitContainers[i].Resources.Requests = c.Resources.Requests
		pod.Spec.InitContainers[i].RestartPolicy = c.RestartPolicy
	}
	r := schedResOf(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}))
	r.pods = 1
	return r
}

func decodeSchedPod(raw []byte) (*schedPod, error) {
	var j schedPodJSON
	if err := json.Unmarshal(raw, &j); err != nil {
		return nil, err
	}
	m, sp := &j.Metadata, &j.Spec
	p := &schedPod{key: m.Namespace + "/" + m.Name, uid: m.UID, namespace: m.Namespace, name: m.Name,
		labels: m.Labels, node: sp.NodeName, nominated: j.Status.NominatedNodeName,
		deleting: m.DeletionTimestamp != nil, phase: j.Status.Phase,
		spread: sp.TopologySpreadConstraints, nodeSelector: sp.NodeSelector, affinity: sp.Affinity,
		tolerations:  sp.Tolerations,
		preemptNever: sp.PreemptionPolicy != nil && *sp.PreemptionPolicy == string(corev1.PreemptNever)}
	if sp.Priority != nil {
		p.priority = *sp.Priority
	}
	for _, ref := range m.OwnerReferences {
		if ref.Controller != nil && *ref.Controller {
			p.owner = ref.Kind + "/" + ref.Name
		}
	}
	if a := sp.Affinity; a != nil && (a.PodAffinity != nil || a.PodAntiAffinity != nil) {
		p.hasPodAffinityTerms = true
	}
	p.requests = schedRequests(sp)
	p.filtered = len(sp.ResourceClaims) > 0
	for _, v := range sp.Volumes {
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			p.filtered = true
		}
	}
	for _, cs := range [][]schedContainerJSON{sp.Containers, sp.InitContainers} {
		for _, c := range cs {
			for _, port := range c.Ports {
				if port.HostPort > 0 {
					p.filtered = true
				}
			}
		}
	}
	return p, nil
}

func decodeSchedNode(raw []byte) (*schedNode, error) {
	var j nodeObject
	if err := json.Unmarshal(raw, &j); err != nil {
		return nil, err
	}
	return &schedNode{name: j.Metadata.Name, labels: j.Metadata.Labels, taints: j.Spec.Taints,
		unschedulable: j.Spec.Unschedulable, alloc: schedResOf(j.Status.Allocatable)}, nil
}

func decodeSchedPDB(raw []byte) (*schedPDB, error) {
	var j struct {
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
		Spec struct {
			Selector *metav1.LabelSelector `json:"selector"`
		} `json:"spec"`
		Status struct {
			DisruptionsAllowed int32                  `json:"disruptionsAllowed"`
			DisruptedPods      map[string]metav1.Time `json:"disruptedPods"`
		} `json:"status"`
	}
	if err := json.Unmarshal(raw, &j); err != nil {
		return nil, err
	}
	pdb := &schedPDB{namespace: j.Metadata.Namespace, name: j.Metadata.Name, allowed: j.Status.DisruptionsAllowed,
		selector: labels.Nothing()}
	if len(j.Status.DisruptedPods) > 0 {
		pdb.disrupted = make(map[string]bool, len(j.Status.DisruptedPods))
		for name := range j.Status.DisruptedPods {
			pdb.disrupted[name] = true
		}
	}
	if j.Spec.Selector != nil {
		if sel, err := metav1.LabelSelectorAsSelector(j.Spec.Selector); err == nil {
			pdb.selector = sel
		}
	}
	return pdb, nil
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
	return buildSchedObjects(h.Store, nil).replay()
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
	r.decode(i)
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
