package checker

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The rules of convergence: what a settled cluster's objects show.

// The default scheduler's names: upstream's, which the API defaults, and
// the empty name of a pod recorded before defaulting.
const defaultSchedulerName = "default-scheduler"

// FinalState is the cluster's objects at one moment, each the JSON of its
// Kubernetes object: what Converge judges. A run and the checker both
// build it with a FinalTracker from the store lines, as they are recorded
// and as the history holds them.
type FinalState struct {
	Pods, Nodes, StatefulSets, ReplicaSets, Deployments, VolumeAttachments []json.RawMessage
	// Gone are the UIDs of the owners (ReplicaSets, StatefulSets,
	// Deployments) whose removal the store lines record.
	Gone map[string]bool
	// Through is the recorder time of the last store line the state
	// follows; Changed that of the last one that changed something other
	// than a node (nodes change with every heart-beat): from then on the
	// pods, sets and attachments stood still.
	Through, Changed int64
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
	Namespace                  string   `json:"namespace"`
	Name                       string   `json:"name"`
	UID                        string   `json:"uid"`
	DeletionTimestamp          *string  `json:"deletionTimestamp"`
	DeletionGracePeriodSeconds *int64   `json:"deletionGracePeriodSeconds"`
	Generation                 int64    `json:"generation"`
	Finalizers                 []string `json:"finalizers"`
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
		Replicas            *int64     `json:"replicas"`
		PodManagementPolicy string     `json:"podManagementPolicy"`
		Template            cvTemplate `json:"template"`
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

// firstError keeps the first error of a series of decodes.
type firstError struct{ err error }

// decodeEach decodes every object of raw into a T, unless d already holds
// an error; the first that does not decode sets d's error, naming it.
func decodeEach[T any](d *firstError, kind string, raw []json.RawMessage) []T {
	if d.err != nil {
		return nil
	}
	out := make([]T, len(raw))
	for i, r := range raw {
		if err := json.Unmarshal(r, &out[i]); err != nil {
			d.err = fmt.Errorf("%s %d of %d does not decode: %w", kind, i+1, len(raw), err)
			return nil
		}
	}
	return out
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
//   - A Deployment (not being deleted or paused) whose rollout is not
//     complete, or whose status does not say it is (deploymentRules).
//
// Objects that do not decode are an error naming the first.
func Converge(st FinalState) (Convergence, error) {
	var d firstError
	j := &judgment{st: st,
		pods:        decodeEach[cvPod](&d, "pod", st.Pods),
		nodes:       decodeEach[cvNode](&d, "node", st.Nodes),
		sets:        decodeEach[cvSet](&d, "statefulset", st.StatefulSets),
		rss:         decodeEach[cvSet](&d, "replicaset", st.ReplicaSets),
		deployments: decodeEach[cvDeployment](&d, "deployment", st.Deployments),
		attachments: decodeEach[cvAttachment](&d, "volumeattachment", st.VolumeAttachments),
		healthy:     map[string]bool{}, fenced: map[string]bool{},
		byController: map[string][]*cvPod{}, byName: map[string]*cvPod{}}
	if d.err != nil {
		return Convergence{}, d.err
	}
	var longest int64
	for i := range j.pods {
		p := &j.pods[i]
		longest = max(longest, p.grace())
		j.byName[p.Metadata.Namespace+"/"+p.Metadata.Name] = p
		if _, uid := p.controller(); uid != "" {
			j.byController[uid] = append(j.byController[uid], p)
		}
	}
	for i := range j.nodes {
		j.healthy[j.nodes[i].Metadata.Name] = j.nodes[i].healthy()
		j.fenced[j.nodes[i].Metadata.Name] = j.nodes[i].fenced()
	}
	j.podRules()
	j.attachmentRules()
	j.replicaSetRules()
	j.deploymentRules()
	j.collectorRules()
	for i := range j.sets {
		j.statefulSetRules(&j.sets[i])
	}
	sort.SliceStable(j.out, func(a, b int) bool { return j.out[a].Key < j.out[b].Key })
	return Convergence{Divergences: j.out, Bound: ConvergenceBase + time.Duration(longest)*time.Second}, nil
}

// judgment is one Converge: the decoded state, what it derived of it, and
// the divergences found so far.
type judgment struct {
	st          FinalState
	pods        []cvPod
	nodes       []cvNode
	sets, rss   []cvSet
	deployments []cvDeployment
	attachments []cvAttachment
	// healthy and fenced are the nodes' (cvNode.healthy, cvNode.fenced).
	healthy, fenced map[string]bool
	// byController lists the pods by their controller's UID; byName finds
	// a pod by namespace/name.
	byController map[string][]*cvPod
	byName       map[string]*cvPod
	sched        *schedFinal // built on first use (scheduler)
	out          []Divergence
}

func (j *judgment) add(kind string, m *cvMeta, g, format string, args ...any) {
	j.out = append(j.out, Divergence{Key: kind + "/" + m.Namespace + "/" + m.Name, Guarantee: g, Description: fmt.Sprintf(format, args...)})
}

// scheduler returns the state as the scheduler's filters see it.
func (j *judgment) scheduler() *schedFinal {
	if j.sched == nil {
		j.sched = newSchedFinal(j.st)
	}
	return j.sched
}

// podRules judges each pod: where it is bound, whether it is terminating,
// started or judged by the scheduler.
func (j *judgment) podRules() {
	for i := range j.pods {
		p := &j.pods[i]
		node := p.Spec.NodeName
		switch {
		case j.fenced[node]:
			j.add("pod", &p.Metadata, "PS-14", "bound to node %s, which is fenced, yet not force deleted: its replacement cannot start", node)
		case p.terminating() && node == "":
			j.add("pod", &p.Metadata, "LC-11", "marked for deletion and never bound, yet not removed (the API deletes an unbound pod at once)")
		case p.terminating() && j.healthy[node]:
			j.add("pod", &p.Metadata, "PS-4", "marked for deletion (grace %s) on node %s, which is Ready, yet not removed: its kubelet has not finished the deletion", graceOf(p), node)
		case p.terminating() || p.terminal():
		case node != "" && j.healthy[node] && p.Status.Phase == "Pending" && len(p.Spec.InitContainers) == 0 && !p.waitsForVolume():
			j.add("pod", &p.Metadata, "PS-12", "bound to node %s, which is Ready, yet still Pending: its kubelet has not started it", node)
		case node == "" && len(p.Spec.SchedulingGates) == 0 && (p.Spec.SchedulerName == "" || p.Spec.SchedulerName == defaultSchedulerName):
			if cond, _ := p.condition("PodScheduled"); cond != "False" {
				j.add("pod", &p.Metadata, "PR-3", "not bound and not judged unschedulable (no PodScheduled False): the scheduler has not placed it")
			} else if room := j.scheduler().roomFor(i, j.healthy); room != "" {
				j.add("pod", &p.Metadata, "PR-3", "not bound, though %s: the scheduler has not placed it", room)
			}
		}
	}
}

// attachmentRules judges the volume attachments of fenced nodes.
func (j *judgment) attachmentRules() {
	for i := range j.attachments {
		if a := &j.attachments[i]; j.fenced[a.Spec.NodeName] {
			j.add("volumeattachment", &a.Metadata, "PS-15", "attaches a volume to node %s, which is fenced, yet is not broken: the volume cannot attach elsewhere", a.Spec.NodeName)
		}
	}
}

// replicaSetRules judges each ReplicaSet's active pods and its status.
func (j *judgment) replicaSetRules() {
	for i := range j.rss {
		rs := &j.rss[i]
		if rs.Metadata.DeletionTimestamp != nil {
			continue
		}
		active, ready := j.activePods(rs)
		if want := rs.replicas(); active != want {
			j.add("replicaset", &rs.Metadata, "PS-7", "wants %d replicas and has %d active pods (controlled by it, not terminating, not Succeeded or Failed)", want, active)
		} else if wrong := rs.status(active, ready); wrong != "" {
			j.add("replicaset", &rs.Metadata, "PS-7", "has its %d replicas, but its status says %s", want, wrong)
		}
	}
}

// pet returns set's pet of ordinal ord, nil when there is none (a pod of
// that name that the set does not control is none).
func (j *judgment) pet(set *cvSet, ord int64) *cvPod {
	p := j.byName[set.Metadata.Namespace+"/"+set.Metadata.Name+"-"+strconv.FormatInt(ord, 10)]
	if p == nil {
		return nil
	}
	if _, uid := p.controller(); uid != set.Metadata.UID {
		return nil
	}
	return p
}

// statefulSetRules judges one StatefulSet: its pets below its replicas,
// those above, and its status.
func (j *judgment) statefulSetRules(set *cvSet) {
	if set.Metadata.DeletionTimestamp != nil {
		return
	}
	ordered := set.Spec.PodManagementPolicy != "Parallel"
	n := set.replicas()
	healthySoFar := true // every pet below the current ordinal is Running and Ready
	diverged := len(j.out)
	for ord := range n {
		p := j.pet(set, ord)
		switch {
		case p == nil && (healthySoFar || !ordered):
			j.add("statefulset", &set.Metadata, "PS-12", "wants %d replicas and pet %s-%d does not exist: it was not created", n, set.Metadata.Name, ord)
		case p != nil && p.terminal() && !p.terminating() && (p.Spec.NodeName == "" || j.healthy[p.Spec.NodeName]):
			j.add("statefulset", &set.Metadata, "PS-11", "pet %s-%d is %s and not marked for deletion, on %s: it was not replaced", set.Metadata.Name, ord, p.Status.Phase, nodeOrNone(p.Spec.NodeName))
		}
		if p == nil || !p.runningReady() {
			healthySoFar = false
		}
	}
	if ordered && !healthySoFar {
		return
	}
	var extra []string
	var owned, ready int64
	terminating := false
	for _, p := range j.byController[set.Metadata.UID] {
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
		j.add("statefulset", &set.Metadata, "PS-12", "wants %d replicas and still has %s, not marked for deletion: the set was not scaled down", n, strings.Join(extra, ", "))
	}
	// Its status, once the set itself converged: terminating pets are
	// counted differently by upstream (ready while still Running and
	// Ready) and podsafe (not ready), so a set with one is left out.
	if len(j.out) == diverged && !terminating {
		if wrong := set.status(owned, ready); wrong != "" {
			j.add("statefulset", &set.Metadata, "PS-12", "has its pets where they should be, but its status says %s", wrong)
		}
	}
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
