package checker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsafe/podsafe/history"
)

// NodeHealthChecker names the node-health checker in results. It judges
// the node lifecycle controller's marks (here) and the taint eviction
// controller's evictions (tainteviction.go).
const NodeHealthChecker = "node-health"

// nodeHealthGuarantees: the node controller acts on a node (LC-4) and its
// pods (PS-13) because the node stopped heart-beating, and only then.
var nodeHealthGuarantees = []string{"LC-4", "PS-13"}

// The node lifecycle controller's mark: Ready=Unknown with this reason
// (upstream's nodelifecycle "NodeStatusUnknown", "Kubelet stopped posting
// node status.").
const nodeReasonStatusUnknown = "NodeStatusUnknown"

// nodeLeaseNamespace holds the nodes' heart-beat Leases.
const nodeLeaseNamespace = "kube-node-lease"

// LogNodeMonitorGrace is the history log line's attribute that states the
// node controller's grace period (kube-controller-manager's
// --node-monitor-grace-period), on the "kube target started" line.
const LogNodeMonitorGrace = "node_monitor_grace_period"

// nodeHealthSlack covers the recorder: a store line's time trails its
// commit, and two resources' followers (the nodes', the Leases') trail by
// different amounts, by seconds on a loaded machine. A mark counts as
// premature only when the node's last sign of life came less than the
// grace period less this slack before it: at least 2 s, half the grace
// period on longer ones.
func nodeHealthSlack(grace time.Duration) time.Duration { return max(2*time.Second, grace/2) }

// nodeHeartbeat is one committed sign of life of a node: a renewal of its
// Lease, or a status the kubelet posted with a new heart-beat time.
type nodeHeartbeat struct {
	t    int64
	rv   string
	what string
}

// nodeMark is one change by which the node controller declared a node's
// health unknown.
type nodeMark struct {
	node string
	t    int64
	rv   string
}

// nodeJSON is the part of a Node the checker reads.
type nodeJSON struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Taints []corev1.Taint `json:"taints"`
	} `json:"spec"`
	Status struct {
		Conditions []nodeCondition `json:"conditions"`
	} `json:"status"`
}

// health returns what the node-health checker reads of a node version.
func (ni *nodeIndex) health(nv nodeVersion) (*nodeJSON, error) {
	var n nodeJSON
	if o := nv.obj; o != nil {
		n.Metadata.Name, n.Spec.Taints = o.Metadata.Name, o.Spec.Taints
		n.Status.Conditions = o.Status.Conditions
		return &n, nil
	}
	if err := json.Unmarshal(ni.store[nv.store].Object, &n); err != nil {
		return nil, err
	}
	return &n, nil
}

// ready returns the node's Ready condition's status, reason and heart-beat
// time ("" when it has none).
func (n *nodeJSON) ready() (status, reason, heartbeat string) {
	for _, c := range n.Status.Conditions {
		if c.Type == "Ready" {
			return c.Status, c.Reason, c.LastHeartbeatTime
		}
	}
	return "", "", ""
}

// nodeHealthGrace reads the grace period from the history's logs (0 when
// it does not state it).
func nodeHealthGrace(h *history.History) time.Duration {
	for _, l := range h.Logs {
		if v, ok := l.Attrs[LogNodeMonitorGrace]; ok {
			if d, err := time.ParseDuration(v); err == nil && d > 0 {
				return d
			}
		}
	}
	return 0
}

// nodeHealthApplies reports whether h holds what the checker judges: the
// record of the nodes' heart-beat Leases (the kube target keeps it), or a
// pod the taint eviction controller marked.
func nodeHealthApplies(h *history.History) bool {
	for _, e := range h.Store {
		if e.Resource == "leases.coordination.k8s.io" && e.Namespace == nodeLeaseNamespace {
			return true
		}
		if e.Resource == "pods" && bytes.Contains(e.Object, []byte(podReasonTaintManager)) {
			return true
		}
	}
	return false
}

// nodeLeasesRecorded reports whether h records the nodes' heart-beat
// Leases: the half of nodeHealthApplies that reads no object.
func nodeLeasesRecorded(h *history.History) bool {
	for _, e := range h.Store {
		if e.Resource == "leases.coordination.k8s.io" && e.Namespace == nodeLeaseNamespace {
			return true
		}
	}
	return false
}

// CheckNodeHealth judges every time the node controller declared a node's
// health unknown (its Ready condition set to Unknown with reason
// NodeStatusUnknown, after which it taints the node and marks and evicts
// its pods): the node must have shown no sign of life for the grace period
// before, neither a Lease renewal nor a posted status with a new heart-beat
// (LC-4's "when a node dies or is cut off"; PS-13's "because their node
// stopped heart-beating"). A sign of life committed less than the grace
// period (less the recorder's slack) before the mark is a violation: the
// controller decided from a view of the node that was stale (as
// kubernetes#138698 describes for its Lease cache).
//
// It judges marks from the first Lease of the node in the record on (the
// record of earlier heart-beats may be missing), and says Unknown when the
// record lost store events, since a lost change may be the mark's cause.
// It also judges the taint eviction controller's evictions
// (judgeTaintEvictions): only for a NoExecute taint the node has, and not
// before the pod's tolerationSeconds ran out.
//
// The checker package does not import the system under test: the rules
// it holds the controllers to are restated here, as the preemption
// replay restates the scheduler's.
func CheckNodeHealth(ctx context.Context, h *history.History, opts Options) Result {
	return checkOne(ctx, h, opts, NodeHealthChecker)
}

