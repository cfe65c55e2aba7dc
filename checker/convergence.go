package checker

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/podsafe/podsafe/history"
)

// ConvergenceChecker names the convergence checker in results.
const ConvergenceChecker = "convergence"

// convergenceGuarantees are what a cluster that does not settle once every
// fault healed breaks: a kubelet finishes each graceful deletion (PS-4,
// LC-11), a ReplicaSet replaces what it lost (PS-7), a pet is replaced once
// its old object is gone (PS-11), a pet set that may be unavailable while
// a node is cut off (PS-12) is available again once it is not, and a
// fenced node's pods are force deleted (PS-14) and its volume attachments
// broken (PS-15) so that replacements can start, and a pending pod is
// placed once it fits (PR-3: one that cannot be scheduled is only skipped
// while it does not fit).
var convergenceGuarantees = []string{"PS-4", "LC-11", "PS-7", "PS-11", "PS-12", "PS-14", "PS-15", "PR-3"}

// The log messages with which a run says every fault has healed: from then
// on the cluster runs undisturbed until the history ends.
const (
	LogWorkloadHealed = "workload finished; all faults healed"
	LogStepsHealed    = "steps finished; all cuts healed"
)

// LogConvergence is the log message with which a run records the end of
// its wait for the cluster to converge: "converged" (true or false),
// "waited" since the heal and "still" (how long nothing but nodes changed),
// both in cluster time, "bound", "divergences" and the "first", and "at",
// the recorder time of the last store line its last look judged. The
// checker judges the store's record, not this line: it reads only "at" and
// "converged", to rebuild the state the run saw converged.
const LogConvergence = "convergence"

// ConvergenceBase is the time a healed cluster is given to converge, on
// its own (scaled) clock, on top of the longest grace period of its pods:
// a node's status post and lease renewal (10 s), the controllers'
// retries (at most 10 s apart), the scheduler's back-off (at most 10 s)
// and the kubelet's wait of max(2 s, remaining grace) fit in it many times
// over. Upstream's longest stall after a heal, an unschedulable pod left
// in the unschedulable queue, is 5 minutes; so is this.
const ConvergenceBase = 5 * time.Minute

// ConvergenceWallCeiling bounds the wall time a healed cluster may need
// whatever its clock: client-go's reflectors back off on the real clock, up
// to [30, 60) s after a minute of failures, then list again.
const ConvergenceWallCeiling = 75 * time.Second

// ConvergenceWallFloor is the wall time a healed cluster is given to
// converge after faults that lasted faultTime in all (their union): a
// reflector failing for T waited at most about 2T before its next try
// (its back-off doubles from 0.8 s, each wait jittered up to twice), so
// 2T plus 10 s, never more than ConvergenceWallCeiling.
func ConvergenceWallFloor(faultTime time.Duration) time.Duration {
	return min(2*faultTime+10*time.Second, ConvergenceWallCeiling)
}

// faultTime is the recorder time during which some fault of h was active
// (the union of its intervals; one never healed counts to the end).
func faultTime(h *history.History) time.Duration {
	var total, coveredTo int64
	for _, iv := range h.Nemesis { // sorted by start
		end := iv.End
		if end <= 0 || end < iv.Start {
			end = h.End
		}
		start := max(iv.Start, coveredTo)
		if end > start {
			total += end - start
			coveredTo = end
		}
	}
	return time.Duration(total)
}

// FinalTracker follows store lines and keeps, of every object the
// convergence rules read, its last recorded version: the state at the end
// of what it was shown. A run feeds it as it records (Recorder.ObserveStore)
// and waits on it; the checker feeds it the history's store lines. It is
// safe for concurrent use.
type FinalTracker struct {
	mu               sync.Mutex
	last             map[trackKey]json.RawMessage // nil once deleted
	order            []trackKey
	gone             map[string]bool // see FinalState.Gone
	through, changed int64           // see FinalState
}

type trackKey struct{ resource, namespace, name string }

// NewFinalTracker returns an empty tracker.
func NewFinalTracker() *FinalTracker {
	return &FinalTracker{last: map[trackKey]json.RawMessage{}, gone: map[string]bool{}}
}

// objectUID is the metadata.uid of the first of objs that has one.
func objectUID(objs ...json.RawMessage) string {
	for _, o := range objs {
		var m struct {
			Metadata struct {
				UID string `json:"uid"`
			} `json:"metadata"`
		}
		if len(o) > 0 && json.Unmarshal(o, &m) == nil && m.Metadata.UID != "" {
			return m.Metadata.UID
		}
	}
	return ""
}

