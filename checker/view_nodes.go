package checker

import (
	"bytes"
	"context"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsafe/podsafe/history"
)

// The view's nodes: every store event of a node decoded once, into the
// union of what the checkers read of a node.

// nodeObject is the part of a Node any checker reads: the scheduler's
// fields (labels, taints, cordon, allocatable) and the conditions (the
// node controller's heart-beats, MemoryPressure, the fencing controller's
// Fenced).
type nodeObject struct {
	Metadata struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Unschedulable bool           `json:"unschedulable"`
		Taints        []corev1.Taint `json:"taints"`
	} `json:"spec"`
	Status struct {
		Allocatable corev1.ResourceList `json:"allocatable"`
		Conditions  []nodeCondition     `json:"conditions"`
	} `json:"status"`
}

// nodeCondition is one condition of a Node.
type nodeCondition struct {
	Type              string `json:"type"`
	Status            string `json:"status"`
	Reason            string `json:"reason"`
	LastHeartbeatTime string `json:"lastHeartbeatTime"`
}

// nodeVersion is one store event of a node (resource "nodes").
type nodeVersion struct {
	store int // index in h.Store
	// obj is the object as decoded; nil when the event has none or it does
	// not decode as a nodeObject (a checker that reads less of it then
	// decodes that part itself, see conditionTrue).
	obj *nodeObject
}

// nodeIndex is what the store events say of nodes.
type nodeIndex struct {
	store    []history.StoreEvent
	versions []nodeVersion
	// fences are, per node, the recording times of the changes that
	// turned its Fenced condition True (see nodeFences).
	fences map[string][]int64
	// memoryPressure: some node reported MemoryPressure.
	memoryPressure bool
}

// nodes returns the view's nodes, decoding them on first use.
func (v *view) nodes(ctx context.Context) (*nodeIndex, bool) {
	return v.nodePart.get(ctx, v, "nodes", func(ctx context.Context) (*nodeIndex, bool) { return buildNodeIndex(ctx, v.h.Store) })
}

func buildNodeIndex(ctx context.Context, store []history.StoreEvent) (*nodeIndex, bool) {
	ni := &nodeIndex{store: store}
	st := &stopper{ctx: ctx}
	for i := range store {
		if st.stopped() {
			return nil, false
		}
		ev := &store[i]
		if ev.Resource != "nodes" {
			continue
		}
		nv := nodeVersion{store: i}
		if len(ev.Object) > 0 {
			var n nodeObject
			if json.Unmarshal(ev.Object, &n) == nil {
				nv.obj = &n
			}
		}
		ni.versions = append(ni.versions, nv)
	}
	ni.fences = ni.nodeFences()
	for _, nv := range ni.versions {
		if ni.memoryPressure {
			break
		}
		if bytes.Contains(ni.store[nv.store].Object, []byte("MemoryPressure")) {
			ni.memoryPressure, _ = ni.conditionTrue(nv, "MemoryPressure")
		}
	}
	return ni, true
}

// conditionTrue reports whether the node version has the condition typ
// with status True; ok is false when the object does not decode.
func (ni *nodeIndex) conditionTrue(nv nodeVersion, typ string) (isTrue, ok bool) {
	if nv.obj == nil {
		return nodeConditionTrue(ni.store[nv.store].Object, typ)
	}
	for _, c := range nv.obj.Status.Conditions {
		if c.Type == typ && c.Status == "True" {
			isTrue = true
		}
	}
	return isTrue, true
}

// nodeFences returns, per node, the recording times of the store changes
// that turned its Fenced condition (podsafe.io/Fenced) True: the fencing
// controller records it only after every fence agent succeeded, so from
// then on what still runs there is cut off (PS-14).
func (ni *nodeIndex) nodeFences() map[string][]int64 {
	out := map[string][]int64{}
	fenced := map[string]bool{}
	for _, nv := range ni.versions {
		ev := &ni.store[nv.store]
		if !bytes.Contains(ev.Object, []byte(fencedConditionType)) {
			fenced[ev.Name] = false
			continue
		}
		now, ok := ni.conditionTrue(nv, fencedConditionType)
		if !ok {
			continue
		}
		if now && !fenced[ev.Name] && ev.Type != history.StoreDeleted {
			out[ev.Name] = append(out[ev.Name], ev.T)
		}
		fenced[ev.Name] = now
	}
	return out
}