func checkNodeHealth(ctx context.Context, v *view, opts Options) Result {
	res, ctx, cancel := startCheck(ctx, opts, NodeHealthChecker, nodeHealthGuarantees)
	defer cancel()
	h := v.h
	nodes, ok := v.nodes(ctx)
	if !ok {
		return res.finish(Unknown, fmt.Sprintf("check cancelled: %v", context.Cause(ctx)))
	}
	nodeAt := 0 // the next of nodes.versions
	grace := nodeHealthGrace(h)
	beats := map[string][]nodeHeartbeat{}
	firstLease := map[string]int64{}
	var marks []nodeMark
	lastReady := map[string]string{} // node -> Ready status
	lastBeat := map[string]string{}  // node -> Ready's lastHeartbeatTime
	lastRenew := map[string]time.Time{}
	taints := map[string][]taintNodeState{} // node -> its NoExecute taints, version by version
	decodeErrs := 0
	for i, e := range h.Store {
		if i%4096 == 0 && ctx.Err() != nil {
			return res.finish(Unknown, fmt.Sprintf("check cancelled: %v", context.Cause(ctx)))
		}
		switch {
		case e.Resource == "leases.coordination.k8s.io" && e.Namespace == nodeLeaseNamespace && e.Type != history.StoreDeleted:
			var l struct {
				Spec struct {
					RenewTime string `json:"renewTime"`
				} `json:"spec"`
			}
			if err := json.Unmarshal(e.Object, &l); err != nil {
				decodeErrs++
				continue
			}
			renew, _ := time.Parse(time.RFC3339Nano, l.Spec.RenewTime)
			if _, ok := firstLease[e.Name]; !ok {
				// The record's first version of the Lease may be its
				// first list's: it starts the record, it is no renewal.
				firstLease[e.Name] = e.T
				lastRenew[e.Name] = renew
				continue
			}
			// As the controller counts it: a renewal moves renewTime on.
			if renew.After(lastRenew[e.Name]) {
				beats[e.Name] = append(beats[e.Name], nodeHeartbeat{t: e.T, rv: e.RV, what: "its Lease renewed"})
				lastRenew[e.Name] = renew
			}
		case e.Resource == "nodes" && e.Type != history.StoreDeleted:
			nv := nodes.versions[nodeAt]
			nodeAt++
			n, err := nodes.health(nv)
			if err != nil {
				decodeErrs++
				continue
			}
			var noExec []corev1.Taint
			for _, t := range n.Spec.Taints {
				if t.Effect == corev1.TaintEffectNoExecute {
					noExec = append(noExec, t)
				}
			}
			taints[e.Name] = append(taints[e.Name], taintNodeState{t: e.T, taints: noExec})
			status, reason, hb := n.ready()
			if status == "Unknown" && reason == nodeReasonStatusUnknown && lastReady[e.Name] != "Unknown" {
				marks = append(marks, nodeMark{node: e.Name, t: e.T, rv: e.RV})
			}
			if _, known := lastReady[e.Name]; known && hb != "" && hb != lastBeat[e.Name] && status != "Unknown" {
				beats[e.Name] = append(beats[e.Name], nodeHeartbeat{t: e.T, rv: e.RV, what: "its kubelet posted a status with heart-beat " + hb})
			}
			lastReady[e.Name], lastBeat[e.Name] = status, hb
		case e.Resource == "nodes":
			nodeAt++
			delete(lastReady, e.Name)
			delete(lastBeat, e.Name)
			taints[e.Name] = append(taints[e.Name], taintNodeState{t: e.T})
		}
	}
	var illegal []Evidence
	judged, excusedMarks := 0, 0
	for _, m := range marks {
		first, ok := firstLease[m.node]
		if !ok || first > m.t {
			continue
		}
		if controllerFaulted(h, m.t-int64(grace), m.t) {
			excusedMarks++
			continue
		}
		res.Stats.Ops++
		// The newest sign of life committed before the mark: resource
		// versions order commits across resources.
		var b *nodeHeartbeat
		for k := range beats[m.node] {
			if x := &beats[m.node][k]; rvAfter(m.rv, x.rv) && (b == nil || rvAfter(x.rv, b.rv)) {
				b = x
			}
		}
		judged++
		if b == nil {
			continue
		}
		quiet := time.Duration(m.t - b.t)
		if quiet+nodeHealthSlack(grace) < grace {
			if len(illegal) < opts.maxEvidence() {
				illegal = append(illegal, Evidence{Key: m.node, At: m.t, Description: fmt.Sprintf(
					"the node controller declared node %s's health unknown (Ready=Unknown, %s) at %s (resourceVersion %s), %s after %s at %s (resourceVersion %s): under its grace period of %s (slack %s), so it acted on a stale view of a node that was heart-beating",
					m.node, nodeReasonStatusUnknown, nanos(m.t), m.rv, quiet.Round(time.Millisecond), b.what, nanos(b.t), b.rv, grace, nodeHealthSlack(grace))})
			}
			res.Stats.Checked++
			continue
		}
		res.Stats.Checked++
	}
	res.Stats.Keys = len(firstLease)
	tIllegal, tN, tJudged, tExcused, tDecode := judgeTaintEvictions(h, taints, opts.maxEvidence())
	decodeErrs += tDecode
	res.Stats.Ops += tJudged + tExcused
	res.Stats.Checked += tJudged
	res.Figures = []Figure{
		{Name: "nodes declared unknown by the node controller", Value: float64(len(marks)), Unit: "count"},
		{Name: "node marks judged", Value: float64(judged), Unit: "count"},
		{Name: "pods evicted by the taint eviction controller", Value: float64(tJudged + tExcused), Unit: "count"},
		{Name: "taint evictions judged", Value: float64(tJudged), Unit: "count"},
	}
	// The marks' part: only where the record follows the nodes' Leases.
	var markSummary, markUnknown string
	renewals := 0
	for _, bs := range beats {
		renewals += len(bs)
	}
	switch {
	case len(firstLease) == 0:
		markSummary = "node marks not judged: the record does not follow the nodes' Leases"
	case grace == 0:
		markUnknown = "the history does not state the node controller's grace period"
	case len(marks) == 0:
		markSummary = fmt.Sprintf("the node controller declared no node's health unknown; %s heart-beating through the record (%s: Lease renewals and status heart-beats)",
			count(len(firstLease), "node"), count(renewals, "heart-beat"))
	case judged == 0 && excusedMarks == 0:
		markUnknown = fmt.Sprintf("no node mark judged: the %s came before the record of the node's Lease began", count(len(marks), "mark"))
	case judged == 0:
		markSummary = "no node mark judged"
	default:
		markSummary = fmt.Sprintf("every one of %s by the node controller came at least its grace period (%s, slack %s) after the node's last Lease renewal or heart-beat", count(judged, "node mark"), grace, nodeHealthSlack(grace))
	}
	if excusedMarks > 0 && markUnknown == "" {
		markSummary += fmt.Sprintf(" (%s not judged: a fault was on the controller-manager or its way to the store)", count(excusedMarks, "mark"))
	}
	taintSummary := "the taint eviction controller evicted no pod"
	if tJudged+tExcused > 0 {
		taintSummary = fmt.Sprintf("every one of %s by the taint eviction controller came within %s of a NoExecute taint on the pod's node that the pod does not tolerate for good", count(tJudged, "judged eviction"), taintViewWindow)
		if tJudged == 0 {
			taintSummary = "no eviction by the taint eviction controller judged"
		}
		if tExcused > 0 {
			taintSummary += fmt.Sprintf(" (%s not judged: a fault stopped or restarted the controller shortly before, or the record of the node does not reach it)", count(tExcused, "eviction"))
		}
	}
	illegal = append(illegal, tIllegal...)
	if nIllegal := len(illegal) - len(tIllegal) + tN; nIllegal > 0 {
		if nodeHealthLostEvents(h) || decodeErrs > 0 {
			return res.finish(Unknown, fmt.Sprintf("%s look premature, but store events were lost or did not decode", count(nIllegal, "node mark or eviction")))
		}
		res.Evidence = illegal
		what := "declared a heart-beating node's health unknown"
		if len(illegal) == len(tIllegal) {
			what = "evicted a pod for a taint its node did not have then"
		}
		return res.finish(Illegal, fmt.Sprintf("the node controller %s: %s", what, illegal[0].Description))
	}
	if markUnknown != "" {
		return res.finish(Unknown, markUnknown+"; "+taintSummary)
	}
	if (len(firstLease) == 0 || (len(marks) > 0 && judged == 0)) && tJudged == 0 {
		// Neither half had anything to judge: no Leases, or every mark
		// excused, and every eviction excused.
		return res.finish(Unknown, markSummary+"; "+taintSummary)
	}
	return res.finish(Ok, markSummary+"; "+taintSummary)
}

// rvAfter reports whether resourceVersion a is after b (both etcd
// revisions or raft indexes; false when either does not parse).
func rvAfter(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	return err1 == nil && err2 == nil && x > y
}

// nodeHealthLostEvents reports whether the record of nodes or Leases lost
// store events.
func nodeHealthLostEvents(h *history.History) bool {
	for _, l := range h.Logs {
		if r := l.Attrs["resource"]; l.Msg == history.LogStoreEventsLost && (r == "nodes" || r == "pods" || r == "leases.coordination.k8s.io") {
			return true
		}
	}
	return false
}
