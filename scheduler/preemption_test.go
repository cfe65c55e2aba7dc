package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/podsafe/podsafe/scheduler/framework"
	"github.com/podsafe/podsafe/scheduler/st"
)

// preemptFor runs a cycle for pod; it must fail, and then the PostFilter's
// decision is returned (nil when preemption refused).
func preemptFor(t *testing.T, fw *framework.Framework, pod *corev1.Pod) *framework.PostFilterResult {
	t.Helper()
	a := &algorithm{fw: fw, percentage: 100}
	state := framework.NewCycleState()
	_, err := a.schedule(context.Background(), state, pod)
	fe, ok := err.(*FitError)
	if !ok {
		t.Fatalf("schedule: got %v, want a FitError", err)
	}
	res, st := fw.RunPostFilterPlugins(context.Background(), state, pod, fe.Statuses)
	if !st.IsSuccess() {
		return nil
	}
	return res
}

func victimNames(res *framework.PostFilterResult) []string {
	var out []string
	for _, v := range res.Victims {
		out = append(out, v.Name)
	}
	sort.Strings(out)
	return out
}

func TestPreemption(t *testing.T) {
	small := func(name string) *corev1.Node { return st.MakeNode().Name(name).Capacity("2", "8Gi", "10").Obj() }
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "guarded"},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 0},
	}
	for _, tc := range []struct {
		name        string
		cfg         Config
		nodes       []*corev1.Node
		pods        []*corev1.Pod
		pdbs        []*policyv1.PodDisruptionBudget
		pod         *corev1.Pod
		wantNode    string
		wantVictims []string
	}{
		{
			name:  "PR-10: pods of equal or higher priority are never victims",
			nodes: []*corev1.Node{small("n1")},
			pods: []*corev1.Pod{
				st.MakePod().Name("eq").Priority(10).Req("1", "").Node("n1").Obj(),
				st.MakePod().Name("hi").Priority(20).Req("1", "").Node("n1").Obj(),
			},
			pod: st.MakePod().Name("p").Priority(10).Req("1", "").Obj(),
		},
		{
			name:  "PR-12: PreemptionPolicy Never never preempts",
			nodes: []*corev1.Node{small("n1")},
			pods:  []*corev1.Pod{st.MakePod().Name("low").Priority(0).Req("2", "").Node("n1").Obj()},
			pod:   st.MakePod().Name("p").Priority(100).PreemptionPolicy(corev1.PreemptNever).Req("1", "").Obj(),
		},
		{
			name:  "PR-13: preemption disabled by config",
			cfg:   Config{DisablePreemption: true},
			nodes: []*corev1.Node{small("n1")},
			pods:  []*corev1.Pod{st.MakePod().Name("low").Priority(0).Req("2", "").Node("n1").Obj()},
			pod:   st.MakePod().Name("p").Priority(100).Req("1", "").Obj(),
		},
		{
			name:  "reprieve: only the pods that must go are victims, the least important first",
			nodes: []*corev1.Node{small("n1")},
			pods: []*corev1.Pod{
				st.MakePod().Name("v1").Priority(1).Req("500m", "").Node("n1").Obj(),
				st.MakePod().Name("v2").Priority(2).Req("500m", "").Node("n1").Obj(),
				st.MakePod().Name("v3").Priority(3).Req("1", "").Node("n1").Obj(),
			},
			pod:         st.MakePod().Name("p").Priority(100).Req("1", "").Obj(),
			wantNode:    "n1",
			wantVictims: []string{"v1", "v2"},
		},
		{
			name:  "PR-11: the node with the lowest-priority victims is chosen",
			nodes: []*corev1.Node{small("n1"), small("n2"), small("n3")},
			pods: []*corev1.Pod{
				st.MakePod().Name("a").Priority(50).Req("2", "").Node("n1").Obj(),
				st.MakePod().Name("b").Priority(5).Req("2", "").Node("n2").Obj(),
				st.MakePod().Name("c").Priority(30).Req("2", "").Node("n3").Obj(),
			},
			pod:         st.MakePod().Name("p").Priority(100).Req("1", "").Obj(),
			wantNode:    "n2",
			wantVictims: []string{"b"},
		},
		{
			name:  "fewest victims when priorities tie",
			nodes: []*corev1.Node{small("n1"), small("n2")},
			pods: []*corev1.Pod{
				st.MakePod().Name("a1").Priority(5).Req("1", "").Node("n1").Obj(),
				st.MakePod().Name("a2").Priority(5).Req("1", "").Node("n1").Obj(),
				st.MakePod().Name("b1").Priority(5).Req("2", "").Node("n2").Obj(),
			},
			pod:         st.MakePod().Name("p").Priority(100).Req("2", "").Obj(),
			wantNode:    "n2",
			wantVictims: []string{"b1"},
		},
		{
			name:  "PR-7: PDB-protected victims avoided when another node will do",
			nodes: []*corev1.Node{small("n1"), small("n2")},
			pods: []*corev1.Pod{
				st.MakePod().Name("guarded").Label("app", "guarded").Priority(1).Req("2", "").Node("n1").Obj(),
				st.MakePod().Name("free").Priority(5).Req("2", "").Node("n2").Obj(),
			},
			pdbs:        []*policyv1.PodDisruptionBudget{pdb},
			pod:         st.MakePod().Name("p").Priority(100).Req("1", "").Obj(),
			wantNode:    "n2",
			wantVictims: []string{"free"},
		},
		{
			name:  "PR-7: a PDB is violated when there is no alternative",
			nodes: []*corev1.Node{small("n1")},
			pods: []*corev1.Pod{
				st.MakePod().Name("guarded").Label("app", "guarded").Priority(1).Req("2", "").Node("n1").Obj(),
			},
			pdbs:        []*policyv1.PodDisruptionBudget{pdb},
			pod:         st.MakePod().Name("p").Priority(100).Req("1", "").Obj(),
			wantNode:    "n1",
			wantVictims: []string{"guarded"},
		},
		{
			name: "unresolvable nodes are no candidates (taints)",
			nodes: []*corev1.Node{
				st.MakeNode().Name("n1").Capacity("2", "8Gi", "10").Taint("k", "", corev1.TaintEffectNoSchedule).Obj(),
			},
			pods: []*corev1.Pod{st.MakePod().Name("low").Priority(0).Req("2", "").Node("n1").Obj()},
			pod:  st.MakePod().Name("p").Priority(100).Req("1", "").Obj(),
		},
		{
			name: "preemption respects DoNotSchedule spread",
			nodes: []*corev1.Node{
				st.MakeNode().Name("a1").Label(zone, "a").Capacity("1", "8Gi", "10").Obj(),
				st.MakeNode().Name("b1").Label(zone, "b").Capacity("1", "8Gi", "10").Obj(),
			},
			pods: []*corev1.Pod{
				st.MakePod().Name("spread-a").Label("foo", "bar").Priority(200).Node("a1").Obj(),
				st.MakePod().Name("low-a").Priority(1).Req("1", "").Node("a1").Obj(),
				st.MakePod().Name("low-b").Priority(2).Req("1", "").Node("b1").Obj(),
			},
			pod:         st.MakePod().Name("p").Label("foo", "bar").Priority(100).Req("1", "").Spread(1, zone, corev1.DoNotSchedule, fooBar).Obj(),
			wantNode:    "b1",
			wantVictims: []string{"low-b"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fw := newTestFramework(t, tc.cfg, tc.nodes, tc.pods, tc.pdbs...)
			res := preemptFor(t, fw, tc.pod)
			if tc.wantNode == "" {
				if res != nil {
					t.Fatalf("preempted on %s (victims %v), want no preemption", res.NominatedNodeName, victimNames(res))
				}
				return
			}
			if res == nil {
				t.Fatalf("no preemption, want node %s", tc.wantNode)
			}
			if res.NominatedNodeName != tc.wantNode {
				t.Errorf("nominated %s, want %s", res.NominatedNodeName, tc.wantNode)
			}
			if diff := cmp.Diff(tc.wantVictims, victimNames(res)); diff != "" {
				t.Errorf("victims (-want +got):\n%s", diff)
			}
			for _, v := range res.Victims {
				if *v.Spec.Priority >= *tc.pod.Spec.Priority {
					t.Errorf("victim %s has priority %d >= preemptor's %d", v.Name, *v.Spec.Priority, *tc.pod.Spec.Priority)
				}
			}
		})
	}
}

