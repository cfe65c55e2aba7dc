package checker

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/podsafe/podsafe/history"
)

// identityScheduler is the API identity of podsafe's scheduler: it binds
// pods, nominates preemptors and deletes preemption victims.
const identityScheduler = "scheduler"

// schedRes is an amount of the resources the scheduler accounts for (its
// framework.Resource): CPU, memory, pod slots, ephemeral storage and the
// scalar resources (extended resources, hugepages, attachable volumes).
// A schedRes decoded from an object is shared between states and never
// changed; add changes only its receiver.
type schedRes struct {
	milliCPU, memory, pods, ephemeral int64
	// scalar holds the scalar resources by name, nil when there are none.
	scalar map[corev1.ResourceName]int64
}

func (r *schedRes) add(o schedRes) {
	r.milliCPU += o.milliCPU
	r.memory += o.memory
	r.pods += o.pods
	r.ephemeral += o.ephemeral
	if len(o.scalar) > 0 && r.scalar == nil {
		r.scalar = make(map[corev1.ResourceName]int64, len(o.scalar))
	}
	for name, v := range o.scalar {
		r.scalar[name] += v
	}
}

// equal reports whether r and o are the same amounts (a missing scalar
// resource is 0).
func (r schedRes) equal(o schedRes) bool {
	if r.milliCPU != o.milliCPU || r.memory != o.memory || r.pods != o.pods || r.ephemeral != o.ephemeral {
		return false
	}
	for name, v := range r.scalar {
		if o.scalar[name] != v {
			return false
		}
	}
	for name, v := range o.scalar {
		if r.scalar[name] != v {
			return false
		}
	}
	return true
}

// fits reports whether r fits on top of used within alloc, as the
// scheduler's resource filter decides it: a pod slot always, every other
// resource only when requested.
func (r schedRes) fits(used, alloc schedRes) bool {
	if used.pods+r.pods > alloc.pods {
		return false
	}
	short := func(want, used, have int64) bool { return want > 0 && used+want > have }
	if short(r.milliCPU, used.milliCPU, alloc.milliCPU) || short(r.memory, used.memory, alloc.memory) ||
		short(r.ephemeral, used.ephemeral, alloc.ephemeral) {
		return false
	}
	for name, want := range r.scalar {
		if short(want, used.scalar[name], alloc.scalar[name]) {
			return false
		}
	}
	return true
}

func (r schedRes) String() string {
	out := fmt.Sprintf("cpu %dm, memory %d, pods %d", r.milliCPU, r.memory, r.pods)
	if r.ephemeral != 0 {
		out += fmt.Sprintf(", ephemeral-storage %d", r.ephemeral)
	}
	names := make([]string, 0, len(r.scalar))
	for name := range r.scalar {
		names = append(names, string(name))
	}
	sort.Strings(names)
	for _, name := range names {
		out += fmt.Sprintf(", %s %d", name, r.scalar[corev1.ResourceName(name)])
	}
	return out
}

// schedScalar reports whether the scheduler accounts for resource name as
// a scalar resource: an extended resource (a domain-prefixed name outside
// the "requests." quota prefix), hugepages or attachable volumes.
func schedScalar(name corev1.ResourceName) bool {
	n := string(name)
	if strings.HasPrefix(n, corev1.ResourceHugePagesPrefix) || strings.HasPrefix(n, corev1.ResourceAttachableVolumesPrefix) {
		return true
	}
	return strings.Contains(n, "/") && !strings.HasPrefix(n, corev1.DefaultResourceRequestsPrefix)
}

// schedResOf reads a resource list (a node's allocatable, a pod's
// requests); names the scheduler does not account for are ignored.
func schedResOf(l corev1.ResourceList) schedRes {
	var r schedRes
	for name, q := range l {
		switch name {
		case corev1.ResourceCPU:
			r.milliCPU = q.MilliValue()
		case corev1.ResourceMemory:
			r.memory = q.Value()
		case corev1.ResourcePods:
			r.pods = q.Value()
		case corev1.ResourceEphemeralStorage:
			r.ephemeral = q.Value()
		default:
			if schedScalar(name) {
				if r.scalar == nil {
					r.scalar = map[corev1.ResourceName]int64{}
				}
				r.scalar[name] = q.Value()
			}
		}
	}
	return r
}

