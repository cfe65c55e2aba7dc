package apiserver

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The rule IDs a refusal names. They are the guarantee IDs of GUARANTEES.md
// that each rule protects.
const (
	// RuleForceDelete: controllers only signal termination; force deletion of
	// a bound, running pod is reserved (PS-9, with the exceptions of PS-8,
	// PS-10 and PS-14).
	RuleForceDelete = "PS-9"
	// RuleBind: a pod is placed on a node once, by the scheduler (LC-3).
	RuleBind = "LC-3"
	// RulePodStatus: a pod's status is reported by its own node's kubelet,
	// with narrow exceptions for the scheduler and the node controller (LC-2).
	RulePodStatus = "LC-2"
	// RuleHeartbeat: a kubelet writes only its own Node object and its own
	// node lease, so one node cannot keep another alive or mark it dead (PS-13).
	RuleHeartbeat = "PS-13"
	// RuleFence: only the fencing controller (or admin) sets or clears the
	// fence condition; a fenced node must not come back by itself (PS-14).
	RuleFence = "PS-14"
	// RuleNodeDelete: deleting a Node declares a permanent partition and
	// licenses pod GC to force delete its pods, so only admin does it (PS-10).
	RuleNodeDelete = "PS-10"
	// RuleAttach: a RWO volume's attachment is created, moved and broken
	// only by the attach/detach controller (or admin); the fencing
	// controller breaks one only once its node is confirmed fenced (PS-15).
	RuleAttach = "PS-15"
	// RuleNodeRestriction: a kubelet acts only for its own node, so a pod
	// executes on exactly one node under one kubelet's authority: it
	// writes its own Node (not its taints or the labels that steer
	// workloads), the status of the pods bound to it, their deletion and
	// eviction, and nothing else (PS-1; see noderestriction.go).
	RuleNodeRestriction = "PS-1"
	// RulePodLifecycle: each step of a pod's life (creation, binding,
	// execution, termination, deletion) is written by the component that
	// owns it, so the steps happen in order (PS-2). It names refusals of
	// pod, namespace and service writes outside the write table.
	RulePodLifecycle = "PS-2"
	// RulePetSet: the pet set is the record the pet controller keeps at
	// most one pet per identity by (PS-11).
	RulePetSet = "PS-11"
	// RuleReplicaSet: a ReplicaSet's replicas and status are the
	// availability the ReplicaSet controller keeps (PS-7). A Deployment's
	// ReplicaSets are written by the deployment controller, which scales
	// them within maxSurge and maxUnavailable and never touches pods, so
	// the ReplicaSet controller stays the only writer of their pods;
	// Deployments fall under the same rule.
	RuleReplicaSet = "PS-7"
	// RuleDisruptionBudget: budgets and their allowed disruptions are what
	// preemption and eviction honour (PR-7).
	RuleDisruptionBudget = "PR-7"
	// RulePriorityClass: priority classes map names to priorities (PR-1).
	RulePriorityClass = "PR-1"
	// RuleEvent: events are the record of preemptions and fences (PR-15).
	RuleEvent = "PR-15"
)

// resourceRules names, per resource, the rule that refuses a write the
// write table does not grant, when no more specific rule does (see
// tableRule).
var resourceRules = map[schema.GroupResource]string{
	grPods:              RulePodLifecycle,
	grNamespaces:        RulePodLifecycle,
	grServices:          RulePodLifecycle,
	grNodes:             RuleHeartbeat,
	grLeases:            RuleHeartbeat,
	grVolumeAttachments: RuleAttach,
	grStatefulSets:      RulePetSet,
	grReplicaSets:       RuleReplicaSet,
	grDeployments:       RuleReplicaSet,
	grPDBs:              RuleDisruptionBudget,
	grPriorityClasses:   RulePriorityClass,
	grEvents:            RuleEvent,
	grEventsV1:          RuleEvent,
}

// Verbs as Authorize sees them: the Kubernetes API verbs.
const (
	VerbGet              = "get"
	VerbList             = "list"
	VerbWatch            = "watch"
	VerbCreate           = "create"
	VerbUpdate           = "update"
	VerbPatch            = "patch"
	VerbDelete           = "delete"
	VerbDeleteCollection = "deletecollection"
)