// callsOf lists the fake API's write actions as "verb resource[/sub]
// namespace/name" and, for a status patch, the DisruptionTarget condition
// it writes.
func callsOf(t *testing.T, cs *fake.Clientset) []string {
	t.Helper()
	var out []string
	for _, a := range settledActions(cs) {
		res := a.GetResource().Resource
		if a.GetSubresource() != "" {
			res += "/" + a.GetSubresource()
		}
		var name string
		switch a := a.(type) {
		case k8stesting.PatchAction:
			name = a.GetName()
		case k8stesting.DeleteAction:
			name = a.GetName()
		case k8stesting.CreateAction:
			if ev, ok := a.GetObject().(*corev1.Event); ok {
				name = ev.InvolvedObject.Name + " " + ev.Reason
			}
		default:
			continue
		}
		call := fmt.Sprintf("%s %s %s/%s", a.GetVerb(), res, a.GetNamespace(), name)
		if p, ok := a.(k8stesting.PatchAction); ok {
			var body struct {
				Status struct {
					Conditions []corev1.PodCondition `json:"conditions"`
				} `json:"status"`
			}
			if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
				t.Fatal(err)
			}
			for _, c := range body.Status.Conditions {
				call += fmt.Sprintf(" %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
			}
		}
		out = append(out, call)
	}
	return inRecordingOrder(out)
}