// schedPod is the part of one version of a pod that scheduling depends on.
// Versions are immutable once decoded and shared between states.
type schedPod struct {
	key                 string // namespace/name
	uid                 string
	namespace, name     string
	labels              labels.Set
	priority            int32
	preemptNever        bool
	requests            schedRes
	node, nominated     string
	deleting            bool
	phase               corev1.PodPhase
	owner               string // Kind/name of the controller, "" if none
	spread              []corev1.TopologySpreadConstraint
	nodeSelector        map[string]string
	affinity            *corev1.Affinity
	tolerations         []corev1.Toleration
	hasPodAffinityTerms bool
	// filtered: the pod uses what the scheduler filters on beyond
	// resources, taints and node affinity (host ports, persistent or
	// ephemeral volume claims, resource claims).
	filtered bool
}

// terminal reports a pod that finished: it holds nothing on its node.
func (p *schedPod) terminal() bool {
	return p.phase == corev1.PodSucceeded || p.phase == corev1.PodFailed
}

// pending reports a pod the scheduler would still place: unbound, not being
// deleted, not finished.
func (p *schedPod) pending() bool {
	return p != nil && p.node == "" && !p.deleting && !p.terminal()
}

// occupies reports whether the scheduler counts the pod's requests on its
// node: bound and not finished (terminating pods still hold their room).
func (p *schedPod) occupies() bool {
	return p != nil && p.node != "" && !p.terminal()
}

func (p *schedPod) ref() string {
	return fmt.Sprintf("%s (uid %s, priority %d)", p.key, p.uid, p.priority)
}

// requiredNodeMatch reports whether the node passes the pod's nodeSelector
// and required node affinity.
func (p *schedPod) requiredNodeMatch(n *schedNode) bool {
	for k, v := range p.nodeSelector {
		if got, ok := n.labels[k]; !ok || got != v {
			return false
		}
	}
	if p.affinity == nil || p.affinity.NodeAffinity == nil || p.affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	terms := p.affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for i := range terms {
		if schedTermMatches(&terms[i], n) {
			return true
		}
	}
	return false
}

// schedTermMatches evaluates one node selector term (its expressions and
// fields ANDed); an empty term matches nothing, as in Kubernetes.
func schedTermMatches(t *corev1.NodeSelectorTerm, n *schedNode) bool {
	if len(t.MatchExpressions) == 0 && len(t.MatchFields) == 0 {
		return false
	}
	for _, r := range t.MatchExpressions {
		if !schedRequirement(r, n.labels) {
			return false
		}
	}
	for _, r := range t.MatchFields {
		if r.Key != "metadata.name" || !schedRequirement(r, labels.Set{"metadata.name": n.name}) {
			return false
		}
	}
	return true
}

func schedRequirement(r corev1.NodeSelectorRequirement, set labels.Set) bool {
	v, has := set[r.Key]
	switch r.Operator {
	case corev1.NodeSelectorOpIn:
		return has && schedContains(r.Values, v)
	case corev1.NodeSelectorOpNotIn:
		return !has || !schedContains(r.Values, v)
	case corev1.NodeSelectorOpExists:
		return has
	case corev1.NodeSelectorOpDoesNotExist:
		return !has
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if !has || len(r.Values) != 1 {
			return false
		}
		a, err1 := strconv.ParseInt(v, 10, 64)
		b, err2 := strconv.ParseInt(r.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		if r.Operator == corev1.NodeSelectorOpGt {
			return a > b
		}
		return a < b
	}
	return false
}

func schedContains(list []string, v string) bool {
	for _, s := range list {
		if s == v {
			return true
		}
	}
	return false
}

// toleratesSchedulingTaints reports whether the pod tolerates every
// NoSchedule and NoExecute taint of the node.
func (p *schedPod) toleratesSchedulingTaints(n *schedNode) bool {
	for i := range n.taints {
		t := &n.taints[i]
		if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		if !schedTolerated(p.tolerations, t) {
			return false
		}
	}
	return true
}

func schedTolerated(tols []corev1.Toleration, t *corev1.Taint) bool {
	for i := range tols {
		if tols[i].ToleratesTaint(klog.Background(), t, false) {
			return true
		}
	}
	return false
}

// passesNodeFilters reports whether the node passes the scheduler's filters
// that do not depend on other pods: cordon, taints, node affinity.
func (p *schedPod) passesNodeFilters(n *schedNode) bool {
	if n.unschedulable && !schedTolerated(p.tolerations, &corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}) {
		return false
	}
	return p.toleratesSchedulingTaints(n) && p.requiredNodeMatch(n)
}

