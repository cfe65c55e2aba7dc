package checker

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"
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

// LogConvergence is the log message with which a run records its wait for
// the cluster to converge (attributes "converged", "waited" in scaled
// seconds, "bound" in scaled seconds, "divergences"). The checker judges
// the store's record, not this line; it is for people reading the history.
const LogConvergence = "convergence"

// ConvergenceBase is the time a healed cluster is given to converge, on
// its own (scaled) clock, on top of the longest grace period of its pods:
// a node's status post and lease renewal (10 s), the controllers'
// retries (at most 10 s apart), the scheduler's back-off (at most 10 s)
// and the kubelet's wait of max(2 s, remaining grace) fit in it many times
// over. Upstream's longest stall after a heal, an unschedulable pod left
// in the unschedulable queue, is 5 minutes; so is this.
const ConvergenceBase = 5 * time.Minute

// schedFinal is the final state as the scheduler's filters see it, built
// once for every pending pod roomFor judges.
type schedFinal struct {
	pods      []*schedPod // by index in FinalState.Pods; nil when undecoded
	nodes     []*schedNode
	occupied  map[string]schedRes    // node -> requests of the pods bound there
	nominated map[string][]*schedPod // node -> pending pods nominated there
	broken    bool                   // some object did not decode
}

func newSchedFinal(st FinalState) *schedFinal {
	f := &schedFinal{pods: make([]*schedPod, len(st.Pods)), nodes: make([]*schedNode, len(st.Nodes)),
		occupied: map[string]schedRes{}, nominated: map[string][]*schedPod{}}
	for i, raw := range st.Pods {
		q, err := decodeSchedPod(raw)
		if err != nil {
			f.broken = true
			continue
		}
		f.pods[i] = q
		switch {
		case q.occupies():
			u := f.occupied[q.node]
			u.add(q.requests)
			f.occupied[q.node] = u
		case q.pending() && q.nominated != "":
			f.nominated[q.nominated] = append(f.nominated[q.nominated], q)
		}
	}
	for i, raw := range st.Nodes {
		n, err := decodeSchedNode(raw)
		if err != nil {
			f.broken = true
			continue
		}
		f.nodes[i] = n
	}
	return f
}

// roomFor names a healthy node on which pending pod i fits as the
// scheduler's filters that depend on no other pod's labels decide it
// (cordon, taints, node selector and required node affinity, requested
// resources against what the pods bound there request and what pending
// pods of at least its priority nominated there reserve), or "" when none
// does, or the pod uses what these rules do not follow (topology spread,
// inter-pod affinity, host ports, volume or resource claims), or some
// object did not decode.
func (f *schedFinal) roomFor(i int, healthy map[string]bool) string {
	p := f.pods[i]
	if f.broken || p == nil || !p.pending() || p.filtered || p.hasPodAffinityTerms || len(p.spread) > 0 {
		return ""
	}
	for _, n := range f.nodes {
		if !healthy[n.name] || !p.passesNodeFilters(n) {
			continue
		}
		used := f.occupied[n.name]
		used.scalar = maps.Clone(used.scalar) // add changes it in place
		for _, q := range f.nominated[n.name] {
			if q != p && q.priority >= p.priority {
				used.add(q.requests)
			}
		}
		if p.requests.fits(used, n.alloc) {
			return fmt.Sprintf("node %s, which is Ready, has room for it (it requests %s; the pods there take %s of %s)", n.name, p.requests, used, n.alloc)
		}
	}
	return ""
}

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

// The default scheduler's names: upstream's, which the API defaults, and
// the empty name of a pod recorded before defaulting.
const defaultSchedulerName = "default-scheduler"

// FinalState is the cluster's objects at one moment, each the JSON of its
// Kubernetes object: what Converge judges. A run and the checker both
// build it with a FinalTracker from the store lines, as they are recorded
// and as the history holds them.
type FinalState struct {
	Pods, Nodes, StatefulSets, ReplicaSets, VolumeAttachments []json.RawMessage
}

// Divergence is one way a cluster is not yet where its objects say it
// should be.
type Divergence struct {
	// Key is the object, kind/namespace/name.
	Key string `json:"key"`
	// Guarantee is the guarantee whose promise is still open.
	Guarantee   string `json:"guarantee"`
	Description string `json:"description"`
}

func (d Divergence) String() string { return d.Key + ": " + d.Description }