// Request is everything Authorize needs to decide one API request. The
// handler fills it from the URL, the decoded body and the stored state.
type Request struct {
	// Identity is the authenticated caller (see identity.go).
	Identity string
	// Verb is one of the Verb constants.
	Verb string
	// Resource is the group and plural resource ("pods", "leases" in
	// "coordination.k8s.io").
	Resource schema.GroupResource
	// Subresource is "", "status", "binding", "eviction" or "scale".
	Subresource string
	// Namespace and Name name the object ("" for collections).
	Namespace, Name string
	// Object is the object as it would be written (create, update, patch),
	// after defaulting; nil for other verbs.
	Object runtime.Object
	// Old is the stored object for update, patch, delete and subresources;
	// nil for create.
	Old runtime.Object
	// GracePeriodSeconds is the grace a pod deletion leaves by GP-6 and
	// PS-3 (GracefulDelete): 0 when it removes the pod at once (a first
	// DELETE of an unscheduled or terminal pod, grace 0, or a later DELETE
	// that shortens a pending deletion to 0), else the
	// deletionGracePeriodSeconds it leaves (a pending deletion's own when it
	// changes nothing); nil for other requests.
	GracePeriodSeconds *int64
	// Node is the stored Node a pod is bound to, for requests whose decision
	// depends on it (force deletion, node-controller status writes); nil when
	// no such Node exists.
	Node *corev1.Node
}

// Decision is Authorize's answer. A refusal names its rule and says why in a
// sentence that can go straight into a 403 Status message.
type Decision struct {
	// Allowed is true when the request may proceed.
	Allowed bool
	// Rule is the rule ID that refused the request ("" when allowed).
	Rule string
	// Reason explains a refusal, starting with the rule ID.
	Reason string
}

// allow is the Decision for a permitted request.
var allow = Decision{Allowed: true}

// refuse builds a refusal of rule with a formatted reason.
func refuse(rule, format string, args ...any) Decision {
	return Decision{Rule: rule, Reason: rule + ": " + fmt.Sprintf(format, args...)}
}

var (
	grPods              = schema.GroupResource{Resource: "pods"}
	grNodes             = schema.GroupResource{Resource: "nodes"}
	grLeases            = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	grVolumeAttachments = schema.GroupResource{Group: "storage.k8s.io", Resource: "volumeattachments"}
)

// Authorize decides whether req may proceed under the pod-safety authority
// rules. It is a pure function of req: every fact it needs (stored pod, its
// node, effective grace) is in req, so it can be table-tested and replayed by
// a checker.
//
// Reads (get, list, watch) are allowed to every authenticated identity, as
// upstream's system:node role lets a kubelet get, list and watch pods and
// nodes: no read changes what runs where. (Upstream's Node authorizer
// narrows a kubelet's reads to the pods bound to it and its own Node; that
// guards secrets and limits what a compromised node learns, which no
// guarantee here is about.)
//
// A write must first be granted by the write table (GrantsOf: admin may
// make every write, the workload identity is the written-down exception of
// an ordinary user, every other identity has only the writes its component
// makes); a write the table does not grant is refused under the rule
// tableRule names. A granted write is then judged by the rules for pods,
// nodes, leases and attachments, and a kubelet's by the node restriction
// (noderestriction.go).
func Authorize(req Request) Decision {
	switch req.Verb {
	case VerbGet, VerbList, VerbWatch:
		return allow
	}
	if !granted(req) {
		return refuseUngranted(req)
	}
	var d Decision
	switch req.Resource {
	case grPods:
		d = authorizePod(req)
	case grNodes:
		d = authorizeNode(req)
	case grLeases:
		d = authorizeLease(req)
	case grVolumeAttachments:
		d = authorizeAttachment(req)
	default:
		d = allow
	}
	if !d.Allowed {
		return d
	}
	if node, ok := KubeletNode(req.Identity); ok {
		return restrictNode(req, node)
	}
	return allow
}

// refuseUngranted is the refusal of a write the write table does not grant.
func refuseUngranted(req Request) Decision {
	what := req.Resource.String()
	if req.Subresource != "" {
		what += "/" + req.Subresource
	}
	if name := requestName(req); name != "" {
		what += " " + objectRef(req.Namespace, name)
	} else if req.Namespace != "" {
		what += " in namespace " + req.Namespace
	}
	who := "its component makes no such write"
	switch {
	case !KnownIdentity(req.Identity):
		who = "it is no identity podsafe knows"
	case isKubelet(req.Identity):
		who = "a kubelet writes only its own Node and Lease, the status of its pods, and their deletion and eviction"
	case req.Identity == IdentityWorkload:
		who = "an ordinary user writes no status, binding, node or attachment"
	}
	return refuse(tableRule(req), "%s may not %s %s; %s", req.Identity, req.Verb, what, who)
}