// schedNode is the part of one version of a node that scheduling depends on.
type schedNode struct {
	name          string
	labels        labels.Set
	taints        []corev1.Taint
	unschedulable bool
	alloc         schedRes
}

// sameForScheduling reports whether two versions of a node schedule alike
// (a heart-beat changes neither).
func (n *schedNode) sameForScheduling(o *schedNode) bool {
	if n == nil || o == nil {
		return n == o
	}
	if n.unschedulable != o.unschedulable || !n.alloc.equal(o.alloc) || len(n.labels) != len(o.labels) || len(n.taints) != len(o.taints) {
		return false
	}
	for k, v := range n.labels {
		if w, ok := o.labels[k]; !ok || w != v {
			return false
		}
	}
	for i := range n.taints {
		if n.taints[i].Key != o.taints[i].Key || n.taints[i].Value != o.taints[i].Value || n.taints[i].Effect != o.taints[i].Effect {
			return false
		}
	}
	return true
}

// schedPDB is a PodDisruptionBudget.
type schedPDB struct {
	namespace, name string
	selector        labels.Selector
	allowed         int32
	// disrupted holds the names in status.disruptedPods: pods the API
	// server already counted against the budget.
	disrupted map[string]bool
}

// schedClass is a PriorityClass.
type schedClass struct {
	value        int32
	preemptNever bool
}

// schedKind says which kind of object a store event changed.
type schedKind uint8

const (
	schedOther schedKind = iota
	schedPods
	schedNodes
	schedPDBs
	schedClasses
)

func schedKindOf(resource string) schedKind {
	base, _, _ := strings.Cut(resource, ".")
	switch base {
	case "pods":
		return schedPods
	case "nodes":
		return schedNodes
	case "poddisruptionbudgets":
		return schedPDBs
	case "priorityclasses":
		return schedClasses
	}
	return schedOther
}

// schedChange is one applied store event: which object, and its version
// before and after (nil when absent), so a walk back in time can undo it.
type schedChange struct {
	kind schedKind
	// idx is the event's index in the replay order; t its recorder time.
	idx int
	t   int64
	key string
	// The pair for kind is set.
	podBefore, podAfter   *schedPod
	nodeBefore, nodeAfter *schedNode
	pdbBefore, pdbAfter   *schedPDB
}

// binding reports a change that binds a pending pod to a node.
func (c *schedChange) binding() bool {
	return c.kind == schedPods && c.podBefore != nil && c.podAfter != nil &&
		c.podBefore.uid == c.podAfter.uid && c.podBefore.node == "" && c.podAfter.node != ""
}

// schedState is the cluster as the store holds it after some prefix of the
// store events. apply changes it in place, one event at a time.
type schedState struct {
	nodes   map[string]*schedNode
	pods    map[string]*schedPod
	byNode  map[string]map[string]*schedPod // bound pods per node, by key
	byNS    map[string]map[string]*schedPod // every pod per namespace, by key
	pdbs    map[string]*schedPDB
	classes map[string]schedClass
	// nominated holds every node each pod UID was ever nominated to in
	// the store up to now.
	nominated map[string]map[string]bool
	// nodeGen grows whenever a node changes in a way the scheduler reads.
	nodeGen uint64
}

func newSchedState() *schedState {
	return &schedState{nodes: map[string]*schedNode{}, pods: map[string]*schedPod{},
		byNode: map[string]map[string]*schedPod{}, byNS: map[string]map[string]*schedPod{},
		pdbs: map[string]*schedPDB{}, classes: map[string]schedClass{}, nominated: map[string]map[string]bool{}}
}

