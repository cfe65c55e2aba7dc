package apiserver

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// authorityCase is one request through the HTTP API: setup prepares the
// store as admin, do issues the request as the case's identity, and the
// answer must be allowed or a 403 naming the rule.
type authorityCase struct {
	name     string
	identity string
	setup    func(t *testing.T, e *testEnv)
	do       func(ctx context.Context, c kubernetes.Interface) error
	rule     string // "" when allowed
}

// runAuthorityCases runs each case on a fresh store (its Config adjusted
// by adjust) and checks the answer and, for refusals, that the store did
// not change.
func runAuthorityCases(t *testing.T, cases []authorityCase, adjust ...func(*Config)) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newTestEnv(t, adjust...)
			ctx := testCtx(t)
			if tc.setup != nil {
				tc.setup(t, e)
			}
			before := e.storeRevision()
			err := tc.do(ctx, e.client(tc.identity))
			if tc.rule == "" {
				if err != nil {
					t.Fatalf("as %s: %v, want allowed", tc.identity, err)
				}
				return
			}
			if !apierrors.IsForbidden(err) {
				t.Fatalf("as %s: %v, want 403 Forbidden", tc.identity, err)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.rule+": ") {
				t.Errorf("message %q does not name rule %s", msg, tc.rule)
			}
			if after := e.storeRevision(); after != before {
				t.Errorf("store revision moved from %d to %d on a refused request", before, after)
			}
		})
	}
}

func forceDeletePod(name string) func(context.Context, kubernetes.Interface) error {
	return func(ctx context.Context, c kubernetes.Interface) error {
		return c.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: int64p(0)})
	}
}

// seedRunning seeds a running pod p on node-1 and node-1 itself (Ready
// unless given conditions).
func seedRunning(conds ...corev1.NodeCondition) func(*testing.T, *testEnv) {
	return func(t *testing.T, e *testEnv) {
		node := makeNode("node-1").condition(corev1.NodeReady, corev1.ConditionTrue).obj()
		if len(conds) > 0 {
			node.Status.Conditions = conds
		}
		e.seedNode(node)
		e.seedPod(makePod("p").node("node-1").phase(corev1.PodRunning).obj())
	}
}