// tableRule names the rule a write outside the write table is refused
// under: the rule of the record it would have changed (binding, pod status,
// node, heart-beat lease, fence token, attachment), else the node
// restriction for kubelets, else the resource's (resourceRules).
func tableRule(req Request) string {
	switch {
	case req.Resource == grPods && req.Subresource == subBinding:
		return RuleBind
	case req.Resource == grPods && req.Subresource == subStatus:
		return RulePodStatus
	case req.Resource == grNodes && (req.Verb == VerbDelete || req.Verb == VerbDeleteCollection):
		return RuleNodeDelete
	case req.Resource == grNodes:
		return RuleHeartbeat
	case req.Resource == grLeases && req.Namespace == KubeLeaseNamespace:
		return RuleHeartbeat
	case isFenceTokenLease(req):
		return RuleFence
	case req.Resource == grVolumeAttachments:
		return RuleAttach
	case isKubelet(req.Identity):
		return RuleNodeRestriction
	}
	if rule, ok := resourceRules[req.Resource]; ok {
		return rule
	}
	return RulePodLifecycle
}

// requestName is the name of the object req writes: from the URL, or from
// the object for a create.
func requestName(req Request) string {
	if req.Name != "" || req.Object == nil {
		return req.Name
	}
	if m, err := metaOf(req.Object); err == nil {
		return m.GetName()
	}
	return ""
}