// apply changes the state by one store event, whose object d holds
// decoded, and returns the change. An event whose object did not decode
// (d.err) is an error; the state is unchanged.
func (s *schedState) apply(ev *history.StoreEvent, idx int, d *schedDecoded) (schedChange, error) {
	ch := schedChange{kind: schedKindOf(ev.Resource), idx: idx, t: ev.T, key: schedKey(ev)}
	if d.err != nil {
		return ch, d.err
	}
	switch ch.kind {
	case schedPods:
		ch.podBefore, ch.podAfter = s.pods[ch.key], d.pod
		s.setPod(ch.key, ch.podBefore, d.pod)
	case schedNodes:
		n := d.node
		ch.nodeBefore, ch.nodeAfter = s.nodes[ch.key], n
		if !ch.nodeBefore.sameForScheduling(n) {
			s.nodeGen++
		}
		if n == nil {
			delete(s.nodes, ch.key)
		} else {
			s.nodes[ch.key] = n
		}
	case schedPDBs:
		pdb := d.pdb
		ch.pdbBefore, ch.pdbAfter = s.pdbs[ch.key], pdb
		if pdb == nil {
			delete(s.pdbs, ch.key)
		} else {
			s.pdbs[ch.key] = pdb
		}
	case schedClasses:
		if d.class == nil {
			delete(s.classes, ch.key)
			break
		}
		s.classes[ch.key] = *d.class
	}
	return ch, nil
}

// schedKey names the object of a store event: namespace/name, or the name
// of a cluster-scoped one.
func schedKey(ev *history.StoreEvent) string {
	if ev.Namespace != "" {
		return ev.Namespace + "/" + ev.Name
	}
	return ev.Name
}

func (s *schedState) setPod(key string, old, p *schedPod) {
	if old != nil && old.node != "" {
		if m := s.byNode[old.node]; m != nil {
			delete(m, key)
			if len(m) == 0 {
				delete(s.byNode, old.node)
			}
		}
	}
	if p == nil {
		delete(s.pods, key)
		if old != nil {
			delete(s.byNS[old.namespace], key)
		}
		return
	}
	s.pods[key] = p
	ns := s.byNS[p.namespace]
	if ns == nil {
		ns = map[string]*schedPod{}
		s.byNS[p.namespace] = ns
	}
	ns[key] = p
	if p.node != "" {
		m := s.byNode[p.node]
		if m == nil {
			m = map[string]*schedPod{}
			s.byNode[p.node] = m
		}
		m[key] = p
	}
	if p.nominated != "" {
		m := s.nominated[p.uid]
		if m == nil {
			m = map[string]bool{}
			s.nominated[p.uid] = m
		}
		m[p.nominated] = true
	}
}

// schedLostEvents reports whether the history notes store events that were
// lost (the recorder's watch fell behind compaction): the replayed state
// may then be wrong, and nothing may be called Illegal from it.
func schedLostEvents(h *history.History) bool {
	for _, l := range h.Logs {
		if l.Msg == "store events lost" && schedKindOf(l.Attrs["resource"]) != schedOther {
			return true
		}
	}
	return false
}

// schedViewLag bounds how far the scheduler's view may trail the store in a
// healthy cluster. The scheduler decides on its informer caches (one watch
// per resource, fed from the API server's watch cache) plus the pods it
// has assumed; one scheduling cycle takes milliseconds and a watch delivers
// in milliseconds, a few hundred on a loaded two-core machine. Five seconds
// is generous: a longer window only lets more states excuse a decision.
const schedViewLag = 5 * time.Second

// schedRecordSlack is how long after its commit a store change may be
// recorded: each resource is recorded by its own watch, so the recorder
// time of a change can trail the moment components saw it. Windows reach
// this much further back, and a decision's own moment this much further
// forward when no resourceVersion pins it.
const schedRecordSlack = time.Second

// schedRecoveryLag is how long after a fault heals the scheduler may still
// act on the state it had before: a paused scheduler resumes with its old
// caches, and a killed API server member breaks its watches, which
// client-go re-establishes after a back-off of up to 30 s and a relist.
const schedRecoveryLag = 35 * time.Second

// schedWindowStart is the earliest store time whose state the scheduler
// may have decided on at t: t − schedViewLag, or, when a fault was under
// way at t or healed less than schedRecoveryLag + schedViewLag before it,
// schedViewLag before that fault began (any fault: a pause, a kill or a
// partition of any component can hold the scheduler's watches or its
// requests).
func schedWindowStart(h *history.History, t int64) int64 {
	start := t - int64(schedViewLag) - int64(schedRecordSlack)
	for _, iv := range h.Nemesis {
		if iv.Start > t {
			break
		}
		if !iv.Healed || iv.End+int64(schedRecoveryLag) >= t-int64(schedViewLag) {
			start = min(start, iv.Start-int64(schedViewLag)-int64(schedRecordSlack))
		}
	}
	return start
}
