package checker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/podsafe/podsafe/history"
)

// The taint eviction half of the node-health checker: the controller that
// evicts pods from nodes with NoExecute taints (kube-controller-manager's
// taint-eviction controller, which marks each pod it deletes with
// condition DisruptionTarget, reason DeletionByTaintManager) must act on a
// taint the node has. A pod it marked while its node showed no NoExecute
// taint the pod does not tolerate for good, in any state of the window
// before the mark, was evicted from a node the controller saw through a
// stale view (kubernetes#119862, #139992).

// podReasonTaintManager is the reason of the taint eviction controller's
// DisruptionTarget condition (upstream's
// v1.PodReasonDeletionByTaintManager).
const podReasonTaintManager = "DeletionByTaintManager"

// taintViewWindow is how far back a NoExecute taint excuses an eviction:
// a healthy controller's view of a node trails the store by at most the
// scheduler's lag (the same informers), plus the recorder's slack.
const taintViewWindow = schedViewLag + schedRecordSlack

// taintPod is the part of a pod the judgment reads.
type taintPod struct {
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
		UID       string `json:"uid"`
	} `json:"metadata"`
	Spec struct {
		NodeName    string              `json:"nodeName"`
		Tolerations []corev1.Toleration `json:"tolerations"`
	} `json:"spec"`
	Status struct {
		Conditions []struct {
			Type   string `json:"type"`
			Reason string `json:"reason"`
		} `json:"conditions"`
	} `json:"status"`
}

func (p *taintPod) markedByTaintManager() bool {
	for _, c := range p.Status.Conditions {
		if c.Type == "DisruptionTarget" && c.Reason == podReasonTaintManager {
			return true
		}
	}
	return false
}

// taintNodeState is one version of a node's NoExecute taints.
type taintNodeState struct {
	t      int64
	taints []corev1.Taint
}

// taintEviction is one pod the controller marked for eviction.
type taintEviction struct {
	pod  taintPod
	t    int64
	rv   string
	node string
	// bound is when the record first showed the pod on its node.
	bound int64
}

// taintEvictions collects the taint eviction controller's marks over the
// record.
func taintEvictions(h *history.History) (evictions []taintEviction, decodeErrs int) {
	marked := map[string]bool{} // pod UIDs already marked
	seen := map[string]bool{}   // pod UIDs recorded before
	bound := map[string]int64{} // pod key -> when first recorded on a node
	for _, e := range h.Store {
		switch e.Resource {
		case "pods":
			key := e.Namespace + "/" + e.Name
			if e.Type == history.StoreDeleted {
				delete(bound, key)
				continue
			}
			if _, ok := bound[key]; !ok && bytes.Contains(e.Object, []byte(`"nodeName":"`)) {
				bound[key] = e.T
			}
			if !bytes.Contains(e.Object, []byte(podReasonTaintManager)) {
				seen[key] = true
				continue
			}
			var p taintPod
			if err := json.Unmarshal(e.Object, &p); err != nil {
				decodeErrs++
				continue
			}
			first := !seen[key]
			seen[key] = true
			// A pod first recorded already marked (the record's first
			// list) was marked at a time the record does not know.
			if first || !p.markedByTaintManager() || marked[p.Metadata.UID] || p.Spec.NodeName == "" {
				continue
			}
			marked[p.Metadata.UID] = true
			b, ok := bound[key]
			if !ok {
				b = -1
			}
			evictions = append(evictions, taintEviction{pod: p, t: e.T, rv: e.RV, node: p.Spec.NodeName, bound: b})
		}
	}
	return evictions, decodeErrs
}

// evicts reports whether a NoExecute taint can make the controller evict
// the pod: it does not tolerate it, or only for a while.
func (p *taintPod) evictedBy(t *corev1.Taint) bool {
	_, evicted := p.tolerates(t)
	return evicted
}

// tolerates returns how long the pod tolerates a NoExecute taint (0 when
// not at all) and whether the taint evicts it at all: the first toleration
// that matches decides, as upstream's GetMatchingTolerations takes it.
func (p *taintPod) tolerates(t *corev1.Taint) (time.Duration, bool) {
	for i := range p.Spec.Tolerations {
		if tol := &p.Spec.Tolerations[i]; tol.ToleratesTaint(klog.Background(), t, false) {
			if tol.TolerationSeconds == nil {
				return 0, false
			}
			return time.Duration(max(0, *tol.TolerationSeconds)) * time.Second, true
		}
	}
	return 0, true
}

// taintEarlySlack: an eviction counts as early only when it came more than
// this much before the pod's toleration ran out (the recorder's slack on
// the taint's and the mark's records).
const taintEarlySlack = 2 * time.Second