// cvMeta is the metadata the convergence rules read.
type cvMeta struct {
	Namespace                  string  `json:"namespace"`
	Name                       string  `json:"name"`
	UID                        string  `json:"uid"`
	DeletionTimestamp          *string `json:"deletionTimestamp"`
	DeletionGracePeriodSeconds *int64  `json:"deletionGracePeriodSeconds"`
	Generation                 int64   `json:"generation"`
	OwnerReferences            []struct {
		Kind       string `json:"kind"`
		Name       string `json:"name"`
		UID        string `json:"uid"`
		Controller *bool  `json:"controller"`
	} `json:"ownerReferences"`
}

type cvPod struct {
	Metadata cvMeta `json:"metadata"`
	Spec     struct {
		NodeName                      string                       `json:"nodeName"`
		SchedulerName                 string                       `json:"schedulerName"`
		SchedulingGates               []json.RawMessage            `json:"schedulingGates"`
		TerminationGracePeriodSeconds *int64                       `json:"terminationGracePeriodSeconds"`
		InitContainers                []json.RawMessage            `json:"initContainers"`
		Volumes                       []map[string]json.RawMessage `json:"volumes"`
	} `json:"spec"`
	Status struct {
		Phase      string `json:"phase"`
		Conditions []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
			Reason string `json:"reason"`
		} `json:"conditions"`
	} `json:"status"`
}

func (p *cvPod) condition(t string) (status, reason string) {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status, c.Reason
		}
	}
	return "", ""
}

func (p *cvPod) terminating() bool { return p.Metadata.DeletionTimestamp != nil }

func (p *cvPod) terminal() bool {
	return p.Status.Phase == "Succeeded" || p.Status.Phase == "Failed"
}

// runningReady is a pet as the StatefulSet controller waits for it before
// the next: Running, Ready and not terminating.
func (p *cvPod) runningReady() bool {
	st, _ := p.condition("Ready")
	return p.Status.Phase == "Running" && st == "True" && !p.terminating()
}

// waitsForVolume reports a pod whose start may wait on a volume attached
// elsewhere (a claim or a CSI volume): whether that wait is over depends on
// the node holding it, which these rules do not follow.
func (p *cvPod) waitsForVolume() bool {
	for _, v := range p.Spec.Volumes {
		if v["persistentVolumeClaim"] != nil || v["csi"] != nil || v["ephemeral"] != nil {
			return true
		}
	}
	return false
}

func (p *cvPod) controller() (kind, uid string) {
	for _, o := range p.Metadata.OwnerReferences {
		if o.Controller != nil && *o.Controller {
			return o.Kind, o.UID
		}
	}
	return "", ""
}

func (p *cvPod) grace() int64 {
	g := int64(30)
	if p.Spec.TerminationGracePeriodSeconds != nil {
		g = *p.Spec.TerminationGracePeriodSeconds
	}
	if d := p.Metadata.DeletionGracePeriodSeconds; d != nil && *d > g {
		g = *d
	}
	return g
}

type cvSet struct {
	Metadata cvMeta `json:"metadata"`
	Spec     struct {
		Replicas            *int64 `json:"replicas"`
		PodManagementPolicy string `json:"podManagementPolicy"`
	} `json:"spec"`
	Status struct {
		ObservedGeneration int64 `json:"observedGeneration"`
		Replicas           int64 `json:"replicas"`
		ReadyReplicas      int64 `json:"readyReplicas"`
	} `json:"status"`
}

// status compares what the set's controller reports with what it controls:
// replicas and ready replicas as counted from the pods, and the generation
// it last saw (when the object has one).
func (s *cvSet) status(replicas, ready int64) string {
	var wrong []string
	if s.Status.Replicas != replicas {
		wrong = append(wrong, fmt.Sprintf("replicas %d (counted %d)", s.Status.Replicas, replicas))
	}
	if s.Status.ReadyReplicas != ready {
		wrong = append(wrong, fmt.Sprintf("readyReplicas %d (counted %d)", s.Status.ReadyReplicas, ready))
	}
	if g := s.Metadata.Generation; g > 0 && s.Status.ObservedGeneration < g {
		wrong = append(wrong, fmt.Sprintf("observedGeneration %d (generation %d)", s.Status.ObservedGeneration, g))
	}
	return strings.Join(wrong, ", ")
}