// objectRef renders an object as namespace/name, or name when cluster-scoped.
func objectRef(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// authorizeAttachment applies the RWO attachment rules of PS-15: only the
// attach/detach controller and admin write attachments; an attachment's node
// never changes (a volume moves by detach, then attach elsewhere); the
// fencing controller may delete an attachment only once its node is
// confirmed fenced. req.Node is the attachment's node for deletions.
func authorizeAttachment(req Request) Decision {
	id := req.Identity
	name := req.Name
	if name == "" && req.Object != nil {
		if m, err := metaOf(req.Object); err == nil {
			name = m.GetName()
		}
	}
	switch req.Verb {
	case VerbCreate, VerbUpdate, VerbPatch:
		if id != IdentityAdmin && id != IdentityAttachDetachController {
			return refuse(RuleAttach, "%s may not %s volume attachment %s; only the attach/detach controller and admin attach volumes", id, req.Verb, name)
		}
		oldVA, _ := req.Old.(*storagev1.VolumeAttachment)
		newVA, _ := req.Object.(*storagev1.VolumeAttachment)
		if oldVA != nil && newVA != nil && oldVA.Spec.NodeName != newVA.Spec.NodeName {
			return refuse(RuleAttach, "volume attachment %s: spec.nodeName may not change from %s to %s; detach, then attach to the new node", name, oldVA.Spec.NodeName, newVA.Spec.NodeName)
		}
		return allow
	case VerbDelete, VerbDeleteCollection:
		switch {
		case id == IdentityAdmin, id == IdentityAttachDetachController:
			return allow
		case id == IdentityFencingController && nodeFenced(req.Node):
			return allow
		case id == IdentityFencingController:
			node := ""
			if va, ok := req.Old.(*storagev1.VolumeAttachment); ok {
				node = va.Spec.NodeName
			}
			return refuse(RuleAttach, "the fencing controller breaks attachment %s only after node %s carries condition %s=True", name, node, FencedCondition)
		}
		return refuse(RuleAttach, "%s may not delete volume attachment %s; only the attach/detach controller, admin and (for fenced nodes) the fencing controller detach volumes", id, name)
	}
	return allow
}

// authorizePod applies the pod rules: force deletion, binding, status.
func authorizePod(req Request) Decision {
	id := req.Identity
	switch {
	case req.Verb == VerbCreate && req.Subresource == "":
		pod, _ := req.Object.(*corev1.Pod)
		if pod != nil && pod.Spec.NodeName != "" && id != IdentityAdmin {
			return refuse(RuleBind, "%s may not create pod %s already bound to node %s; create it unbound and let the scheduler bind it",
				id, podRef(req), pod.Spec.NodeName)
		}
		return allow

	case req.Subresource == "binding":
		if id == IdentityScheduler || id == IdentityAdmin {
			return allow
		}
		return refuse(RuleBind, "%s may not bind pod %s; only the scheduler binds", id, podRef(req))

	case req.Subresource == "status" && (req.Verb == VerbUpdate || req.Verb == VerbPatch):
		return authorizePodStatus(req)

	case req.Verb == VerbDelete || req.Verb == VerbDeleteCollection ||
		(req.Verb == VerbCreate && req.Subresource == "eviction"):
		return authorizePodDelete(req)
	}
	return allow
}

// authorizePodDelete lets anyone delete gracefully and reserves force
// deletion of a bound, non-terminal pod: any DELETE that removes it at once,
// the first or a later one shortening a pending deletion to 0.
func authorizePodDelete(req Request) Decision {
	old, _ := req.Old.(*corev1.Pod)
	if old == nil || req.GracePeriodSeconds == nil || *req.GracePeriodSeconds > 0 {
		return allow
	}
	node := old.Spec.NodeName
	if node == "" || podTerminal(old) {
		// Nothing can be running: deleting it at once is not a force deletion.
		return allow
	}
	id := req.Identity
	switch {
	case id == IdentityAdmin:
		return allow
	case id == KubeletIdentity(node):
		// PS-8: the pod's own kubelet finishes the deletion once its
		// containers are confirmed terminated.
		return allow
	case id == IdentityPodGC && req.Node == nil:
		// PS-10: the node object is gone, which means a permanent partition.
		return allow
	case id == IdentityFencingController && nodeFenced(req.Node):
		// PS-14: the node is confirmed fenced; nothing of it can still run.
		return allow
	}
	why := "controllers only delete gracefully"
	switch {
	case id == IdentityPodGC:
		why = fmt.Sprintf("pod GC force deletes only pods whose node object is gone (PS-10), and node %s exists", node)
	case id == IdentityFencingController:
		why = fmt.Sprintf("the fencing controller force deletes only after node %s carries condition %s=True (PS-14)", node, FencedCondition)
	case isKubelet(id):
		why = fmt.Sprintf("only kubelet:%s finishes the deletion of its own pods (PS-8)", node)
	}
	return refuse(RuleForceDelete, "%s may not force delete pod %s (bound to %s, not terminated); %s",
		id, podRef(req), node, why)
}

// authorizePodStatus admits status writes by the pod's own kubelet, admin,
// the scheduler (conditions and nominatedNodeName only) and the node
// controller (conditions, phase, reason and message, only for pods whose node
// is not Ready or gone).
func authorizePodStatus(req Request) Decision {
	old, _ := req.Old.(*corev1.Pod)
	upd, _ := req.Object.(*corev1.Pod)
	if old == nil || upd == nil {
		return allow
	}
	id := req.Identity
	node := old.Spec.NodeName
	switch {
	case id == IdentityAdmin:
		return allow
	case node != "" && id == KubeletIdentity(node):
		return allow
	case isKubelet(id):
		if node == "" {
			return refuse(RulePodStatus, "%s may not write the status of pod %s, which is not bound to any node", id, podRef(req))
		}
		return refuse(RulePodStatus, "%s may not write the status of pod %s, which is bound to %s", id, podRef(req), node)
	case id == IdentityScheduler:
		if statusOnlyChanged(old.Status, upd.Status, func(s *corev1.PodStatus) {
			s.Conditions = nil
			s.NominatedNodeName = ""
		}) {
			return allow
		}
		return refuse(RulePodStatus, "the scheduler may change only conditions and nominatedNodeName in the status of pod %s", podRef(req))
	case id == IdentityNodeController:
		if node != "" && nodeReady(req.Node) {
			return refuse(RulePodStatus, "the node controller may write the status of pod %s only while its node %s is not Ready", podRef(req), node)
		}
		if statusOnlyChanged(old.Status, upd.Status, func(s *corev1.PodStatus) {
			s.Conditions = nil
			s.Phase = ""
			s.Reason = ""
			s.Message = ""
		}) {
			return allow
		}
		return refuse(RulePodStatus, "the node controller may change only conditions, phase, reason and message in the status of pod %s", podRef(req))
	}
	return refuse(RulePodStatus, "%s may not write the status of pod %s; only its kubelet, the scheduler, the node controller and admin do", id, podRef(req))
}

// statusOnlyChanged reports whether a and b are equal once clear has removed
// the fields the caller may change from both.
func statusOnlyChanged(a, b corev1.PodStatus, clear func(*corev1.PodStatus)) bool {
	a, b = *a.DeepCopy(), *b.DeepCopy()
	clear(&a)
	clear(&b)
	return apiequality.Semantic.DeepEqual(a, b)
}

// authorizeNode applies the node rules: kubelets write only their own Node,
// the node and fencing controllers update any, only admin deletes, and only
// the fencing controller and admin touch the fence record.
func authorizeNode(req Request) Decision {
	id := req.Identity
	name := requestName(req)
	oldNode, _ := req.Old.(*corev1.Node)
	newNode, _ := req.Object.(*corev1.Node)
	switch req.Verb {
	case VerbDelete, VerbDeleteCollection:
		if id == IdentityAdmin {
			return allow
		}
		return refuse(RuleNodeDelete, "%s may not delete node %s; deleting a node declares it permanently gone, which only admin does", id, name)
	case VerbCreate:
		if id != IdentityAdmin && id != KubeletIdentity(name) {
			return refuse(RuleHeartbeat, "%s may not create node %s; a kubelet registers only its own node", id, name)
		}
	case VerbUpdate, VerbPatch:
		switch {
		case id == IdentityAdmin, id == KubeletIdentity(name), id == IdentityNodeController, id == IdentityFencingController:
		default:
			return refuse(RuleHeartbeat, "%s may not update node %s; only its own kubelet, the node controller, the fencing controller and admin do", id, name)
		}
	default:
		return allow
	}
	if id == IdentityAdmin || id == IdentityFencingController {
		return allow
	}
	if what := fenceRecordChange(oldNode, newNode); what != "" {
		return refuse(RuleFence, "%s may not change the fence record of node %s (%s); only the fencing controller and admin do", id, name, what)
	}
	if id == IdentityNodeController && req.Subresource == "" {
		if what := nodeSpecChange(oldNode, newNode, func(n *corev1.Node) { n.Spec.Taints = nil }); what != "" {
			return refuse(RuleHeartbeat, "the node controller may change only the taints of node %s, not its %s", name, what)
		}
	}
	return allow
}

// nodeSpecChange names what differs between two versions of a node besides
// what clear removes from both and the status ("" when nothing does).
func nodeSpecChange(oldNode, newNode *corev1.Node, clear func(*corev1.Node)) string {
	if oldNode == nil || newNode == nil {
		return ""
	}
	a, b := oldNode.DeepCopy(), newNode.DeepCopy()
	for _, n := range []*corev1.Node{a, b} {
		clear(n)
		n.Status = corev1.NodeStatus{}
		n.ResourceVersion, n.Generation, n.ManagedFields = "", 0, nil
	}
	switch {
	case !apiequality.Semantic.DeepEqual(a.Spec, b.Spec):
		return "spec"
	case !apiequality.Semantic.DeepEqual(a.ObjectMeta, b.ObjectMeta):
		return "metadata"
	}
	return ""
}

// authorizeLease reserves each node heart-beat lease for its own kubelet and
// the fence token lease for the fencing controller.
func authorizeLease(req Request) Decision {
	id := req.Identity
	name := requestName(req)
	switch {
	case id == IdentityAdmin:
		return allow
	case isFenceTokenLease(req):
		if id == IdentityFencingController {
			return allow
		}
		return refuse(RuleFence, "%s may not %s lease %s/%s; the fence token counter is written only by the fencing controller", id, req.Verb, req.Namespace, name)
	case req.Namespace != KubeLeaseNamespace:
		return allow
	case name != "" && id == KubeletIdentity(name):
		return allow
	}
	return refuse(RuleHeartbeat, "%s may not %s lease %s/%s; a node's lease is written only by its own kubelet", id, req.Verb, req.Namespace, name)
}

// isFenceTokenLease reports whether req writes the fence token lease.
func isFenceTokenLease(req Request) bool {
	return req.Resource == grLeases && req.Namespace == FenceTokenLeaseNamespace && requestName(req) == FenceTokenLeaseName
}

// podRef renders the pod a request is about as namespace/name.
func podRef(req Request) string {
	name, ns := req.Name, req.Namespace
	for _, o := range []runtime.Object{req.Old, req.Object} {
		if p, ok := o.(*corev1.Pod); ok && p != nil {
			if name == "" {
				name = p.Name
			}
			if ns == "" {
				ns = p.Namespace
			}
		}
	}
	return ns + "/" + name
}

// isKubelet reports whether identity is some kubelet's.
func isKubelet(identity string) bool {
	_, ok := KubeletNode(identity)
	return ok
}

// podTerminal reports whether a pod's phase is Succeeded or Failed.
func podTerminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}