// Observe records one store line.
func (t *FinalTracker) Observe(ev history.StoreEvent) {
	r := trackedResource(ev.Resource)
	if r == "" {
		return
	}
	k := trackKey{r, ev.Namespace, ev.Name}
	var obj json.RawMessage
	if ev.Type != history.StoreDeleted && len(ev.Object) > 0 {
		obj = ev.Object
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, seen := t.last[k]; !seen {
		t.order = append(t.order, k)
	}
	if ev.Type == history.StoreDeleted && (r == "replicasets" || r == "statefulsets" || r == "deployments") {
		if uid := objectUID(ev.Object, t.last[k]); uid != "" {
			t.gone[uid] = true
		}
	}
	t.last[k] = obj
	t.through = max(t.through, ev.T)
	if r != "nodes" {
		t.changed = max(t.changed, ev.T)
	}
}

// State returns the objects that exist, in the order they were first seen.
func (t *FinalTracker) State() FinalState {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := FinalState{Through: t.through, Changed: t.changed, Gone: maps.Clone(t.gone)}
	for _, k := range t.order {
		obj := t.last[k]
		if obj == nil {
			continue
		}
		switch k.resource {
		case "pods":
			st.Pods = append(st.Pods, obj)
		case "nodes":
			st.Nodes = append(st.Nodes, obj)
		case "statefulsets":
			st.StatefulSets = append(st.StatefulSets, obj)
		case "replicasets":
			st.ReplicaSets = append(st.ReplicaSets, obj)
		case "deployments":
			st.Deployments = append(st.Deployments, obj)
		case "volumeattachments":
			st.VolumeAttachments = append(st.VolumeAttachments, obj)
		}
	}
	return st
}

// finalState rebuilds from the store's record the objects that exist at
// the history's end, each as its last recorded version; stateAt those that
// existed at recorder time at (the store lines recorded up to then).
func finalState(store []history.StoreEvent) FinalState { return stateAt(store, math.MaxInt64) }

func stateAt(store []history.StoreEvent, at int64) FinalState {
	t := NewFinalTracker()
	for i := range store {
		if store[i].T <= at {
			t.Observe(store[i])
		}
	}
	return t.State()
}

// lookedConverged returns the recorder time the run last looked at the
// cluster and found it converged (its LogConvergence line with converged
// true, attribute "at"), and false when it did not.
func lookedConverged(logs []history.LogEntry) (int64, bool) {
	for i := len(logs) - 1; i >= 0; i-- {
		if l := &logs[i]; l.Msg == LogConvergence && l.Attrs["converged"] == "true" {
			at, err := strconv.ParseInt(l.Attrs["at"], 10, 64)
			return at, err == nil
		}
	}
	return 0, false
}

// healedAt is the recorder time of the run's record that every fault has
// healed, and false when the history has none.
func healedAt(logs []history.LogEntry) (int64, bool) {
	for i := len(logs) - 1; i >= 0; i-- {
		if logs[i].Msg == LogWorkloadHealed || logs[i].Msg == LogStepsHealed {
			return logs[i].T, true
		}
	}
	return 0, false
}

// historyScale is how much faster than the recorder's clock the cluster's
// ran: the run's time scale as its metadata records it, else the ledger's
// estimate.
func historyScale(h *history.History) float64 {
	if s, err := strconv.ParseFloat(h.Meta.Extra[history.ExtraTimeScale], 64); err == nil && s >= 1 {
		return s
	}
	return ledgerScale(h.Ledger)
}

// convergenceApplies: the history records the final heal and objects the
// rules judge.
func convergenceApplies(h *history.History) bool {
	if _, ok := healedAt(h.Logs); !ok {
		return false
	}
	for i := range h.Store {
		switch h.Store[i].Resource {
		case "pods", "statefulsets.apps", "statefulsets", "replicasets.apps", "replicasets", "deployments.apps", "deployments":
			return true
		}
	}
	return false
}

// CheckConvergence judges, as Jepsen's final reads do, whether the cluster
// settled once every fault healed: the objects the store holds at the
// history's end must show no divergences (Converge). Liveness cannot be
// refuted in finite time, so the checker states its bound: a divergence is
// Illegal only when the cluster stood still, healed (from the heal record,
// or the last change of a pod, set or attachment, whichever is later, to
// the history's end) for at least its bound (Convergence.Bound) on its own
// clock (recorder time times the run's time scale) and for at least
// ConvergenceWallFloor of wall time (client-go backs off on the real
// clock), and the history is whole. A cluster that converged is Ok: at the
// history's end, or when the run last looked (its LogConvergence line)
// and the state the store lines recorded up to then shows it; one that
// changed since may be settling again. With a shorter quiet tail, a lost
// store event or a torn history the divergences are listed and the verdict
// is Unknown. A cluster with nothing to judge (no pods, sets or replica
// sets) is Unknown.
func CheckConvergence(ctx context.Context, h *history.History, opts Options) Result {
	res, _, cancel := startCheck(ctx, opts, ConvergenceChecker, convergenceGuarantees)
	defer cancel()
	healed, ok := healedAt(h.Logs)
	if !ok {
		return res.finish(Unknown, "the history records no final heal (the run was killed, or the nemesis did not stop): convergence is not judged")
	}
	st := finalState(h.Store)
	res.Stats.Ops = len(st.Pods) + len(st.StatefulSets) + len(st.ReplicaSets) + len(st.Deployments) + len(st.VolumeAttachments)
	res.Stats.Checked = res.Stats.Ops
	if res.Stats.Ops == 0 {
		return res.finish(Unknown, "the store holds no pod, StatefulSet or ReplicaSet at the history's end: nothing to judge")
	}
	conv, err := Converge(st)
	if err != nil {
		return res.finish(Unknown, "the final state does not decode: "+err.Error())
	}
	div, bound := conv.Divergences, conv.Bound
	scale := historyScale(h)
	// The tail is the time the cluster stood still, healed: from the heal
	// or the last change of a pod, set or attachment, whichever is later.
	still := max(healed, st.Changed)
	tailWall := time.Duration(h.End - still)
	tail := time.Duration(float64(tailWall) * scale)
	floor := ConvergenceWallFloor(faultTime(h))
	res.Figures = append(res.Figures,
		Figure{Name: "healed tail", Value: tail.Seconds(), Unit: "s"},
		Figure{Name: "convergence bound", Value: bound.Seconds(), Unit: "s"},
		Figure{Name: "healed tail (wall)", Value: tailWall.Seconds(), Unit: "wall s"},
		Figure{Name: "convergence floor (wall)", Value: floor.Seconds(), Unit: "wall s"},
		Figure{Name: "divergences", Value: float64(len(div)), Unit: "count"})
	judged := fmt.Sprintf("%s, %s and %s", count(len(st.Pods), "pod"), count(len(st.StatefulSets), "StatefulSet"), count(len(st.ReplicaSets), "ReplicaSet"))
	if len(st.Deployments) > 0 {
		judged = fmt.Sprintf("%s, %s, %s and %s", count(len(st.Pods), "pod"), count(len(st.StatefulSets), "StatefulSet"),
			count(len(st.ReplicaSets), "ReplicaSet"), count(len(st.Deployments), "Deployment"))
	}
	gone := ""
	if len(st.Gone) > 0 {
		// The garbage collector's rules judged what refers to these.
		gone = fmt.Sprintf(", and nothing refers to the %s whose removal was recorded", count(len(st.Gone), "owner"))
	}
	if len(div) == 0 {
		return res.finish(Ok, fmt.Sprintf("the cluster converged: at the history's end (%s after the final heal, scaled) %s are where their objects say%s",
			round(time.Duration(float64(h.End-healed)*scale)), judged, gone))
	}
	if at, ok := lookedConverged(h.Logs); ok && at >= healed {
		// The run saw the cluster converged, and it moved on since: the
		// state as the store lines recorded it then says whether it was.
		if then, err := Converge(stateAt(h.Store, at)); err == nil && len(then.Divergences) == 0 {
			return res.finish(Ok, fmt.Sprintf("the cluster converged: %s after the final heal (scaled) every object was where it should be; it changed since, and %s at the history's end, first %s, are still settling (the last change %s before the end)",
				round(time.Duration(float64(at-healed)*scale)), count(len(div), "divergence"), div[0], round(tail)))
		}
	}
	for i, d := range div {
		if i == opts.maxEvidence() {
			break
		}
		res.Evidence = append(res.Evidence, Evidence{Key: d.Key, At: h.End, Description: d.Guarantee + ": " + d.Description})
	}
	why := ""
	switch {
	case !h.Complete:
		why = "the history has no closing record"
	case storeLost(h.Logs):
		why = "the recorder lost store events, so the final state may be stale"
	case tail < bound:
		why = fmt.Sprintf("the cluster stood still, healed, for only %s (scaled) of the %s it is given", round(tail), round(bound))
	case tailWall < floor:
		why = fmt.Sprintf("the cluster stood still, healed, for only %s of wall time, and its clients' back-off after %s of faults may take %s", round(tailWall), round(faultTime(h)), round(floor))
	}
	summary := fmt.Sprintf("%s at the history's end, which stood still for %s after the final heal (scaled; bound %s): %s", count(len(div), "divergence"), round(tail), round(bound), div[0])
	if why != "" {
		res.Evidence = nil
		return res.finish(Unknown, "not judged, "+why+"; "+summary)
	}
	return res.finish(Illegal, "the cluster did not converge: "+summary)
}

// trackedResource names, the same for either spelling, a resource whose
// objects the convergence rules read, and is "" for any other.
func trackedResource(resource string) string {
	switch resource {
	case "pods", "nodes":
		return resource
	case "statefulsets.apps", "statefulsets":
		return "statefulsets"
	case "replicasets.apps", "replicasets":
		return "replicasets"
	case "deployments.apps", "deployments":
		return "deployments"
	case "volumeattachments.storage.k8s.io", "volumeattachments":
		return "volumeattachments"
	}
	return ""
}

// storeLost reports a history.LogStoreEventsLost line of a resource the
// rules read, or of every resource (no "resource" attribute).
func storeLost(logs []history.LogEntry) bool {
	for _, l := range logs {
		if r := l.Attrs["resource"]; l.Msg == history.LogStoreEventsLost && (r == "" || trackedResource(r) != "") {
			return true
		}
	}
	return false
}

func round(d time.Duration) time.Duration { return d.Round(100 * time.Millisecond) }