// TestAuthorityForceDeletion covers PS-8, PS-9, PS-10 and PS-14 through the
// API with each identity's own token.
func TestAuthorityForceDeletion(t *testing.T) {
	lost := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}
	fenced := corev1.NodeCondition{Type: FencedCondition, Status: corev1.ConditionTrue}
	terminatingOnNode1 := func(t *testing.T, e *testEnv) {
		seedRunning()(t, e)
		if err := e.client(IdentityWorkload).CoreV1().Pods("default").Delete(testCtx(t), "p", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	runAuthorityCases(t, []authorityCase{
		{name: "PS-8 own kubelet finishes deletion", identity: KubeletIdentity("node-1"), setup: terminatingOnNode1, do: forceDeletePod("p")},
		{name: "PS-8 other kubelet refused", identity: KubeletIdentity("node-2"), setup: terminatingOnNode1, do: forceDeletePod("p"), rule: RuleForceDelete},
		{name: "PS-9 node controller refused", identity: IdentityNodeController, setup: seedRunning(lost), do: forceDeletePod("p"), rule: RuleForceDelete},
		{name: "PS-9 node controller deletes gracefully", identity: IdentityNodeController, setup: seedRunning(lost),
			do: func(ctx context.Context, c kubernetes.Interface) error {
				return c.CoreV1().Pods("default").Delete(ctx, "p", metav1.DeleteOptions{})
			}},
		{name: "PS-9 pet controller refused", identity: IdentityPetController, setup: terminatingOnNode1, do: forceDeletePod("p"), rule: RuleForceDelete},
		{name: "PS-9 replicaset controller refused", identity: IdentityReplicaSetController, setup: seedRunning(), do: forceDeletePod("p"), rule: RuleForceDelete},
		{name: "PS-9 scheduler refused", identity: IdentityScheduler, setup: seedRunning(), do: forceDeletePod("p"), rule: RuleForceDelete},
		{name: "PS-9 workload refused", identity: IdentityWorkload, setup: seedRunning(), do: forceDeletePod("p"), rule: RuleForceDelete},
		{name: "PS-16 admin force deletes", identity: IdentityAdmin, setup: seedRunning(), do: forceDeletePod("p")},
		{name: "PS-10 pod GC refused while the node exists", identity: IdentityPodGC, setup: seedRunning(lost), do: forceDeletePod("p"), rule: RuleForceDelete},
		{name: "PS-10 pod GC force deletes once the node is gone", identity: IdentityPodGC,
			setup: func(t *testing.T, e *testEnv) {
				seedRunning(lost)(t, e)
				if err := e.client(IdentityAdmin).CoreV1().Nodes().Delete(testCtx(t), "node-1", metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}, do: forceDeletePod("p")},
		{name: "PS-14 fencing controller refused before the fence", identity: IdentityFencingController, setup: seedRunning(lost), do: forceDeletePod("p"), rule: RuleForceDelete},
		{name: "PS-14 fencing controller force deletes on a fenced node", identity: IdentityFencingController, setup: seedRunning(lost, fenced), do: forceDeletePod("p")},
		{name: "GP-6 anyone deletes an unscheduled pod with grace 0", identity: IdentityWorkload,
			setup: func(t *testing.T, e *testEnv) { e.seedPod(makePod("p").obj()) }, do: forceDeletePod("p")},
		{name: "PS-9 node controller may not finish a terminating pod with grace 0", identity: IdentityNodeController, setup: terminatingOnNode1, do: forceDeletePod("p"), rule: RuleForceDelete},
		{name: "PS-9 a second DELETE without a grace is pending though the spec's grace is 0", identity: IdentityWorkload,
			setup: func(t *testing.T, e *testEnv) {
				e.seedNode(makeNode("node-1").condition(corev1.NodeReady, corev1.ConditionTrue).obj())
				e.seedPod(makePod("p").node("node-1").grace(0).phase(corev1.PodRunning).obj())
				if err := e.client(IdentityWorkload).CoreV1().Pods("default").Delete(testCtx(t), "p", metav1.DeleteOptions{GracePeriodSeconds: int64p(20)}); err != nil {
					t.Fatal(err)
				}
			},
			do: func(ctx context.Context, c kubernetes.Interface) error {
				return c.CoreV1().Pods("default").Delete(ctx, "p", metav1.DeleteOptions{})
			}},
		{name: "GP-6 a second DELETE with grace 0 of a pod turned Succeeded is no force deletion", identity: IdentityReplicaSetController,
			setup: func(t *testing.T, e *testEnv) {
				terminatingOnNode1(t, e)
				e.setPhase("p", corev1.PodSucceeded)
			}, do: forceDeletePod("p")},
		{name: "PS-9 eviction with grace 0 refused before it uses the budget", identity: IdentityWorkload,
			setup: func(t *testing.T, e *testEnv) {
				seedRunning()(t, e)
				admin := e.client(IdentityAdmin)
				pdb, err := admin.PolicyV1().PodDisruptionBudgets("default").Create(testCtx(t), &policyv1.PodDisruptionBudget{
					ObjectMeta: metav1.ObjectMeta{Name: "all"},
					Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{}},
				}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				pdb.Status.DisruptionsAllowed = 1
				if _, err := admin.PolicyV1().PodDisruptionBudgets("default").UpdateStatus(testCtx(t), pdb, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			},
			do: func(ctx context.Context, c kubernetes.Interface) error {
				return c.CoreV1().Pods("default").EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"},
					DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: int64p(0)}})
			}, rule: RuleForceDelete},
	})
}

