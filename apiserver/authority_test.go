package apiserver

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func int64p(v int64) *int64 { return &v }

// TestAuthorize checks every rule with at least one allowed and one refused
// request.
func TestAuthorize(t *testing.T) {
	bound := makePod("p").node("node-1").phase(corev1.PodRunning).obj()
	unbound := makePod("p").obj()
	succeeded := makePod("p").node("node-1").phase(corev1.PodSucceeded).obj()
	failed := makePod("p").node("node-1").phase(corev1.PodFailed).obj()
	terminating := makePod("p").node("node-1").phase(corev1.PodRunning).terminating(testStart, 30).obj()
	readyNode := makeNode("node-1").condition(corev1.NodeReady, corev1.ConditionTrue).obj()
	lostNode := makeNode("node-1").condition(corev1.NodeReady, corev1.ConditionUnknown).obj()
	fencedNode := makeNode("node-1").condition(corev1.NodeReady, corev1.ConditionUnknown).condition(FencedCondition, corev1.ConditionTrue).obj()
	fencedRecord := fencedNode.DeepCopy()
	fencedRecord.Spec.Unschedulable = true
	fencedRecord.Spec.Taints = []corev1.Taint{{Key: FencedTaint, Effect: corev1.TaintEffectNoExecute}}
	fencedRecord.Annotations = map[string]string{FenceTokenAnnotation: "3"}
	uncordoned := fencedRecord.DeepCopy()
	uncordoned.Spec.Unschedulable = false
	tokenless := fencedRecord.DeepCopy()
	tokenless.Annotations = nil
	unfencedNode := makeNode("node-1").condition(corev1.NodeReady, corev1.ConditionUnknown).condition(FencedCondition, corev1.ConditionFalse).obj()

	// deletion is a pod DELETE asking for grace at testStart + 5 s, with the
	// grace the server hands Authorize (GracefulDelete's, 0 for at once).
	deletion := func(id string, pod *corev1.Pod, grace *int64, node *corev1.Node) Request {
		upd, outcome := GracefulDelete(pod, grace, testStart.Add(5*time.Second))
		return Request{Identity: id, Verb: VerbDelete, Resource: grPods, Namespace: "default", Name: "p",
			Old: pod, GracePeriodSeconds: int64p(leftGrace(upd, outcome)), Node: node}
	}
	forceDelete := func(id string, pod *corev1.Pod, node *corev1.Node) Request {
		return deletion(id, pod, int64p(0), node)
	}
	gracefulDelete := func(id string, pod *corev1.Pod) Request {
		return deletion(id, pod, nil, nil)
	}
	terminatingSpec0 := makePod("p").node("node-1").grace(0).phase(corev1.PodRunning).terminating(testStart.Add(20*time.Second), 20).obj()
	turnedSucceeded := makePod("p").node("node-1").phase(corev1.PodSucceeded).terminating(testStart.Add(30*time.Second), 30).obj()
	withStatus := func(p *corev1.Pod, change func(*corev1.PodStatus)) *corev1.Pod {
		p = p.DeepCopy()
		change(&p.Status)
		return p
	}
	statusWrite := func(id string, old, upd *corev1.Pod, node *corev1.Node) Request {
		return Request{Identity: id, Verb: VerbUpdate, Resource: grPods, Subresource: subStatus,
			Namespace: "default", Name: "p", Old: old, Object: upd, Node: node}
	}
	setCondition := func(s *corev1.PodStatus) {
		s.Conditions = append(s.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse})
	}
	nodeWrite := func(id, verb string, old, upd *corev1.Node) Request {
		return Request{Identity: id, Verb: verb, Resource: grNodes, Name: "node-1", Old: old, Object: upd}
	}
	leaseWrite := func(id, ns, name string) Request {
		return Request{Identity: id, Verb: VerbUpdate, Resource: grLeases, Namespace: ns, Name: name}
	}
	va := func(node string) *storagev1.VolumeAttachment {
		return &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: "default.data-web-0"},
			Spec: storagev1.VolumeAttachmentSpec{NodeName: node, Attacher: "podsafe.io/storage"}}
	}
	vaWrite := func(id, verb string, old, upd *storagev1.VolumeAttachment, node *corev1.Node) Request {
		r := Request{Identity: id, Verb: verb, Resource: grVolumeAttachments, Name: "default.data-web-0", Node: node}
		if old != nil {
			r.Old = old
		}
		if upd != nil {
			r.Object = upd
		}
		return r
	}
	kubelet1, kubelet2 := KubeletIdentity("node-1"), KubeletIdentity("node-2")
	allowed := Decision{Allowed: true}
	refusedBy := func(rule string) Decision { return Decision{Rule: rule} }

	tests := []struct {
		name string
		req  Request
		want Decision
	}{
		// PS-8/PS-9/PS-10/PS-14: force deletion of a bound, running pod.
		{"PS-8 own kubelet force deletes", forceDelete(kubelet1, bound, readyNode), allowed},
		{"PS-8 own kubelet finishes a terminating pod", forceDelete(kubelet1, terminating, readyNode), allowed},
		{"PS-9 other kubelet may not force delete", forceDelete(kubelet2, terminating, readyNode), refusedBy(RuleForceDelete)},
		{"PS-16 admin force deletes", forceDelete(IdentityAdmin, bound, readyNode), allowed},
		{"PS-9 node controller may not force delete", forceDelete(IdentityNodeController, bound, lostNode), refusedBy(RuleForceDelete)},
		{"PS-9 pet controller may not force delete", forceDelete(IdentityPetController, terminating, lostNode), refusedBy(RuleForceDelete)},
		{"PS-9 replicaset controller may not force delete", forceDelete(IdentityReplicaSetController, bound, lostNode), refusedBy(RuleForceDelete)},
		{"PS-9 scheduler may not force delete", forceDelete(IdentityScheduler, bound, readyNode), refusedBy(RuleForceDelete)},
		{"PS-9 workload may not force delete", forceDelete(IdentityWorkload, bound, readyNode), refusedBy(RuleForceDelete)},
		{"PS-10 pod GC force deletes when the node is gone", forceDelete(IdentityPodGC, bound, nil), allowed},
		{"PS-10 pod GC may not force delete while the node exists", forceDelete(IdentityPodGC, bound, lostNode), refusedBy(RuleForceDelete)},
		{"PS-14 fencing controller force deletes on a fenced node", forceDelete(IdentityFencingController, bound, fencedNode), allowed},
		{"PS-14 fencing controller may not force delete before the fence is confirmed", forceDelete(IdentityFencingController, bound, unfencedNode), refusedBy(RuleForceDelete)},
		{"PS-14 fencing controller may not force delete without a fence condition", forceDelete(IdentityFencingController, bound, lostNode), refusedBy(RuleForceDelete)},
		{"PS-9 controllers delete gracefully", gracefulDelete(IdentityNodeController, bound), allowed},
		{"GP-6 unscheduled pod is not a force deletion", forceDelete(IdentityWorkload, unbound, nil), allowed},
		{"GP-6 succeeded pod is not a force deletion", forceDelete(IdentityReplicaSetController, succeeded, readyNode), allowed},
		{"GP-6 failed pod is not a force deletion", forceDelete(IdentityNodeController, failed, readyNode), allowed},
		{"PS-9 a second DELETE shortening to 0 is a force deletion", forceDelete(IdentityNodeController, terminating, lostNode), refusedBy(RuleForceDelete)},
		{"PS-14 fencing controller finishes a terminating pod on a fenced node", forceDelete(IdentityFencingController, terminating, fencedNode), allowed},
		{"PS-9 a second DELETE without a grace is pending, not a force deletion, though the spec's grace is 0", gracefulDelete(IdentityWorkload, terminatingSpec0), allowed},
		{"PS-9 a second DELETE with a shorter grace is graceful", deletion(IdentityPetController, terminating, int64p(1), lostNode), allowed},
		{"PS-9 a second DELETE shortening an overrun deadline is graceful (grace 1)", deletion(IdentityNodeController, makePod("p").node("node-1").phase(corev1.PodRunning).terminating(testStart.Add(2*time.Second), 2).obj(), int64p(1), lostNode), allowed},
		{"GP-6 a second DELETE of a pod turned succeeded is pending", gracefulDelete(IdentityReplicaSetController, turnedSucceeded), allowed},
		{"GP-6 a second DELETE with grace 0 of a pod turned succeeded is not a force deletion", forceDelete(IdentityReplicaSetController, turnedSucceeded, readyNode), allowed},
		{"PS-9 eviction with grace 0 is a force deletion", func() Request {
			r := forceDelete(IdentityWorkload, bound, readyNode)
			r.Verb, r.Subresource = VerbCreate, subEviction
			return r
		}(), refusedBy(RuleForceDelete)},

		// LC-3: binding and pre-bound pods.
		{"LC-3 scheduler binds", Request{Identity: IdentityScheduler, Verb: VerbCreate, Resource: grPods, Subresource: subBinding, Name: "p", Old: unbound}, allowed},
		{"LC-3 workload may not bind", Request{Identity: IdentityWorkload, Verb: VerbCreate, Resource: grPods, Subresource: subBinding, Name: "p", Old: unbound}, refusedBy(RuleBind)},
		{"LC-3 kubelet may not bind", Request{Identity: kubelet1, Verb: VerbCreate, Resource: grPods, Subresource: subBinding, Name: "p"}, refusedBy(RuleBind)},
		{"LC-3 admin creates a bound pod", Request{Identity: IdentityAdmin, Verb: VerbCreate, Resource: grPods, Object: bound}, allowed},
		{"LC-3 workload may not create a bound pod", Request{Identity: IdentityWorkload, Verb: VerbCreate, Resource: grPods, Object: bound}, refusedBy(RuleBind)},
		{"LC-3 workload creates an unbound pod", Request{Identity: IdentityWorkload, Verb: VerbCreate, Resource: grPods, Object: unbound}, allowed},

		// LC-2: pod status.
		{"LC-2 own kubelet writes status", statusWrite(kubelet1, bound, withStatus(bound, func(s *corev1.PodStatus) { s.Phase = corev1.PodSucceeded }), nil), allowed},
		{"LC-2 other kubelet may not write status", statusWrite(kubelet2, bound, withStatus(bound, setCondition), nil), refusedBy(RulePodStatus)},
		{"LC-2 kubelet may not write status of an unbound pod", statusWrite(kubelet1, unbound, withStatus(unbound, setCondition), nil), refusedBy(RulePodStatus)},
		{"LC-2 scheduler writes conditions and nominatedNodeName", statusWrite(IdentityScheduler, unbound, withStatus(unbound, func(s *corev1.PodStatus) {
			setCondition(s)
			s.NominatedNodeName = "node-2"
		}), nil), allowed},
		{"LC-2 scheduler may not write the phase", statusWrite(IdentityScheduler, unbound, withStatus(unbound, func(s *corev1.PodStatus) { s.Phase = corev1.PodRunning }), nil), refusedBy(RulePodStatus)},
		{"LC-4 node controller fails a pod on a lost node", statusWrite(IdentityNodeController, bound, withStatus(bound, func(s *corev1.PodStatus) {
			s.Phase, s.Reason = corev1.PodFailed, "NodeLost"
			setCondition(s)
		}), lostNode), allowed},
		{"LC-4 node controller writes status of a pod whose node is gone", statusWrite(IdentityNodeController, bound, withStatus(bound, setCondition), nil), allowed},
		{"LC-2 node controller may not write status on a Ready node", statusWrite(IdentityNodeController, bound, withStatus(bound, setCondition), readyNode), refusedBy(RulePodStatus)},
		{"LC-2 node controller may not write podIP", statusWrite(IdentityNodeController, bound, withStatus(bound, func(s *corev1.PodStatus) { s.PodIP = "10.0.0.1" }), lostNode), refusedBy(RulePodStatus)},
		{"LC-2 workload may not write status", statusWrite(IdentityWorkload, bound, withStatus(bound, setCondition), nil), refusedBy(RulePodStatus)},
		{"LC-2 admin writes status", statusWrite(IdentityAdmin, bound, withStatus(bound, setCondition), nil), allowed},

		// PS-13, PS-14, PS-10: nodes.
		{"PS-13 kubelet registers its own node", nodeWrite(kubelet1, VerbCreate, nil, readyNode), allowed},
		{"PS-13 kubelet may not register another node", Request{Identity: kubelet2, Verb: VerbCreate, Resource: grNodes, Object: readyNode}, refusedBy(RuleHeartbeat)},
		{"PS-13 kubelet updates its own node", nodeWrite(kubelet1, VerbUpdate, readyNode, lostNode), allowed},
		{"PS-13 kubelet may not update another node", nodeWrite(kubelet2, VerbPatch, readyNode, lostNode), refusedBy(RuleHeartbeat)},
		{"PS-13 node controller updates a node", nodeWrite(IdentityNodeController, VerbUpdate, readyNode, lostNode), allowed},
		{"PS-13 node controller may not create a node", nodeWrite(IdentityNodeController, VerbCreate, nil, readyNode), refusedBy(RuleHeartbeat)},
		{"PS-13 workload may not update a node", nodeWrite(IdentityWorkload, VerbUpdate, readyNode, lostNode), refusedBy(RuleHeartbeat)},
		{"PS-14 fencing controller sets the fence", nodeWrite(IdentityFencingController, VerbUpdate, lostNode, fencedNode), allowed},
		{"PS-14 kubelet may not clear its fence", nodeWrite(kubelet1, VerbUpdate, fencedNode, lostNode), refusedBy(RuleFence)},
		{"PS-14 node controller may not set a fence", nodeWrite(IdentityNodeController, VerbUpdate, lostNode, fencedNode), refusedBy(RuleFence)},
		{"PS-14 kubelet update keeping the fence", nodeWrite(kubelet1, VerbUpdate, fencedNode, fencedNode), allowed},
		{"PS-14 kubelet may not remove the fence taint", nodeWrite(kubelet1, VerbUpdate, fencedRecord, fencedNode), refusedBy(RuleFence)},
		{"PS-14 kubelet may not uncordon a fenced node", nodeWrite(kubelet1, VerbUpdate, fencedRecord, uncordoned), refusedBy(RuleFence)},
		{"PS-14 node controller may not drop the fence token", nodeWrite(IdentityNodeController, VerbUpdate, fencedRecord, tokenless), refusedBy(RuleFence)},
		{"PS-14 kubelet status keeping the fence record", nodeWrite(kubelet1, VerbUpdate, fencedRecord, fencedRecord), allowed},
		{"PS-14 fencing controller lifts its fence record", nodeWrite(IdentityFencingController, VerbUpdate, fencedRecord, fencedNode), allowed},
		{"PS-14 kubelet updates an unfenced node", nodeWrite(kubelet1, VerbUpdate, readyNode, readyNode), allowed},
		{"PS-10 admin deletes a node", nodeWrite(IdentityAdmin, VerbDelete, readyNode, nil), allowed},
		{"PS-10 node controller may not delete a node", nodeWrite(IdentityNodeController, VerbDelete, readyNode, nil), refusedBy(RuleNodeDelete)},
		{"PS-10 kubelet may not delete its node", nodeWrite(kubelet1, VerbDelete, readyNode, nil), refusedBy(RuleNodeDelete)},

		// PS-13: node leases.
		{"PS-13 kubelet renews its own lease", leaseWrite(kubelet1, KubeLeaseNamespace, "node-1"), allowed},
		{"PS-13 kubelet may not renew another node's lease", leaseWrite(kubelet1, KubeLeaseNamespace, "node-2"), refusedBy(RuleHeartbeat)},
		{"PS-13 node controller may not write a node lease", leaseWrite(IdentityNodeController, KubeLeaseNamespace, "node-1"), refusedBy(RuleHeartbeat)},
		{"PS-13 admin writes a node lease", leaseWrite(IdentityAdmin, KubeLeaseNamespace, "node-1"), allowed},
		{"the workload writes its own leases", leaseWrite(IdentityWorkload, "default", "register-0"), allowed},
		{"the scheduler writes no lease", leaseWrite(IdentityScheduler, "kube-system", "scheduler"), refusedBy(RuleHeartbeat)},
		{"PS-14 fencing controller writes the fence token", leaseWrite(IdentityFencingController, FenceTokenLeaseNamespace, FenceTokenLeaseName), allowed},
		{"PS-14 fencing controller writes no other lease", leaseWrite(IdentityFencingController, FenceTokenLeaseNamespace, "other"), refusedBy(RuleHeartbeat)},
		{"PS-14 the workload may not write the fence token", leaseWrite(IdentityWorkload, FenceTokenLeaseNamespace, FenceTokenLeaseName), refusedBy(RuleFence)},
		{"PS-14 admin writes the fence token", leaseWrite(IdentityAdmin, FenceTokenLeaseNamespace, FenceTokenLeaseName), allowed},

		// PS-15: RWO volume attachments.
		{"PS-15 attach/detach controller attaches", vaWrite(IdentityAttachDetachController, VerbCreate, nil, va("node-1"), nil), allowed},
		{"PS-15 admin attaches", vaWrite(IdentityAdmin, VerbCreate, nil, va("node-1"), nil), allowed},
		{"PS-15 kubelet may not attach", vaWrite(kubelet1, VerbCreate, nil, va("node-1"), nil), refusedBy(RuleAttach)},
		{"PS-15 pet controller may not attach", vaWrite(IdentityPetController, VerbCreate, nil, va("node-1"), nil), refusedBy(RuleAttach)},
		{"PS-15 attach/detach controller marks attached", vaWrite(IdentityAttachDetachController, VerbUpdate, va("node-1"), va("node-1"), nil), allowed},
		{"PS-15 an attachment never moves", vaWrite(IdentityAttachDetachController, VerbUpdate, va("node-1"), va("node-2"), nil), refusedBy(RuleAttach)},
		{"PS-15 admin cannot move an attachment either", vaWrite(IdentityAdmin, VerbPatch, va("node-1"), va("node-2"), nil), refusedBy(RuleAttach)},
		{"PS-15 attach/detach controller detaches", vaWrite(IdentityAttachDetachController, VerbDelete, va("node-1"), nil, readyNode), allowed},
		{"PS-15 fencing controller breaks the attachment of a fenced node", vaWrite(IdentityFencingController, VerbDelete, va("node-1"), nil, fencedNode), allowed},
		{"PS-15 fencing controller may not break it before the fence", vaWrite(IdentityFencingController, VerbDelete, va("node-1"), nil, unfencedNode), refusedBy(RuleAttach)},
		{"PS-15 fencing controller may not break it on a lost node", vaWrite(IdentityFencingController, VerbDelete, va("node-1"), nil, lostNode), refusedBy(RuleAttach)},
		{"PS-15 kubelet may not detach", vaWrite(kubelet2, VerbDelete, va("node-1"), nil, readyNode), refusedBy(RuleAttach)},
		{"PS-15 node controller may not detach", vaWrite(IdentityNodeController, VerbDelete, va("node-1"), nil, lostNode), refusedBy(RuleAttach)},

		// Everything else.
		{"reads are anyone's", Request{Identity: IdentityWorkload, Verb: VerbList, Resource: grNodes}, allowed},
		{"the workload deletes its sets", Request{Identity: IdentityWorkload, Verb: VerbDelete,
			Resource: schema.GroupResource{Group: "apps", Resource: "statefulsets"}, Name: "s"}, allowed},
		{"PS-11 the pod GC may not delete a set", Request{Identity: IdentityPodGC, Verb: VerbDelete,
			Resource: schema.GroupResource{Group: "apps", Resource: "statefulsets"}, Name: "s"}, refusedBy(RulePetSet)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Authorize(tt.req)
			if diff := cmp.Diff(tt.want, Decision{Allowed: got.Allowed, Rule: got.Rule}); diff != "" {
				t.Errorf("Authorize (-want +got):\n%s\nreason: %s", diff, got.Reason)
			}
			if !got.Allowed && !strings.HasPrefix(got.Reason, got.Rule+": ") {
				t.Errorf("reason %q does not start with its rule %s", got.Reason, got.Rule)
			}
		})
	}
}