// TestPreemptMarksVictims: before deleting a victim the scheduler writes
// on it DisruptionTarget=True, reason PreemptionByScheduler, as
// kube-scheduler does, so that its preemptor waits for it; a victim
// already being deleted gets no call, one already marked only its
// deletion, and one whose mark fails is not deleted (its preemptor would
// not wait for it) while the others still go.
func TestPreemptMarksVictims(t *testing.T) {
	const mark = "DisruptionTarget=True PreemptionByScheduler: default-scheduler: preempting to accommodate a higher priority pod default/pre"
	pre := st.MakePod().Name("pre").Priority(100).Obj()
	victim := func(name string) *corev1.Pod { return st.MakePod().Name(name).Priority(1).Node("n1").Obj() }
	for _, tc := range []struct {
		name    string
		victims []*corev1.Pod
		// refuse makes the API answer status patches of this pod with 500.
		refuse string
		want   []string
	}{
		{
			name:    "marked, then deleted, then recorded",
			victims: []*corev1.Pod{victim("v1"), victim("v2")},
			want: []string{
				"patch pods/status default/v1 " + mark, "delete pods default/v1", "create events default/v1 Preempted",
				"patch pods/status default/v2 " + mark, "delete pods default/v2", "create events default/v2 Preempted",
			},
		},
		{
			name:    "a victim already being deleted gets no call",
			victims: []*corev1.Pod{st.MakePod().Name("v1").Priority(1).Node("n1").Terminating().Obj(), victim("v2")},
			want:    []string{"patch pods/status default/v2 " + mark, "delete pods default/v2", "create events default/v2 Preempted"},
		},
		{
			name: "a victim already marked is only deleted",
			victims: []*corev1.Pod{func() *corev1.Pod {
				v := victim("v1")
				v.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
					Reason: corev1.PodReasonPreemptionByScheduler, Message: "default-scheduler: preempting to accommodate a higher priority pod default/pre"}}
				return v
			}()},
			want: []string{"delete pods default/v1", "create events default/v1 Preempted"},
		},
		{
			name:    "a victim whose mark fails is not deleted",
			victims: []*corev1.Pod{victim("v1"), victim("v2")},
			refuse:  "v1",
			want:    []string{"patch pods/status default/v1 " + mark, "patch pods/status default/v2 " + mark, "delete pods default/v2", "create events default/v2 Preempted"},
		},
		{
			name:    "a victim already gone is skipped",
			victims: []*corev1.Pod{st.MakePod().Name("gone").Priority(1).Node("n1").Obj(), victim("v2")},
			want: []string{"patch pods/status default/gone " + mark,
				"patch pods/status default/v2 " + mark, "delete pods default/v2", "create events default/v2 Preempted"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stored []*corev1.Pod
			for _, v := range tc.victims {
				if v.Name != "gone" {
					stored = append(stored, v)
				}
			}
			s, cs := newFailureScheduler(t, pre, append(stored, pre))
			cs.PrependReactor("patch", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if p := a.(k8stesting.PatchAction); p.GetSubresource() == "status" && p.GetName() == tc.refuse {
					return true, nil, apierrors.NewInternalError(errors.New("boom"))
				}
				return false, nil, nil
			})
			cs.ClearActions()
			s.preempt(context.Background(), pre, &framework.PostFilterResult{NominatedNodeName: "n1", Victims: tc.victims})
			if diff := cmp.Diff(tc.want, callsOf(t, cs)); diff != "" {
				t.Errorf("API calls (-want +got):\n%s", diff)
			}
		})
	}
}