// controllerFaulted reports whether a fault was on the controller-manager
// or its way to the store in [from, t] (or healed less than the recovery
// lag before): a process resumed from SIGSTOP, restarted or cut off acts
// on the view it had, and podsafe does not hold it to what it could not
// see. A frozen watch is no such fault: a watch that stalls with every
// other request answered is the stale view the guarantee is about.
func controllerFaulted(h *history.History, from, t int64) bool {
	involved := func(name string) bool {
		return strings.Contains(name, "controller") || strings.HasPrefix(name, "kube-apiserver") || strings.HasPrefix(name, "etcd")
	}
	for _, iv := range h.Nemesis {
		if iv.Start > t || iv.FaultEffect() == history.EffectFreezeWatch {
			continue
		}
		if iv.Healed && iv.End+int64(schedRecoveryLag) < from {
			continue
		}
		for _, c := range iv.Components {
			if involved(c) {
				return true
			}
		}
		for _, l := range iv.Links {
			if involved(l.From) || involved(l.To) {
				return true
			}
		}
	}
	return false
}

// judgeTaintEvictions returns evidence for each eviction no taint in the
// window explains, and how many it judged and left.
// nodes holds every node's versions of its NoExecute taints, in record
// order (CheckNodeHealth collects them as it decodes the nodes).
func judgeTaintEvictions(h *history.History, nodes map[string][]taintNodeState, maxEvidence int) (illegal []Evidence, nIllegal, judged, excused, decodeErrs int) {
	evictions, decodeErrs := taintEvictions(h)
	// What the record's first list holds was there before it began: when
	// it came is not known.
	recordStart := int64(1<<63 - 1)
	for _, e := range h.Store {
		recordStart = min(recordStart, e.T)
	}
	recordStart += int64(time.Second)
	for _, ev := range evictions {
		if controllerFaulted(h, ev.t, ev.t) {
			excused++
			continue
		}
		states := nodes[ev.node]
		from := ev.t - int64(taintViewWindow)
		justified, seen := false, false
		var lastTaint int64 = -1
		// The episode of evicting taints the mark falls in: since when the
		// node had one without a break, and the shortest time the pod
		// tolerated any of them.
		episode, tolerated := int64(-1), time.Duration(1<<63-1)
		for i, s := range states {
			// The state in force at the window's start, and every later
			// one up to the mark.
			next := int64(1<<63 - 1)
			if i+1 < len(states) {
				next = states[i+1].t
			}
			if s.t > ev.t {
				break
			}
			evicting := false
			for k := range s.taints {
				if d, ok := ev.pod.tolerates(&s.taints[k]); ok {
					evicting = true
					lastTaint = min(next, ev.t)
					if next >= from {
						justified = true
					}
					if episode < 0 {
						episode = s.t
					}
					tolerated = min(tolerated, d)
				}
			}
			if !evicting {
				episode, tolerated = -1, time.Duration(1<<63-1)
			}
			if next >= from {
				seen = true
			}
		}
		if !seen {
			excused++ // the record of the node does not reach the mark
			continue
		}
		judged++
		var why string
		if justified {
			// Not before the pod's toleration ran out, counted from when
			// the node got the taint or the pod came, whichever is later.
			start := max(episode, ev.bound)
			if episode <= recordStart || ev.bound <= recordStart || tolerated <= taintEarlySlack || time.Duration(ev.t-start)+taintEarlySlack >= tolerated {
				continue
			}
			why = fmt.Sprintf("the pod tolerates the node's NoExecute taints for %s and the controller acted %s after %s at %s",
				tolerated, time.Duration(ev.t-start).Round(time.Millisecond),
				map[bool]string{true: "the node got them", false: "the pod was bound there"}[start == episode], nanos(start))
		}
		nIllegal++
		if len(illegal) >= maxEvidence {
			continue
		}
		if why != "" {
			illegal = append(illegal, Evidence{Key: ev.pod.Metadata.Namespace + "/" + ev.pod.Metadata.Name, At: ev.t, Description: fmt.Sprintf(
				"the taint eviction controller marked pod %s/%s (uid %s) on node %s for deletion (%s) at %s (resourceVersion %s), too early: %s",
				ev.pod.Metadata.Namespace, ev.pod.Metadata.Name, ev.pod.Metadata.UID, ev.node, podReasonTaintManager, nanos(ev.t), ev.rv, why)})
			continue
		}
		why = "the node never had a NoExecute taint the pod does not tolerate for good in the record"
		if lastTaint >= 0 {
			why = fmt.Sprintf("its last NoExecute taint the pod does not tolerate for good was gone at %s, %s before the mark (a healthy controller's view trails by at most %s)",
				nanos(lastTaint), time.Duration(ev.t-lastTaint).Round(time.Millisecond), taintViewWindow)
		}
		illegal = append(illegal, Evidence{Key: ev.pod.Metadata.Namespace + "/" + ev.pod.Metadata.Name, At: ev.t, Description: fmt.Sprintf(
			"the taint eviction controller marked pod %s/%s (uid %s) on node %s for deletion (%s) at %s (resourceVersion %s), but %s",
			ev.pod.Metadata.Namespace, ev.pod.Metadata.Name, ev.pod.Metadata.UID, ev.node, podReasonTaintManager, nanos(ev.t), ev.rv, why)})
	}
	return illegal, nIllegal, judged, excused, decodeErrs
}