// TestAuthorityBindingAndStatus covers LC-3 (binding, pre-bound pods) and
// LC-2 (pod status).
func TestAuthorityBindingAndStatus(t *testing.T) {
	unbound := func(t *testing.T, e *testEnv) { e.seedPod(makePod("p").obj()) }
	bind := func(ctx context.Context, c kubernetes.Interface) error {
		return c.CoreV1().Pods("default").Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: "p"}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}, metav1.CreateOptions{})
	}
	createBound := func(ctx context.Context, c kubernetes.Interface) error {
		_, err := c.CoreV1().Pods("default").Create(ctx, makePod("q").node("node-1").obj(), metav1.CreateOptions{})
		return err
	}
	writeStatus := func(change func(*corev1.PodStatus)) func(context.Context, kubernetes.Interface) error {
		return func(ctx context.Context, c kubernetes.Interface) error {
			p, err := c.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{})
			if err != nil {
				return err
			}
			change(&p.Status)
			_, err = c.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{})
			return err
		}
	}
	running := func(s *corev1.PodStatus) { s.Phase = corev1.PodRunning }
	notReady := func(s *corev1.PodStatus) {
		s.Conditions = append(s.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "NodeDown"})
	}
	lost := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}
	runAuthorityCases(t, []authorityCase{
		{name: "LC-3 scheduler binds", identity: IdentityScheduler, setup: unbound, do: bind},
		{name: "LC-3 workload may not bind", identity: IdentityWorkload, setup: unbound, do: bind, rule: RuleBind},
		{name: "LC-3 admin creates a bound pod", identity: IdentityAdmin, do: createBound},
		{name: "LC-3 workload may not create a bound pod", identity: IdentityWorkload, do: createBound, rule: RuleBind},
		{name: "LC-2 own kubelet writes status", identity: KubeletIdentity("node-1"), setup: seedRunning(), do: writeStatus(running)},
		{name: "LC-2 other kubelet refused", identity: KubeletIdentity("node-2"), setup: seedRunning(), do: writeStatus(notReady), rule: RulePodStatus},
		{name: "LC-2 scheduler writes conditions", identity: IdentityScheduler, setup: unbound, do: writeStatus(notReady)},
		{name: "LC-2 scheduler may not write the phase", identity: IdentityScheduler, setup: unbound, do: writeStatus(running), rule: RulePodStatus},
		{name: "LC-4 node controller marks a pod on a lost node", identity: IdentityNodeController, setup: seedRunning(lost), do: writeStatus(notReady)},
		{name: "LC-2 node controller refused on a Ready node", identity: IdentityNodeController, setup: seedRunning(), do: writeStatus(notReady), rule: RulePodStatus},
		{name: "LC-2 workload may not write status", identity: IdentityWorkload, setup: seedRunning(), do: writeStatus(notReady), rule: RulePodStatus},
	})
}

// TestAuthorityNodesAndLeases covers PS-13 (nodes, node leases), PS-14 (the
// fence condition) and PS-10 (node deletion).
func TestAuthorityNodesAndLeases(t *testing.T) {
	createNode := func(name string) func(context.Context, kubernetes.Interface) error {
		return func(ctx context.Context, c kubernetes.Interface) error {
			_, err := c.CoreV1().Nodes().Create(ctx, makeNode(name).obj(), metav1.CreateOptions{})
			return err
		}
	}
	nodeStatus := func(change func(*corev1.Node)) func(context.Context, kubernetes.Interface) error {
		return func(ctx context.Context, c kubernetes.Interface) error {
			n, err := c.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
			if err != nil {
				return err
			}
			change(n)
			_, err = c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
			return err
		}
	}
	notReady := func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionUnknown }
	setFence := func(n *corev1.Node) {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: FencedCondition, Status: corev1.ConditionTrue})
	}
	clearFence := func(n *corev1.Node) { n.Status.Conditions = n.Status.Conditions[:1] }
	node1 := func(t *testing.T, e *testEnv) {
		e.seedNode(makeNode("node-1").condition(corev1.NodeReady, corev1.ConditionTrue).obj())
	}
	fencedNode1 := func(t *testing.T, e *testEnv) {
		e.seedNode(makeNode("node-1").condition(corev1.NodeReady, corev1.ConditionUnknown).condition(FencedCondition, corev1.ConditionTrue).obj())
	}
	deleteNode := func(ctx context.Context, c kubernetes.Interface) error {
		return c.CoreV1().Nodes().Delete(ctx, "node-1", metav1.DeleteOptions{})
	}
	lease := func(name string) func(context.Context, kubernetes.Interface) error {
		return func(ctx context.Context, c kubernetes.Interface) error {
			holder := name
			_, err := c.CoordinationV1().Leases(KubeLeaseNamespace).Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}, metav1.CreateOptions{})
			return err
		}
	}
	runAuthorityCases(t, []authorityCase{
		{name: "PS-13 kubelet registers its node", identity: KubeletIdentity("node-1"), do: createNode("node-1")},
		{name: "PS-13 kubelet may not register another node", identity: KubeletIdentity("node-1"), do: createNode("node-2"), rule: RuleHeartbeat},
		{name: "PS-13 kubelet updates its node status", identity: KubeletIdentity("node-1"), setup: node1, do: nodeStatus(notReady)},
		{name: "PS-13 other kubelet refused", identity: KubeletIdentity("node-2"), setup: node1, do: nodeStatus(notReady), rule: RuleHeartbeat},
		{name: "PS-13 node controller updates node status", identity: IdentityNodeController, setup: node1, do: nodeStatus(notReady)},
		{name: "PS-13 workload may not update a node", identity: IdentityWorkload, setup: node1, do: nodeStatus(notReady), rule: RuleHeartbeat},
		{name: "PS-14 fencing controller sets the fence", identity: IdentityFencingController, setup: node1, do: nodeStatus(setFence)},
		{name: "PS-14 kubelet may not clear its fence", identity: KubeletIdentity("node-1"), setup: fencedNode1, do: nodeStatus(clearFence), rule: RuleFence},
		{name: "PS-10 admin deletes a node", identity: IdentityAdmin, setup: node1, do: deleteNode},
		{name: "PS-10 node controller may not delete a node", identity: IdentityNodeController, setup: node1, do: deleteNode, rule: RuleNodeDelete},
		{name: "PS-13 kubelet writes its lease", identity: KubeletIdentity("node-1"), do: lease("node-1")},
		{name: "PS-13 kubelet may not write another node's lease", identity: KubeletIdentity("node-1"), do: lease("node-2"), rule: RuleHeartbeat},
		{name: "PS-13 node controller may not write a node lease", identity: IdentityNodeController, do: lease("node-1"), rule: RuleHeartbeat},
	})
}