// TestAuthorizeForceDeleteMessage pins the wording a refused force deletion
// reports, which people read in 403 answers.
func TestAuthorizeForceDeleteMessage(t *testing.T) {
	pod := makePod("p").node("node-1").phase(corev1.PodRunning).obj()
	got := Authorize(Request{Identity: IdentityNodeController, Verb: VerbDelete, Resource: grPods,
		Namespace: "default", Name: "p", Old: pod, GracePeriodSeconds: int64p(0)})
	want := "PS-9: node-controller may not force delete pod default/p (bound to node-1, not terminated); controllers only delete gracefully"
	if got.Reason != want {
		t.Errorf("reason:\n got %q\nwant %q", got.Reason, want)
	}
}

// TestEffectiveGracePeriod checks GP-6.
func TestEffectiveGracePeriod(t *testing.T) {
	tests := []struct {
		name      string
		pod       *corev1.Pod
		requested *int64
		want      int64
	}{
		{"default 30", makePod("p").node("n").obj(), nil, 30},
		{"spec value", makePod("p").node("n").grace(45).obj(), nil, 45},
		{"request wins", makePod("p").node("n").grace(45).obj(), int64p(5), 5},
		{"request 0", makePod("p").node("n").grace(45).obj(), int64p(0), 0},
		{"negative request becomes 1", makePod("p").node("n").obj(), int64p(-3), 1},
		{"negative spec becomes 1", makePod("p").node("n").grace(-1).obj(), nil, 1},
		{"unscheduled at once", makePod("p").grace(45).obj(), int64p(10), 0},
		{"succeeded at once", makePod("p").node("n").phase(corev1.PodSucceeded).obj(), nil, 0},
		{"failed at once", makePod("p").node("n").phase(corev1.PodFailed).obj(), int64p(10), 0},
		{"running keeps grace", makePod("p").node("n").phase(corev1.PodRunning).obj(), nil, 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := EffectiveGracePeriod(tt.pod, tt.requested); got != tt.want {
				t.Errorf("EffectiveGracePeriod = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestWriteTable checks the write table both ways: every identity may make
// each write of its row, and a write of its component's resources outside
// its row is refused naming the rule of the record it would change.
func TestWriteTable(t *testing.T) {
	for id, grants := range writeGrants {
		for _, g := range grants {
			for _, verb := range g.Verbs {
				req := Request{Identity: id, Verb: verb, Resource: g.Resource, Subresource: g.Subresource, Namespace: g.Namespace, Name: g.Name}
				if !granted(req) {
					t.Errorf("%s: %s %s not granted though its row lists it", id, verb, g)
				}
			}
		}
	}
	if _, all := GrantsOf(IdentityAdmin); !all {
		t.Errorf("admin may not make every write")
	}
	if grants, all := GrantsOf("intruder"); all || len(grants) > 0 {
		t.Errorf("an unknown identity has grants %v", grants)
	}

	w := func(id, verb string, gr schema.GroupResource, sub, ns, name string) Request {
		return Request{Identity: id, Verb: verb, Resource: gr, Subresource: sub, Namespace: ns, Name: name}
	}
	allowed := Decision{Allowed: true}
	refusedBy := func(rule string) Decision { return Decision{Rule: rule} }
	unbound := makePod("p").obj()
	checkAuthorize(t, []authorityCaseTable{
		{"scheduler binds", w(IdentityScheduler, VerbCreate, grPods, subBinding, "default", "p"), allowed},
		{"scheduler records an event", w(IdentityScheduler, VerbCreate, grEvents, "", "default", "e"), allowed},
		{"scheduler counts a repeated event", w(IdentityScheduler, VerbPatch, grEvents, "", "default", "e"), allowed},
		{"scheduler may not delete an event", w(IdentityScheduler, VerbDelete, grEvents, "", "default", "e"), refusedBy(RuleEvent)},
		{"node controller records an event", w(IdentityNodeController, VerbCreate, grEvents, "", "default", "e"), allowed},
		{"pet controller records an event", w(IdentityPetController, VerbPatch, grEvents, "", "default", "e"), allowed},
		{"replicaset controller records an event", w(IdentityReplicaSetController, VerbCreate, grEvents, "", "default", "e"), allowed},
		{"pod GC may not record an event", w(IdentityPodGC, VerbCreate, grEvents, "", "default", "e"), refusedBy(RuleEvent)},
		{"disruption controller may not record an event", w(IdentityDisruptionController, VerbCreate, grEvents, "", "default", "e"), refusedBy(RuleEvent)},
		{"scheduler may not create a pod", Request{Identity: IdentityScheduler, Verb: VerbCreate, Resource: grPods, Namespace: "default", Object: unbound}, refusedBy(RulePodLifecycle)},
		{"scheduler may not update a pod", w(IdentityScheduler, VerbUpdate, grPods, "", "default", "p"), refusedBy(RulePodLifecycle)},
		{"scheduler may not evict", w(IdentityScheduler, VerbCreate, grPods, subEviction, "default", "p"), refusedBy(RulePodLifecycle)},
		{"node controller may not create a pod", w(IdentityNodeController, VerbCreate, grPods, "", "default", "p"), refusedBy(RulePodLifecycle)},
		{"node controller may not write a lease", w(IdentityNodeController, VerbUpdate, grLeases, "", "default", "l"), refusedBy(RuleHeartbeat)},
		{"pod GC may not write status", w(IdentityPodGC, VerbUpdate, grPods, subStatus, "default", "p"), refusedBy(RulePodStatus)},
		{"pod GC may not update a node", w(IdentityPodGC, VerbUpdate, grNodes, "", "", "node-1"), refusedBy(RuleHeartbeat)},
		{"pet controller creates a pet", Request{Identity: IdentityPetController, Verb: VerbCreate, Resource: grPods, Namespace: "default", Object: unbound}, allowed},
		{"pet controller writes its set's status", w(IdentityPetController, VerbUpdate, grStatefulSets, subStatus, "default", "web"), allowed},
		{"pet controller may not update a pet", w(IdentityPetController, VerbPatch, grPods, "", "default", "web-0"), refusedBy(RulePodLifecycle)},
		{"pet controller may not scale its set", w(IdentityPetController, VerbUpdate, grStatefulSets, subScale, "default", "web"), refusedBy(RulePetSet)},
		{"pet controller may not write a ReplicaSet's status", w(IdentityPetController, VerbUpdate, grReplicaSets, subStatus, "default", "rs"), refusedBy(RuleReplicaSet)},
		{"replicaset controller writes its set's status", w(IdentityReplicaSetController, VerbPatch, grReplicaSets, subStatus, "default", "rs"), allowed},
		{"replicaset controller may not delete its set", w(IdentityReplicaSetController, VerbDelete, grReplicaSets, "", "default", "rs"), refusedBy(RuleReplicaSet)},
		{"disruption controller writes budget status", w(IdentityDisruptionController, VerbUpdate, grPDBs, subStatus, "default", "b"), allowed},
		{"disruption controller may not change a budget", w(IdentityDisruptionController, VerbUpdate, grPDBs, "", "default", "b"), refusedBy(RuleDisruptionBudget)},
		{"disruption controller may not evict", w(IdentityDisruptionController, VerbCreate, grPods, subEviction, "default", "p"), refusedBy(RulePodLifecycle)},
		{"attach/detach controller may not delete a pod", w(IdentityAttachDetachController, VerbDelete, grPods, "", "default", "p"), refusedBy(RulePodLifecycle)},
		{"fencing controller records an event", w(IdentityFencingController, VerbCreate, grEvents, "", "default", "e"), allowed},
		{"fencing controller may not create a pod", w(IdentityFencingController, VerbCreate, grPods, "", "default", "p"), refusedBy(RulePodLifecycle)},
		{"fencing controller may not write pod status", w(IdentityFencingController, VerbUpdate, grPods, subStatus, "default", "p"), refusedBy(RulePodStatus)},
		{"fencing controller may not attach", w(IdentityFencingController, VerbCreate, grVolumeAttachments, "", "", "va"), refusedBy(RuleAttach)},
		{"workload creates a priority class", w(IdentityWorkload, VerbCreate, grPriorityClasses, "", "", "high"), allowed},
		{"workload creates a namespace", w(IdentityWorkload, VerbCreate, grNamespaces, "", "", "ns"), allowed},
		{"workload creates a budget", w(IdentityWorkload, VerbCreate, grPDBs, "", "default", "b"), allowed},
		{"workload scales a set", w(IdentityWorkload, VerbUpdate, grStatefulSets, subScale, "default", "web"), allowed},
		{"workload evicts a pod", Request{Identity: IdentityWorkload, Verb: VerbCreate, Resource: grPods, Subresource: subEviction, Namespace: "default", Name: "p",
			Old: makePod("p").node("node-1").phase(corev1.PodRunning).obj(), GracePeriodSeconds: int64p(30)}, allowed},
		{"workload may not write a budget's status", w(IdentityWorkload, VerbUpdate, grPDBs, subStatus, "default", "b"), refusedBy(RuleDisruptionBudget)},
		{"workload may not write a set's status", w(IdentityWorkload, VerbUpdate, grStatefulSets, subStatus, "default", "web"), refusedBy(RulePetSet)},
		{"workload may not attach", w(IdentityWorkload, VerbCreate, grVolumeAttachments, "", "", "va"), refusedBy(RuleAttach)},
		{"workload may not register a node", w(IdentityWorkload, VerbCreate, grNodes, "", "", "node-9"), refusedBy(RuleHeartbeat)},
		{"an unknown identity may not create a pod", w("intruder", VerbCreate, grPods, "", "default", "p"), refusedBy(RulePodLifecycle)},
		{"an unknown identity reads", w("intruder", VerbGet, grPods, "", "default", "p"), allowed},
		{"admin writes a set's status", w(IdentityAdmin, VerbUpdate, grStatefulSets, subStatus, "default", "web"), allowed},
		{"admin writes a budget's status", w(IdentityAdmin, VerbUpdate, grPDBs, subStatus, "default", "b"), allowed},
	})
}

// TestResourceRules checks that every served resource names the rule its
// ungranted writes are refused under, and that every identity the server
// knows has a row (or is admin or a kubelet).
func TestResourceRules(t *testing.T) {
	for _, spec := range resourceTable {
		gr := schema.GroupResource{Group: spec.group, Resource: spec.resource}
		if _, ok := resourceRules[gr]; !ok {
			t.Errorf("resource %s has no rule in resourceRules", gr)
		}
	}
	for _, id := range []string{IdentityScheduler, IdentityNodeController, IdentityPodGC, IdentityPetController,
		IdentityReplicaSetController, IdentityFencingController, IdentityAttachDetachController, IdentityDisruptionController, IdentityWorkload} {
		if len(writeGrants[id]) == 0 {
			t.Errorf("identity %s has no row in the write table", id)
		}
	}
	for id := range writeGrants {
		if !KnownIdentity(id) {
			t.Errorf("write table row for unknown identity %q", id)
		}
	}
}
