package checker

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/podsafe/podsafe/history"
)

// removalGuarantees are what a pod removed without a grace-0 deletion
// breaks: only the kubelet removes a pod, once its processes are confirmed
// terminated (PS-8), finishing the deletion with grace 0 (LC-11, PS-4).
var removalGuarantees = []string{"PS-8", "LC-11"}

// removedPod is a pod as the store recorded it deleted: the last version
// of its object.
type removedPod struct {
	Metadata struct {
		Namespace                  string  `json:"namespace"`
		Name                       string  `json:"name"`
		UID                        string  `json:"uid"`
		DeletionTimestamp          *string `json:"deletionTimestamp"`
		DeletionGracePeriodSeconds *int64  `json:"deletionGracePeriodSeconds"`
	} `json:"metadata"`
	Spec struct {
		NodeName                      string `json:"nodeName"`
		TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds"`
	} `json:"spec"`
	Status struct {
		Phase string `json:"phase"`
	} `json:"status"`
}

// gracefulRemovals finds the pods the store removed although no deletion
// that may have happened before could remove them. By kube-apiserver's
// rules a pod bound to a node and not terminal is removed from the store
// only by a deletion asking for grace 0 (the kubelet's at the end of a
// graceful deletion, or a force deletion), or by a first deletion without a
// grace of a pod whose spec says 0; a graceful deletion only marks it
// terminating, and a later graceful one only shortens the deadline. A
// removal with none of those before it is the API server removing a pod
// whose containers may still run, before its kubelet confirmed them
// terminated.
//
// It judges only what the history can show whole: a complete history of
// the embedded target (history.ExtraTarget), where every component's API
// calls are recorded; on the kube target kube-controller-manager's pod GC
// force deletes with calls the history does not hold. A removed pod is
// judged when its last version is bound, not terminal, its spec's grace is
// not 0, and its deletion (if marked) has a grace above 0. A deletion of
// unknown outcome counts as done, and a grace-0 deletecollection in the
// pod's namespace (or every namespace) counts as a grace-0 deletion of it.
// why is "" when the history can be judged, else why not.
func gracefulRemovals(h *history.History, maxEvidence int) (ev []Evidence, illegal, judged int, why string) {
	switch {
	case !h.Complete:
		return nil, 0, 0, "the history has no closing record (a crashed run may have lost calls)"
	case h.Meta.Extra[history.ExtraTarget] != history.TargetEmbedded:
		return nil, 0, 0, "not the embedded target: components whose API calls the history does not hold may force delete"
	}
	// The deletions that may have happened, by pod; grace-0 collection
	// deletions by namespace. Invoke times are sorted (h.API is).
	type del struct {
		i     int
		force bool
	}
	byPod := map[string][]del{}
	var collections []int
	for i := range h.API {
		c := &h.API[i]
		switch {
		case isPodDeletion(c) && mayHaveHappened(c):
			k := podRef(c.Namespace, c.Name)
			byPod[k] = append(byPod[k], del{i, isForce(c)})
		case isPodCollectionDeletion(c) && mayHaveHappened(c) && isForce(c):
			collections = append(collections, i)
		}
	}
	forcedBefore := func(ns, pod string, t int64) bool {
		for _, d := range byPod[podRef(ns, pod)] {
			if h.API[d.i].Invoke >= t {
				break
			}
			if d.force {
				return true
			}
		}
		for _, i := range collections {
			c := &h.API[i]
			if c.Invoke >= t {
				break
			}
			if c.Namespace == "" || c.Namespace == ns {
				return true
			}
		}
		return false
	}
	firstWithoutGrace := func(ns, pod string, t int64, spec *int64) bool {
		if spec == nil || *spec != 0 {
			return false
		}
		for _, d := range byPod[podRef(ns, pod)] {
			if c := &h.API[d.i]; c.Invoke < t && c.GracePeriodSeconds == nil {
				return true
			}
		}
		return false
	}
	for i := range h.Store {
		ev0 := &h.Store[i]
		if ev0.Type != history.StoreDeleted || ev0.Resource != "pods" || len(ev0.Object) == 0 {
			continue
		}
		var p removedPod
		if json.Unmarshal(ev0.Object, &p) != nil {
			continue
		}
		m := &p.Metadata
		if p.Spec.NodeName == "" || p.Status.Phase == "Succeeded" || p.Status.Phase == "Failed" ||
			(m.DeletionTimestamp != nil && (m.DeletionGracePeriodSeconds == nil || *m.DeletionGracePeriodSeconds == 0)) {
			continue // removed at once by rule, or a grace-0 deletion marked it
		}
		if firstWithoutGrace(m.Namespace, m.Name, ev0.T, p.Spec.TerminationGracePeriodSeconds) {
			continue
		}
		judged++
		if forcedBefore(m.Namespace, m.Name, ev0.T) {
			continue
		}
		illegal++
		if len(ev) >= maxEvidence {
			continue
		}
		calls := make([]int, 0, len(byPod[podRef(m.Namespace, m.Name)]))
		for _, d := range byPod[podRef(m.Namespace, m.Name)] {
			if h.API[d.i].Invoke < ev0.T {
				calls = append(calls, d.i)
			}
		}
		sort.Ints(calls)
		grace := "none"
		if g := m.DeletionGracePeriodSeconds; g != nil {
			grace = fmt.Sprintf("%d s", *g)
		}
		ev = append(ev, Evidence{
			Key: podRef(m.Namespace, m.Name),
			Description: fmt.Sprintf("PS-8: the store removed pod %s (UID %s, bound to node %s, phase %s, deletion grace %s) at rv %s, t=%s, and no deletion asking for grace 0 may have come before (%s of it before the removal, none with grace 0): the API server removed a pod its kubelet had not finished",
				podRef(m.Namespace, m.Name), m.UID, p.Spec.NodeName, orPending(p.Status.Phase), grace, ev0.RV, time.Duration(ev0.T), count(len(calls), "deletion")),
			API: apiCalls(h.API, calls...),
		})
	}
	return ev, illegal, judged, ""
}

func orPending(phase string) string {
	if phase == "" {
		return "Pending"
	}
	return phase
}