// TestBindOnce checks that a pod is bound once (409 the second time) and
// that binding sets the node and the PodScheduled condition.
func TestBindOnce(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	e.seedPod(makePod("p").obj())
	sched := e.client(IdentityScheduler)
	bind := func(node string) error {
		return sched.CoreV1().Pods("default").Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: "p"}, Target: corev1.ObjectReference{Kind: "Node", Name: node}}, metav1.CreateOptions{})
	}
	if err := bind("node-1"); err != nil {
		t.Fatal(err)
	}
	p := e.storedPod("default", "p")
	if p.Spec.NodeName != "node-1" {
		t.Errorf("nodeName = %q, want node-1", p.Spec.NodeName)
	}
	if len(p.Status.Conditions) != 1 || p.Status.Conditions[0].Type != corev1.PodScheduled || p.Status.Conditions[0].Status != corev1.ConditionTrue {
		t.Errorf("conditions = %+v, want PodScheduled=True", p.Status.Conditions)
	}
	err := bind("node-2")
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), `already assigned to node "node-1"`) {
		t.Errorf("second bind: %v, want 409 naming node-1", err)
	}
	if got := e.storedPod("default", "p"); got.ResourceVersion != p.ResourceVersion {
		t.Errorf("second bind changed the pod")
	}
}

// TestBypassAuthority checks the planted bug: a refused force deletion goes
// through when authority is bypassed.
func TestBypassAuthority(t *testing.T) {
	e := newTestEnv(t, func(c *Config) { c.BypassAuthority = true })
	seedRunning()(t, e)
	if err := forceDeletePod("p")(testCtx(t), e.client(IdentityNodeController)); err != nil {
		t.Fatalf("force delete with authority bypassed: %v", err)
	}
	if p := e.storedPod("default", "p"); p != nil {
		t.Errorf("pod still stored after a bypassed force deletion")
	}
}