func (s *cvSet) replicas() int64 {
	if s.Spec.Replicas == nil {
		return 1 // the API's default
	}
	return *s.Spec.Replicas
}

type cvNode struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Status struct {
		Conditions []nodeCondition `json:"conditions"`
	} `json:"status"`
}

// healthy is a node a kubelet serves: Ready, and not fenced (a fenced node
// does not come back by itself, PS-14).
func (n *cvNode) healthy() bool {
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == "Ready" {
			ready = c.Status == "True"
		}
	}
	return ready && !n.fenced()
}

// fenced is a node the fencing controller confirmed fenced (PS-14).
func (n *cvNode) fenced() bool {
	for _, c := range n.Status.Conditions {
		if c.Type == fencedConditionType && c.Status == "True" {
			return true
		}
	}
	return false
}

// cvAttachment is a storage.k8s.io VolumeAttachment.
type cvAttachment struct {
	Metadata cvMeta `json:"metadata"`
	Spec     struct {
		NodeName string `json:"nodeName"`
	} `json:"spec"`
}

// decodeAll decodes every object of raw into a T; the error names the
// first that does not decode.
func decodeAll[T any](kind string, raw []json.RawMessage) ([]T, error) {
	out := make([]T, len(raw))
	for i, r := range raw {
		if err := json.Unmarshal(r, &out[i]); err != nil {
			return nil, fmt.Errorf("%s %d of %d does not decode: %w", kind, i+1, len(raw), err)
		}
	}
	return out, nil
}

// Convergence is what Converge found in a final state.
type Convergence struct {
	// Divergences are what is not yet where its objects say it should be,
	// in key order; none when the cluster converged.
	Divergences []Divergence
	// Bound is how long, on the cluster's clock, a healed cluster in this
	// state is given to converge: ConvergenceBase plus the longest grace
	// period of its pods (spec or deletion).
	Bound time.Duration
}

