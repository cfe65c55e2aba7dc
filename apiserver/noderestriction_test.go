package apiserver

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// authorityCaseTable is one Authorize table row.
type authorityCaseTable struct {
	name string
	req  Request
	want Decision
}

// checkAuthorize runs Authorize over cases, comparing Allowed and Rule and
// checking that every refusal's reason starts with its rule.
func checkAuthorize(t *testing.T, cases []authorityCaseTable) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			got := Authorize(tt.req)
			if diff := cmp.Diff(tt.want, Decision{Allowed: got.Allowed, Rule: got.Rule}); diff != "" {
				t.Errorf("Authorize (-want +got):\n%s\nreason: %s", diff, got.Reason)
			}
			if !got.Allowed && !strings.HasPrefix(got.Reason, got.Rule+": ") {
				t.Errorf("reason %q does not start with its rule %s", got.Reason, got.Rule)
			}
			if got.Allowed && (got.Rule != "" || got.Reason != "") {
				t.Errorf("allowed with rule %q reason %q", got.Rule, got.Reason)
			}
		})
	}
}

// TestNodeRestriction checks, per verb, what a kubelet may write: its own
// node's pods, Node and Lease, and nothing of other nodes or other kinds.
func TestNodeRestriction(t *testing.T) {
	k1, k2 := KubeletIdentity("node-1"), KubeletIdentity("node-2")
	mine := makePod("p").node("node-1").phase(corev1.PodRunning).obj()
	unbound := makePod("p").obj()
	owned := mine.DeepCopy()
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web", UID: "u1"}}
	finalized := owned.DeepCopy()
	finalized.Finalizers = []string{"example.com/hold"}
	orphaned := owned.DeepCopy()
	orphaned.OwnerReferences = nil
	relabelled := owned.DeepCopy()
	relabelled.Labels = map[string]string{"app": "other"}

	podReq := func(id, verb, sub string, old, obj *corev1.Pod, grace *int64) Request {
		r := Request{Identity: id, Verb: verb, Resource: grPods, Subresource: sub, Namespace: "default", Name: "p", GracePeriodSeconds: grace}
		if old != nil {
			r.Old = old
		}
		if obj != nil {
			r.Object = obj
		}
		return r
	}
	graceful := int64p(30)

	labelled := func(labels map[string]string, taints ...corev1.Taint) *corev1.Node {
		n := makeNode("node-1").condition(corev1.NodeReady, corev1.ConditionTrue).obj()
		n.Labels = labels
		n.Spec.Taints = taints
		return n
	}
	base := labelled(map[string]string{corev1.LabelHostname: "node-1", corev1.LabelTopologyZone: "zone-a"})
	unreachable := corev1.Taint{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoExecute}
	tainted := labelled(base.Labels, unreachable)
	withLabel := func(k, v string) *corev1.Node {
		n := base.DeepCopy()
		n.Labels[k] = v
		return n
	}
	ownedNode := base.DeepCopy()
	ownedNode.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Namespace", Name: "x", UID: "u"}}
	nodeReq := func(id, verb, sub string, old, obj *corev1.Node) Request {
		r := Request{Identity: id, Verb: verb, Resource: grNodes, Subresource: sub, Name: "node-1"}
		if old != nil {
			r.Old = old
		}
		if obj != nil {
			r.Object = obj
		}
		return r
	}
	other := func(id, verb string, gr schema.GroupResource, sub, ns, name string, obj runtime.Object) Request {
		return Request{Identity: id, Verb: verb, Resource: gr, Subresource: sub, Namespace: ns, Name: name, Object: obj}
	}
	allowed := Decision{Allowed: true}
	refusedBy := func(rule string) Decision { return Decision{Rule: rule} }

	checkAuthorize(t, []authorityCaseTable{
		// Pods: delete and evict only its own; never create or update.
		{"kubelet deletes its own pod gracefully", podReq(k1, VerbDelete, "", mine, nil, graceful), allowed},
		{"kubelet may not delete a pod of another node gracefully", podReq(k2, VerbDelete, "", mine, nil, graceful), refusedBy(RuleNodeRestriction)},
		{"kubelet may not delete an unbound pod", podReq(k1, VerbDelete, "", unbound, nil, int64p(0)), refusedBy(RuleNodeRestriction)},
		{"kubelet may not delete a pod it cannot see", podReq(k1, VerbDelete, "", nil, nil, graceful), refusedBy(RuleNodeRestriction)},
		{"kubelet finishes its own pod's deletion (PS-8)", podReq(k1, VerbDelete, "", mine, nil, int64p(0)), allowed},
		{"kubelet may not delete a collection of pods", podReq(k1, VerbDeleteCollection, "", mine, nil, graceful), refusedBy(RuleNodeRestriction)},
		{"kubelet evicts its own pod", podReq(k1, VerbCreate, subEviction, mine, nil, graceful), allowed},
		{"kubelet may not evict a pod of another node", podReq(k2, VerbCreate, subEviction, mine, nil, graceful), refusedBy(RuleNodeRestriction)},
		{"kubelet may not create a pod", podReq(k1, VerbCreate, "", nil, unbound, nil), refusedBy(RuleNodeRestriction)},
		{"kubelet may not create a mirror pod bound to itself", podReq(k1, VerbCreate, "", nil, mine, nil), refusedBy(RuleNodeRestriction)},
		{"kubelet may not add a finalizer to another node's pod", podReq(k2, VerbPatch, "", owned, finalized, nil), refusedBy(RuleNodeRestriction)},
		{"kubelet may not add a finalizer to its own pod", podReq(k1, VerbUpdate, "", owned, finalized, nil), refusedBy(RuleNodeRestriction)},
		{"kubelet may not strip a pod's ownerReferences", podReq(k2, VerbUpdate, "", owned, orphaned, nil), refusedBy(RuleNodeRestriction)},
		{"kubelet may not relabel a pod", podReq(k1, VerbPatch, "", owned, relabelled, nil), refusedBy(RuleNodeRestriction)},
		{"kubelet writes its own pod's status", podReq(k1, VerbPatch, subStatus, mine, mine, nil), allowed},
		{"kubelet may not write another node's pod status", podReq(k2, VerbPatch, subStatus, mine, mine, nil), refusedBy(RulePodStatus)},
		{"kubelet may not bind", podReq(k1, VerbCreate, subBinding, unbound, nil, nil), refusedBy(RuleBind)},
		{"the workload may add a finalizer", podReq(IdentityWorkload, VerbUpdate, "", owned, finalized, nil), allowed},
		{"the workload may strip ownerReferences", podReq(IdentityWorkload, VerbPatch, "", owned, orphaned, nil), allowed},

		// Its Node: taints only at registration, allowed labels only.
		{"kubelet registers its node with taints and kubelet labels", nodeReq(k1, VerbCreate, "", nil, tainted), allowed},
		{"kubelet registers its node with a label of its own namespace", nodeReq(k1, VerbCreate, "", nil, withLabel("disk", "ssd")), allowed},
		{"kubelet registers with a node.kubernetes.io label", nodeReq(k1, VerbCreate, "", nil, withLabel("node.kubernetes.io/pool", "a")), allowed},
		{"kubelet may not register with a node-restriction label", nodeReq(k1, VerbCreate, "", nil, withLabel("node-restriction.kubernetes.io/trusted", "true")), refusedBy(RuleNodeRestriction)},
		{"kubelet may not register with a node-role label", nodeReq(k1, VerbCreate, "", nil, withLabel("node-role.kubernetes.io/control-plane", "")), refusedBy(RuleNodeRestriction)},
		{"kubelet may not register another node", nodeReq(k2, VerbCreate, "", nil, base), refusedBy(RuleHeartbeat)},
		{"kubelet updates its node keeping taints and labels", nodeReq(k1, VerbUpdate, "", tainted, tainted), allowed},
		{"kubelet changes its zone label", nodeReq(k1, VerbUpdate, "", base, withLabel(corev1.LabelTopologyZone, "zone-b")), allowed},
		{"kubelet may not remove the unreachable taint", nodeReq(k1, VerbUpdate, "", tainted, base), refusedBy(RuleNodeRestriction)},
		{"kubelet may not add a taint", nodeReq(k1, VerbPatch, "", base, tainted), refusedBy(RuleNodeRestriction)},
		{"kubelet may not change its node's ownerReferences", nodeReq(k1, VerbUpdate, "", base, ownedNode), refusedBy(RuleNodeRestriction)},
		{"kubelet may not add a node-restriction label", nodeReq(k1, VerbPatch, "", base, withLabel("node-restriction.kubernetes.io/trusted", "true")), refusedBy(RuleNodeRestriction)},
		{"kubelet may not add an unknown kubernetes.io label", nodeReq(k1, VerbUpdate, "", base, withLabel("kubernetes.io/trusted", "true")), refusedBy(RuleNodeRestriction)},
		{"kubelet posts its node status", nodeReq(k1, VerbUpdate, subStatus, base, base), allowed},
		{"kubelet may not post another node's status", nodeReq(k2, VerbUpdate, subStatus, base, base), refusedBy(RuleHeartbeat)},
		{"kubelet may not delete its node", nodeReq(k1, VerbDelete, "", base, nil), refusedBy(RuleNodeDelete)},
		{"the node controller taints a node", nodeReq(IdentityNodeController, VerbUpdate, "", base, tainted), allowed},
		{"the node controller may not relabel a node", nodeReq(IdentityNodeController, VerbUpdate, "", base, withLabel("disk", "ssd")), refusedBy(RuleHeartbeat)},

		// Its Lease only.
		{"kubelet creates its lease", other(k1, VerbCreate, grLeases, "", KubeLeaseNamespace, "node-1", nil), allowed},
		{"kubelet renews its lease", other(k1, VerbUpdate, grLeases, "", KubeLeaseNamespace, "node-1", nil), allowed},
		{"kubelet may not renew another node's lease", other(k1, VerbUpdate, grLeases, "", KubeLeaseNamespace, "node-2", nil), refusedBy(RuleHeartbeat)},
		{"kubelet may not delete its lease", other(k1, VerbDelete, grLeases, "", KubeLeaseNamespace, "node-1", nil), refusedBy(RuleHeartbeat)},
		{"kubelet may not write a lease elsewhere", other(k1, VerbCreate, grLeases, "", "default", "x", nil), refusedBy(RuleNodeRestriction)},
		{"kubelet may not write the fence token", other(k1, VerbUpdate, grLeases, "", FenceTokenLeaseNamespace, FenceTokenLeaseName, nil), refusedBy(RuleFence)},

		// Nothing else.
		{"kubelet may not attach", other(k1, VerbCreate, grVolumeAttachments, "", "", "va", nil), refusedBy(RuleAttach)},
		{"kubelet may not detach", other(k1, VerbDelete, grVolumeAttachments, "", "", "va", nil), refusedBy(RuleAttach)},
		{"kubelet may not create a set", other(k1, VerbCreate, grStatefulSets, "", "default", "web", nil), refusedBy(RuleNodeRestriction)},
		{"kubelet may not scale a set", other(k1, VerbUpdate, grReplicaSets, subScale, "default", "web", nil), refusedBy(RuleNodeRestriction)},
		{"kubelet may not write a budget", other(k1, VerbCreate, grPDBs, "", "default", "b", nil), refusedBy(RuleNodeRestriction)},
		{"kubelet may not write a budget's status", other(k1, VerbUpdate, grPDBs, subStatus, "default", "b", nil), refusedBy(RuleNodeRestriction)},
		{"kubelet may not write a priority class", other(k1, VerbCreate, grPriorityClasses, "", "", "high", nil), refusedBy(RuleNodeRestriction)},
		{"kubelet may not delete a namespace", other(k1, VerbDelete, grNamespaces, "", "", "default", nil), refusedBy(RuleNodeRestriction)},
		{"kubelet records an event", other(k1, VerbCreate, grEvents, "", "default", "e", nil), allowed},
		{"kubelet counts a repeated event", other(k1, VerbPatch, grEvents, "", "default", "e", nil), allowed},
		{"kubelet may not delete events", other(k1, VerbDelete, grEvents, "", "default", "e", nil), refusedBy(RuleNodeRestriction)},
		{"kubelet reads pods", other(k1, VerbList, grPods, "", "", "", nil), allowed},
		{"kubelet reads nodes", other(k1, VerbWatch, grNodes, "", "", "", nil), allowed},
	})
}