// TestAuthorityNodeRestriction covers the node restriction (PS-1) and the
// fence record (PS-14) through the API with each identity's own token: a
// kubelet writes only its own node's pods, and nobody but the fencing
// controller and admin changes a fence taint.
func TestAuthorityNodeRestriction(t *testing.T) {
	pods := func(c kubernetes.Interface) typedPods { return c.CoreV1().Pods("default") }
	// podOn seeds node-0 and node-1 and pet web-0 on node, owned by set web.
	podOn := func(node string) func(*testing.T, *testEnv) {
		return func(t *testing.T, e *testEnv) {
			for _, n := range []string{"node-0", "node-1"} {
				e.seedNode(makeNode(n).condition(corev1.NodeReady, corev1.ConditionTrue).obj())
			}
			p := makePod("web-0").node(node).phase(corev1.PodRunning).obj()
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web", UID: "set-uid"}}
			e.seedPod(p)
		}
	}
	deleteGracefully := func(ctx context.Context, c kubernetes.Interface) error {
		return pods(c).Delete(ctx, "web-0", metav1.DeleteOptions{})
	}
	evict := func(ctx context.Context, c kubernetes.Interface) error {
		return pods(c).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "default"}})
	}
	addFinalizer := func(ctx context.Context, c kubernetes.Interface) error {
		_, err := pods(c).Patch(ctx, "web-0", types.MergePatchType, []byte(`{"metadata":{"finalizers":["example.com/hold"]}}`), metav1.PatchOptions{})
		return err
	}
	stripOwners := func(ctx context.Context, c kubernetes.Interface) error {
		p, err := pods(c).Get(ctx, "web-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		p.OwnerReferences = nil
		_, err = pods(c).Update(ctx, p, metav1.UpdateOptions{})
		return err
	}
	createPod := func(ctx context.Context, c kubernetes.Interface) error {
		_, err := pods(c).Create(ctx, makePod("mirror").obj(), metav1.CreateOptions{})
		return err
	}

	// fencedNode0 seeds node-0 as the fencing controller leaves it.
	fencedNode0 := func(t *testing.T, e *testEnv) {
		at := metav1.NewTime(testStart)
		n := makeNode("node-0").condition(corev1.NodeReady, corev1.ConditionUnknown).obj()
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: FencedCondition, Status: corev1.ConditionTrue,
			Reason: "Fenced", Message: "fence token 1 confirmed by power", LastTransitionTime: at})
		n.Spec.Unschedulable = true
		n.Spec.Taints = []corev1.Taint{{Key: FencedTaint, Effect: corev1.TaintEffectNoExecute, TimeAdded: &at}}
		n.Annotations = map[string]string{FenceTokenAnnotation: "1"}
		e.seedNode(n)
	}
	changeNode := func(change func(*corev1.Node)) func(context.Context, kubernetes.Interface) error {
		return func(ctx context.Context, c kubernetes.Interface) error {
			n, err := c.CoreV1().Nodes().Get(ctx, "node-0", metav1.GetOptions{})
			if err != nil {
				return err
			}
			change(n)
			_, err = c.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
			return err
		}
	}
	weakenFence := changeNode(func(n *corev1.Node) {
		for i := range n.Spec.Taints {
			if n.Spec.Taints[i].Key == FencedTaint {
				n.Spec.Taints[i].Effect = corev1.TaintEffectPreferNoSchedule
			}
		}
	})
	patchFenceEffect := func(ctx context.Context, c kubernetes.Interface) error {
		n, err := c.CoreV1().Nodes().Get(ctx, "node-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		body, err := json.Marshal(map[string]any{"spec": map[string]any{"taints": []map[string]any{{
			"key": FencedTaint, "effect": "PreferNoSchedule", "timeAdded": n.Spec.Taints[0].TimeAdded}}}})
		if err != nil {
			return err
		}
		_, err = c.CoreV1().Nodes().Patch(ctx, "node-0", types.MergePatchType, body, metav1.PatchOptions{})
		return err
	}
	clearCondition := func(ctx context.Context, c kubernetes.Interface) error {
		n, err := c.CoreV1().Nodes().Get(ctx, "node-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		nodeCondition(n, FencedCondition).Reason = "Recovered"
		_, err = c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	}
	addTaint := changeNode(func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "example.com/x", Effect: corev1.TaintEffectNoSchedule})
	})
	node0 := func(t *testing.T, e *testEnv) {
		e.seedNode(makeNode("node-0").condition(corev1.NodeReady, corev1.ConditionTrue).obj())
	}
	k0, k1, k2 := KubeletIdentity("node-0"), KubeletIdentity("node-1"), KubeletIdentity("node-2")
	runAuthorityCases(t, []authorityCase{
		{name: "PS-1 kubelet deletes its own pod gracefully", identity: k1, setup: podOn("node-1"), do: deleteGracefully},
		{name: "PS-1 kubelet of node-0 may not delete a pod on node-1", identity: k0, setup: podOn("node-1"), do: deleteGracefully, rule: RuleNodeRestriction},
		{name: "PS-1 kubelet evicts its own pod", identity: k1, setup: podOn("node-1"), do: evict},
		{name: "PS-1 kubelet may not evict a pod of another node", identity: k0, setup: podOn("node-1"), do: evict, rule: RuleNodeRestriction},
		{name: "PS-1 kubelet of node-2 may not add a finalizer to a pet on node-0", identity: k2, setup: podOn("node-0"), do: addFinalizer, rule: RuleNodeRestriction},
		{name: "PS-1 kubelet of node-2 may not strip a pet's ownerReferences", identity: k2, setup: podOn("node-0"), do: stripOwners, rule: RuleNodeRestriction},
		{name: "PS-1 kubelet may not strip its own pet's ownerReferences", identity: k0, setup: podOn("node-0"), do: stripOwners, rule: RuleNodeRestriction},
		{name: "PS-1 the workload adds a finalizer", identity: IdentityWorkload, setup: podOn("node-0"), do: addFinalizer},
		{name: "PS-1 the workload strips ownerReferences", identity: IdentityWorkload, setup: podOn("node-0"), do: stripOwners},
		{name: "PS-1 kubelet may not create a pod", identity: k0, do: createPod, rule: RuleNodeRestriction},
		{name: "PS-1 kubelet may not change its taints", identity: k0, setup: node0, do: addTaint, rule: RuleNodeRestriction},
		{name: "PS-1 node controller taints a node", identity: IdentityNodeController, setup: node0, do: addTaint},
		{name: "PS-14 kubelet may not weaken its fence taint", identity: k0, setup: fencedNode0, do: weakenFence, rule: RuleFence},
		{name: "PS-14 kubelet may not patch its fence taint's effect", identity: k0, setup: fencedNode0, do: patchFenceEffect, rule: RuleFence},
		{name: "PS-14 node controller may not weaken a fence taint", identity: IdentityNodeController, setup: fencedNode0, do: weakenFence, rule: RuleFence},
		{name: "PS-14 node controller may not patch a fence taint's effect", identity: IdentityNodeController, setup: fencedNode0, do: patchFenceEffect, rule: RuleFence},
		{name: "PS-14 kubelet may not rewrite its fence condition", identity: k0, setup: fencedNode0, do: clearCondition, rule: RuleFence},
		{name: "PS-14 fencing controller changes the fence taint", identity: IdentityFencingController, setup: fencedNode0, do: weakenFence},
		{name: "PS-14 fencing controller patches the fence taint", identity: IdentityFencingController, setup: fencedNode0, do: patchFenceEffect},
		{name: "PS-14 admin changes the fence taint", identity: IdentityAdmin, setup: fencedNode0, do: weakenFence},
		{name: "PS-14 admin rewrites the fence condition", identity: IdentityAdmin, setup: fencedNode0, do: clearCondition},
	}, withKubeletToken("node-0"))
}

// withKubeletToken adds the test token of node's kubelet.
func withKubeletToken(node string) func(*Config) {
	return func(c *Config) { c.Tokens[tokenOf(KubeletIdentity(node))] = KubeletIdentity(node) }
}

// TestBypassAuthorityNodeRestriction checks that the planted bug lets a
// node-restriction refusal through too.
func TestBypassAuthorityNodeRestriction(t *testing.T) {
	e := newTestEnv(t, func(c *Config) { c.BypassAuthority = true }, withKubeletToken("node-0"))
	seedRunning()(t, e)
	err := e.client(KubeletIdentity("node-0")).CoreV1().Pods("default").Delete(testCtx(t), "p", metav1.DeleteOptions{})
	if err != nil {
		t.Fatalf("kubelet:node-0 deleting a pod of node-1 with authority bypassed: %v", err)
	}
	if p := e.storedPod("default", "p"); p == nil || p.DeletionTimestamp == nil {
		t.Errorf("pod not terminating after a bypassed deletion: %+v", p)
	}
}

// typedPods is the pods client of one namespace.
type typedPods = corev1client.PodInterface