// Converge judges st: it lists what in st is not yet where its objects say
// it should be, in key order, and the bound it is given. Each rule names
// what a converged cluster would show, and what excuses an object from it:
//
//   - A pod bound to a fenced node (condition podsafe.io/Fenced True) is
//     still there: the fencing controller has not force deleted it (PS-14);
//     a VolumeAttachment to a fenced node is still there: it has not broken
//     it (PS-15).
//   - A pod bound to a healthy node (Ready, not fenced) and marked for
//     deletion is still there: its kubelet has not finished the deletion
//     (PS-4, LC-11). A pod marked for deletion that never reached a node is
//     one the API removes at once (GP-6). On a node that is not healthy the
//     pod waits for the node, which is allowed (PS-12).
//   - A pod bound to a healthy node is still Pending: its kubelet has not
//     started it. Pods with init containers (which may run for long) and
//     pods with a claim, CSI or ephemeral volume (which may wait for a
//     detach elsewhere) are left out.
//   - A pod of the default scheduler that is not bound, not marked for
//     deletion and not gated has no PodScheduled condition False: the
//     scheduler has not judged it (PR-3). Or it was judged unschedulable,
//     yet it fits a healthy node (see roomFor): the scheduler has not tried
//     it again (PR-3; upstream retries every unschedulable pod within 5
//     minutes, and podsafe's scheduler after its back-off).
//   - A ReplicaSet (not being deleted) whose active pods (controlled by it,
//     not marked for deletion, not Succeeded or Failed) are fewer or more
//     than its replicas (PS-7). One with its replicas whose status does not
//     say so: replicas and readyReplicas counted as upstream counts them,
//     observedGeneration at the object's generation.
//   - A StatefulSet (not being deleted) with replicas N: a pet of ordinal
//     below N that is Succeeded or Failed, not marked for deletion, and
//     either never bound or bound to a healthy node, is not replaced
//     (PS-11); a missing pet below N is not created (PS-12), unless the set
//     is OrderedReady (the default) and a lower ordinal is missing or not
//     Running and Ready; a pet of ordinal N or above that is not marked for
//     deletion is not removed, unless the set is OrderedReady and a pet
//     below N is missing or not Running and Ready (upstream scales down
//     only a healthy set). A set with none of these and no terminating pet
//     whose status does not count its pets (replicas), its Running and
//     Ready pets (readyReplicas) or its generation.
//
// Objects that do not decode are an error naming the first.
func Converge(st FinalState) (Convergence, error) {
	pods, err := decodeAll[cvPod]("pod", st.Pods)
	if err != nil {
		return Convergence{}, err
	}
	nodes, err := decodeAll[cvNode]("node", st.Nodes)
	if err != nil {
		return Convergence{}, err
	}
	sets, err := decodeAll[cvSet]("statefulset", st.StatefulSets)
	if err != nil {
		return Convergence{}, err
	}
	rss, err := decodeAll[cvSet]("replicaset", st.ReplicaSets)
	if err != nil {
		return Convergence{}, err
	}
	attachments, err := decodeAll[cvAttachment]("volumeattachment", st.VolumeAttachments)
	if err != nil {
		return Convergence{}, err
	}
	var longest int64
	for i := range pods {
		longest = max(longest, pods[i].grace())
	}
	healthy, fenced := map[string]bool{}, map[string]bool{}
	for i := range nodes {
		healthy[nodes[i].Metadata.Name] = nodes[i].healthy()
		fenced[nodes[i].Metadata.Name] = nodes[i].fenced()
	}
	var out []Divergence
	add := func(kind string, m *cvMeta, g, format string, args ...any) {
		out = append(out, Divergence{Key: kind + "/" + m.Namespace + "/" + m.Name, Guarantee: g, Description: fmt.Sprintf(format, args...)})
	}
	var sf *schedFinal
	sched := func() *schedFinal {
		if sf == nil {
			sf = newSchedFinal(st)
		}
		return sf
	}
	byController := map[string][]*cvPod{}
	byName := map[string]*cvPod{}
	for i := range pods {
		p := &pods[i]
		byName[p.Metadata.Namespace+"/"+p.Metadata.Name] = p
		if _, uid := p.controller(); uid != "" {
			byController[uid] = append(byController[uid], p)
		}
		node := p.Spec.NodeName
		switch {
		case fenced[node]:
			add("pod", &p.Metadata, "PS-14", "bound to node %s, which is fenced, yet not force deleted: its replacement cannot start", node)
		case p.terminating() && node == "":
			add("pod", &p.Metadata, "LC-11", "marked for deletion and never bound, yet not removed (the API deletes an unbound pod at once)")
		case p.terminating() && healthy[node]:
			add("pod", &p.Metadata, "PS-4", "marked for deletion (grace %s) on node %s, which is Ready, yet not removed: its kubelet has not finished the deletion", graceOf(p), node)
		case p.terminating() || p.terminal():
		case node != "" && healthy[node] && p.Status.Phase == "Pending" && len(p.Spec.InitContainers) == 0 && !p.waitsForVolume():
			add("pod", &p.Metadata, "PS-12", "bound to node %s, which is Ready, yet still Pending: its kubelet has not started it", node)
		case node == "" && len(p.Spec.SchedulingGates) == 0 && (p.Spec.SchedulerName == "" || p.Spec.SchedulerName == defaultSchedulerName):
			if cond, _ := p.condition("PodScheduled"); cond != "False" {
				add("pod", &p.Metadata, "PR-3", "not bound and not judged unschedulable (no PodScheduled False): the scheduler has not placed it")
			} else if room := sched().roomFor(i, healthy); room != "" {
				add("pod", &p.Metadata, "PR-3", "not bound, though %s: the scheduler has not placed it", room)
			}
		}
	}
	for i := range attachments {
		if a := &attachments[i]; fenced[a.Spec.NodeName] {
			add("volumeattachment", &a.Metadata, "PS-15", "attaches a volume to node %s, which is fenced, yet is not broken: the volume cannot attach elsewhere", a.Spec.NodeName)
		}
	}
	for i := range rss {
		rs := &rss[i]
		if rs.Metadata.DeletionTimestamp != nil {
			continue
		}
		var active, ready int64
		for _, p := range byController[rs.Metadata.UID] {
			if kind, _ := p.controller(); kind == "ReplicaSet" && !p.terminating() && !p.terminal() {
				active++
				if st, _ := p.condition("Ready"); st == "True" {
					ready++
				}
			}
		}
		if want := rs.replicas(); active != want {
			add("replicaset", &rs.Metadata, "PS-7", "wants %d replicas and has %d active pods (controlled by it, not terminating, not Succeeded or Failed)", want, active)
		} else if wrong := rs.status(active, ready); wrong != "" {
			add("replicaset", &rs.Metadata, "PS-7", "has its %d replicas, but its status says %s", want, wrong)
		}
	}
	for i := range sets {
		set := &sets[i]
		if set.Metadata.DeletionTimestamp != nil {
			continue
		}
		ordered := set.Spec.PodManagementPolicy != "Parallel"
		n := set.replicas()
		pet := func(ord int64) *cvPod {
			p := byName[set.Metadata.Namespace+"/"+set.Metadata.Name+"-"+strconv.FormatInt(ord, 10)]
			if p == nil {
				return nil
			}
			if _, uid := p.controller(); uid != set.Metadata.UID {
				return nil // another object of the same name
			}
			return p
		}
		healthySoFar := true // every pet below the current ordinal is Running and Ready
		diverged := len(out)
		for ord := range n {
			p := pet(ord)
			switch {
			case p == nil && (healthySoFar || !ordered):
				add("statefulset", &set.Metadata, "PS-12", "wants %d replicas and pet %s-%d does not exist: it was not created", n, set.Metadata.Name, ord)
			case p != nil && p.terminal() && !p.terminating() && (p.Spec.NodeName == "" || healthy[p.Spec.NodeName]):
				add("statefulset", &set.Metadata, "PS-11", "pet %s-%d is %s and not marked for deletion, on %s: it was not replaced", set.Metadata.Name, ord, p.Status.Phase, nodeOrNone(p.Spec.NodeName))
			}
			if p == nil || !p.runningReady() {
				healthySoFar = false
			}
		}
		if ordered && !healthySoFar {
			continue
		}
		var extra []string
		var owned, ready int64
		terminating := false
		for _, p := range byController[set.Metadata.UID] {
			ord, ok := strings.CutPrefix(p.Metadata.Name, set.Metadata.Name+"-")
			o, err := strconv.ParseInt(ord, 10, 64)
			if p.Metadata.Namespace != set.Metadata.Namespace || !ok || err != nil {
				continue
			}
			owned++
			terminating = terminating || p.terminating()
			if p.runningReady() {
				ready++
			}
			if o >= n && !p.terminating() {
				extra = append(extra, p.Metadata.Name)
			}
		}
		if len(extra) > 0 {
			sort.Strings(extra)
			add("statefulset", &set.Metadata, "PS-12", "wants %d replicas and still has %s, not marked for deletion: the set was not scaled down", n, strings.Join(extra, ", "))
		}
		// Its status, once the set itself converged: terminating pets are
		// counted differently by upstream (ready while still Running and
		// Ready) and podsafe (not ready), so a set with one is left out.
		if len(out) == diverged && !terminating {
			if wrong := set.status(owned, ready); wrong != "" {
				add("statefulset", &set.Metadata, "PS-12", "has its pets where they should be, but its status says %s", wrong)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return Convergence{Divergences: out, Bound: ConvergenceBase + time.Duration(longest)*time.Second}, nil
}

func graceOf(p *cvPod) string {
	if d := p.Metadata.DeletionGracePeriodSeconds; d != nil {
		return strconv.FormatInt(*d, 10) + " s"
	}
	return "unknown"
}

func nodeOrNone(n string) string {
	if n == "" {
		return "no node"
	}
	return "node " + n + ", which is Ready"
}

// FinalTracker follows store lines and keeps, of every object the
// convergence rules read, its last recorded version: the state at the end
// of what it was shown. A run feeds it as it records (Recorder.ObserveStore)
// and waits on it; the checker feeds it the history's store lines. It is
// safe for concurrent use.
type FinalTracker struct {
	mu    sync.Mutex
	last  map[trackKey]json.RawMessage // nil once deleted
	order []trackKey
}

type trackKey struct{ resource, namespace, name string }

// NewFinalTracker returns an empty tracker.
func NewFinalTracker() *FinalTracker { return &FinalTracker{last: map[trackKey]json.RawMessage{}} }

// Observe records one store line.
func (t *FinalTracker) Observe(ev history.StoreEvent) {
	var r string
	switch ev.Resource {
	case "pods", "nodes":
		r = ev.Resource
	case "statefulsets.apps", "statefulsets":
		r = "statefulsets"
	case "replicasets.apps", "replicasets":
		r = "replicasets"
	case "volumeattachments.storage.k8s.io", "volumeattachments":
		r = "volumeattachments"
	default:
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
	t.last[k] = obj
}

// State returns the objects that exist, in the order they were first seen.
func (t *FinalTracker) State() FinalState {
	t.mu.Lock()
	defer t.mu.Unlock()
	var st FinalState
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
		case "volumeattachments":
			st.VolumeAttachments = append(st.VolumeAttachments, obj)
		}
	}
	return st
}

// finalState rebuilds from the store's record the objects that exist at
// the history's end, each as its last recorded version.
func finalState(store []history.StoreEvent) FinalState {
	t := NewFinalTracker()
	for i := range store {
		t.Observe(store[i])
	}
	return t.State()
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
		case "pods", "statefulsets.apps", "statefulsets", "replicasets.apps", "replicasets":
			return true
		}
	}
	return false
}

