package checker

import (
	"fmt"

	"github.com/podsafe/podsafe/history"
)

// The node restriction half of the authority checker (PS-1): a kubelet
// deletes or evicts only pods bound to its own node, whatever the grace.
// The API server refuses the others (apiserver's node restriction); a run
// with its authority bypassed, or a control plane that lacks the rule,
// shows them here.

// podBindings is where the store recorded each pod bound: the node of
// each UID, and per pod name (namespace, name) its versions that decode,
// as indices into the view's pod versions, in store order.
type podBindings struct {
	pods  *podIndex
	byUID map[string]string
	byKey map[nsName][]int32
}

// nsName names a pod: its namespace and name.
type nsName struct{ namespace, name string }

// podBindings reads, from the store's record of pods, every version that
// decodes, in store order. A pod is bound once (LC-3), so any version of a
// UID with a node tells its node.
func (pi *podIndex) podBindings() *podBindings {
	pi.bindOnce.Do(func() {
		pb := &podBindings{pods: pi, byUID: map[string]string{}, byKey: map[nsName][]int32{}}
		for k, vr := range pi.versions {
			if vr.pod == nil {
				continue
			}
			ev := &pi.store[vr.store]
			if node, uid := vr.pod.Spec.NodeName, vr.pod.Metadata.UID; node != "" && uid != "" {
				pb.byUID[uid] = node
			}
			key := nsName{ev.Namespace, ev.Name}
			pb.byKey[key] = append(pb.byKey[key], int32(k))
		}
		pi.bindings = pb
	})
	return pi.bindings
}

// nodeAtCall returns the node of the pod c deleted: by the UID its answer
// named, else the last version of its name the store recorded before the
// call began (none when that version was its deletion or named no node).
func nodeAtCall(c history.APICall, pb *podBindings) (string, bool) {
	if c.UID != "" {
		if n, ok := pb.byUID[c.UID]; ok {
			return n, true
		}
	}
	last := -1
	for _, k := range pb.byKey[nsName{c.Namespace, c.Name}] {
		if pb.pods.store[pb.pods.versions[k].store].T > c.Invoke {
			break
		}
		last = int(k)
	}
	if last < 0 {
		return "", false
	}
	vr := pb.pods.versions[last]
	if pb.pods.store[vr.store].Type == history.StoreDeleted || vr.pod.Spec.NodeName == "" {
		return "", false
	}
	return vr.pod.Spec.NodeName, true
}

// crossNodeDeletions judges every pod deletion and eviction by a kubelet
// that may have happened: it returns the evidence of those of a pod bound
// to another node (at most max), how many there were, and how many were
// judged (the pod's node known from the store).
func crossNodeDeletions(h *history.History, pi *podIndex, max int) (ev []Evidence, illegal, judged int) {
	var calls []int
	for i := range h.API {
		c := &h.API[i]
		if _, kubelet := kubeletNode(c.Identity); kubelet && isPodDeletion(c) && mayHaveHappened(c) {
			calls = append(calls, i)
		}
	}
	if len(calls) == 0 {
		return nil, 0, 0
	}
	pb := pi.podBindings()
	for _, i := range calls {
		c := h.API[i]
		node, known := nodeAtCall(c, pb)
		if !known {
			continue
		}
		judged++
		own, _ := kubeletNode(c.Identity)
		if node == own {
			continue
		}
		illegal++
		if len(ev) < max {
			how := "deleted"
			if c.Subresource == "eviction" {
				how = "evicted"
			}
			grace := "its own grace"
			if c.GracePeriodSeconds != nil {
				grace = fmt.Sprintf("grace %d", *c.GracePeriodSeconds)
			}
			ev = append(ev, Evidence{
				Key: podRef(c.Namespace, c.Name),
				Description: fmt.Sprintf("%s %s pod %s (%s, %s) bound to node %s: a kubelet deletes only the pods bound to its own node (PS-1, node restriction)",
					c.Identity, how, podRef(c.Namespace, c.Name), callRef(&c), grace, node),
				At:  c.Invoke,
				API: apiCalls(h.API, i),
			})
		}
	}
	return ev, illegal, judged
}