// TestKubeletMaySetLabel pins the label namespaces of the node restriction.
func TestKubeletMaySetLabel(t *testing.T) {
	for key, want := range map[string]bool{
		"disk":                                  true,
		"example.com/rack":                      true,
		corev1.LabelHostname:                    true,
		corev1.LabelTopologyZone:                true,
		corev1.LabelArchStable:                  true,
		"kubelet.kubernetes.io/x":               true,
		"pool.node.kubernetes.io/x":             true,
		"node-restriction.kubernetes.io/a":      false,
		"x.node-restriction.kubernetes.io/a":    false,
		"node-role.kubernetes.io/control-plane": false,
		"kubernetes.io/trusted":                 false,
		"example.k8s.io/x":                      false,
	} {
		if got := kubeletMaySetLabel(key); got != want {
			t.Errorf("kubeletMaySetLabel(%q) = %v, want %v", key, got, want)
		}
	}
}

// TestFenceRecord checks that no field of a fence record can be changed by
// anyone but the fencing controller and admin, on the object or through
// status, and that a node cannot be registered already fenced.
func TestFenceRecord(t *testing.T) {
	at := metav1.NewTime(testStart)
	fenced := makeNode("node-1").condition(corev1.NodeReady, corev1.ConditionUnknown).obj()
	fenced.Status.Conditions = append(fenced.Status.Conditions, corev1.NodeCondition{Type: FencedCondition, Status: corev1.ConditionTrue,
		Reason: "Fenced", Message: "fence token 3 confirmed by power", LastHeartbeatTime: at, LastTransitionTime: at})
	fenced.Spec.Unschedulable = true
	fenced.Spec.Taints = []corev1.Taint{{Key: FencedTaint, Effect: corev1.TaintEffectNoExecute, TimeAdded: &at}}
	fenced.Annotations = map[string]string{FenceTokenAnnotation: "3", FenceRequestAnnotation: ""}

	change := func(f func(n *corev1.Node)) *corev1.Node {
		n := fenced.DeepCopy()
		f(n)
		return n
	}
	cond := func(n *corev1.Node) *corev1.NodeCondition { return nodeCondition(n, FencedCondition) }
	later := metav1.NewTime(testStart.Add(1e9))
	specChanges := map[string]*corev1.Node{
		"taint effect PreferNoSchedule": change(func(n *corev1.Node) { n.Spec.Taints[0].Effect = corev1.TaintEffectPreferNoSchedule }),
		"taint effect NoSchedule":       change(func(n *corev1.Node) { n.Spec.Taints[0].Effect = corev1.TaintEffectNoSchedule }),
		"taint value":                   change(func(n *corev1.Node) { n.Spec.Taints[0].Value = "no" }),
		"taint timeAdded":               change(func(n *corev1.Node) { n.Spec.Taints[0].TimeAdded = &later }),
		"taint removed":                 change(func(n *corev1.Node) { n.Spec.Taints = nil }),
		"taint doubled":                 change(func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, n.Spec.Taints[0]) }),
		"token changed":                 change(func(n *corev1.Node) { n.Annotations[FenceTokenAnnotation] = "2" }),
		"token removed":                 change(func(n *corev1.Node) { delete(n.Annotations, FenceTokenAnnotation) }),
		"fence request removed":         change(func(n *corev1.Node) { delete(n.Annotations, FenceRequestAnnotation) }),
		"uncordoned":                    change(func(n *corev1.Node) { n.Spec.Unschedulable = false }),
	}
	statusChanges := map[string]*corev1.Node{
		"condition status":             change(func(n *corev1.Node) { cond(n).Status = corev1.ConditionFalse }),
		"condition reason":             change(func(n *corev1.Node) { cond(n).Reason = "Whatever" }),
		"condition message":            change(func(n *corev1.Node) { cond(n).Message = "fence token 1 confirmed by power" }),
		"condition lastTransitionTime": change(func(n *corev1.Node) { cond(n).LastTransitionTime = later }),
		"condition lastHeartbeatTime":  change(func(n *corev1.Node) { cond(n).LastHeartbeatTime = later }),
		"condition removed":            change(func(n *corev1.Node) { n.Status.Conditions = n.Status.Conditions[:1] }),
	}
	var cases []authorityCaseTable
	add := func(what, sub string, upd *corev1.Node) {
		for _, id := range []string{KubeletIdentity("node-1"), IdentityNodeController} {
			cases = append(cases, authorityCaseTable{id + " may not change the " + what,
				Request{Identity: id, Verb: VerbUpdate, Resource: grNodes, Subresource: sub, Name: "node-1", Old: fenced, Object: upd}, Decision{Rule: RuleFence}})
		}
		for _, id := range []string{IdentityFencingController, IdentityAdmin} {
			cases = append(cases, authorityCaseTable{id + " changes the " + what,
				Request{Identity: id, Verb: VerbPatch, Resource: grNodes, Subresource: sub, Name: "node-1", Old: fenced, Object: upd}, Decision{Allowed: true}})
		}
	}
	for what, upd := range specChanges {
		add(what, "", upd)
	}
	for what, upd := range statusChanges {
		add(what, subStatus, upd)
	}
	heartbeat := change(func(n *corev1.Node) { n.Status.Conditions[0].LastHeartbeatTime = later })
	tainted := change(func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoExecute})
	})
	bornFenced := fenced.DeepCopy()
	bornFenced.Spec.Taints = nil
	bornFenced.Annotations = nil
	cases = append(cases,
		authorityCaseTable{"kubelet posts status of a fenced node keeping its record",
			Request{Identity: KubeletIdentity("node-1"), Verb: VerbUpdate, Resource: grNodes, Subresource: subStatus, Name: "node-1", Old: fenced, Object: heartbeat}, Decision{Allowed: true}},
		authorityCaseTable{"node controller taints a fenced node keeping its record",
			Request{Identity: IdentityNodeController, Verb: VerbUpdate, Resource: grNodes, Name: "node-1", Old: fenced, Object: tainted}, Decision{Allowed: true}},
		authorityCaseTable{"kubelet may not register its node already fenced",
			Request{Identity: KubeletIdentity("node-1"), Verb: VerbCreate, Resource: grNodes, Object: bornFenced}, Decision{Rule: RuleFence}},
		authorityCaseTable{"kubelet may not register its node with a fence taint",
			Request{Identity: KubeletIdentity("node-1"), Verb: VerbCreate, Resource: grNodes, Object: makeNodeWithTaints("node-1", fenced.Spec.Taints)}, Decision{Rule: RuleFence}},
		authorityCaseTable{"admin registers a fenced node",
			Request{Identity: IdentityAdmin, Verb: VerbCreate, Resource: grNodes, Object: fenced}, Decision{Allowed: true}},
	)
	checkAuthorize(t, cases)
}

func makeNodeWithTaints(name string, taints []corev1.Taint) *corev1.Node {
	n := makeNode(name).obj()
	n.Spec.Taints = taints
	return n
}