// CheckConvergence judges, as Jepsen's final reads do, whether the cluster
// settled once every fault healed: the objects the store holds at the
// history's end must show no divergences (Converge). Liveness cannot be
// refuted in finite time, so the checker states its bound: a divergence is
// Illegal only when the cluster ran healed for at least its bound
// (Convergence.Bound) on its own clock (the recorder's time from the heal
// record to the history's end, times the run's time scale), and for at
// least ConvergenceWallFloor of wall time (client-go backs off on the real
// clock), and the history is whole. With a shorter tail, a lost store event or a torn history the
// divergences are listed and the verdict is Unknown. A cluster with nothing
// to judge (no pods, sets or replica sets) is Unknown; a converged one is
// Ok, however short its tail.
func CheckConvergence(ctx context.Context, h *history.History, opts Options) Result {
	res, _, cancel := startCheck(ctx, opts, ConvergenceChecker, convergenceGuarantees)
	defer cancel()
	healed, ok := healedAt(h.Logs)
	if !ok {
		return res.finish(Unknown, "the history records no final heal (the run was killed, or the nemesis did not stop): convergence is not judged")
	}
	st := finalState(h.Store)
	res.Stats.Ops = len(st.Pods) + len(st.StatefulSets) + len(st.ReplicaSets)
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
	tailWall := time.Duration(h.End - healed)
	tail := time.Duration(float64(tailWall) * scale)
	floor := ConvergenceWallFloor(faultTime(h))
	res.Figures = append(res.Figures,
		Figure{Name: "healed tail", Value: tail.Seconds(), Unit: "s"},
		Figure{Name: "convergence bound", Value: bound.Seconds(), Unit: "s"},
		Figure{Name: "healed tail (wall)", Value: tailWall.Seconds(), Unit: "wall s"},
		Figure{Name: "convergence floor (wall)", Value: floor.Seconds(), Unit: "wall s"},
		Figure{Name: "divergences", Value: float64(len(div)), Unit: "count"})
	judged := fmt.Sprintf("%s, %s and %s", count(len(st.Pods), "pod"), count(len(st.StatefulSets), "StatefulSet"), count(len(st.ReplicaSets), "ReplicaSet"))
	if len(div) == 0 {
		return res.finish(Ok, fmt.Sprintf("the cluster converged: at the history's end (%s after the final heal, scaled) %s are where their objects say", round(tail), judged))
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
	case poStoreLost(h.Logs) || storeLost(h.Logs):
		why = "the recorder lost store events, so the final state may be stale"
	case tail < bound:
		why = fmt.Sprintf("the cluster ran healed for only %s (scaled) of the %s it is given", round(tail), round(bound))
	case tailWall < floor:
		why = fmt.Sprintf("the cluster ran healed for only %s of wall time, and its clients' back-off after %s of faults may take %s", round(tailWall), round(faultTime(h)), round(floor))
	}
	summary := fmt.Sprintf("%s at the history's end, %s after the final heal (scaled; bound %s): %s", count(len(div), "divergence"), round(tail), round(bound), div[0])
	if why != "" {
		res.Evidence = nil
		return res.finish(Unknown, "not judged, "+why+"; "+summary)
	}
	return res.finish(Illegal, "the cluster did not converge: "+summary)
}

// storeLost reports a "store events lost" log of any resource the rules
// read.
func storeLost(logs []history.LogEntry) bool {
	for _, l := range logs {
		if l.Msg == "store events lost" {
			switch l.Attrs["resource"] {
			case "nodes", "statefulsets.apps", "replicasets.apps", "statefulsets", "replicasets":
				return true
			}
		}
	}
	return false
}

func round(d time.Duration) time.Duration { return d.Round(100 * time.Millisecond) }
