package defaultpreemption_test

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/podsafe/podsafe/scheduler/framework"
	"github.com/podsafe/podsafe/scheduler/plugins/defaultpreemption"
	"github.com/podsafe/podsafe/scheduler/plugins/interpodaffinity"
	"github.com/podsafe/podsafe/scheduler/plugins/nodeaffinity"
	"github.com/podsafe/podsafe/scheduler/plugins/nodename"
	"github.com/podsafe/podsafe/scheduler/plugins/noderesources"
	"github.com/podsafe/podsafe/scheduler/plugins/nodeunschedulable"
	"github.com/podsafe/podsafe/scheduler/plugins/tainttoleration"
	"github.com/podsafe/podsafe/scheduler/st"
)

// testNow is the scheduler's clock in these tests: the start time of every
// pod the kubelet has not started yet.
var testNow = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

// outcome is a preemption decision in comparable form.
type outcome struct {
	Node    string
	Victims []string
	// Reason is the status message when there is no decision.
	Reason string
}

// runPreemption filters every node for pod and, as the scheduler does when
// none fits, runs the PostFilter with the rejections.
func runPreemption(tb testing.TB, nodes []*corev1.Node, pods []*corev1.Pod, pod *corev1.Pod, pdbs ...*policyv1.PodDisruptionBudget) outcome {
	tb.Helper()
	return runPreemptionWith(tb, defaultpreemption.Args{}, nodes, pods, pod, pdbs...)
}

// runPreemptionWith is runPreemption with the plugin's args.
func runPreemptionWith(tb testing.TB, args defaultpreemption.Args, nodes []*corev1.Node, pods []*corev1.Pod, pod *corev1.Pod, pdbs ...*policyv1.PodDisruptionBudget) outcome {
	tb.Helper()
	fw, err := framework.NewFramework([]framework.PluginSpec{
		{Factory: nodeunschedulable.New},
		{Factory: nodename.New},
		{Factory: tainttoleration.New},
		{Factory: nodeaffinity.New},
		{Factory: noderesources.NewFit},
		{Factory: interpodaffinity.New},
		{Factory: defaultpreemption.New(args)},
	}, framework.Options{
		PodDisruptionBudgets: func() []*policyv1.PodDisruptionBudget { return pdbs },
		Clock:                clocktesting.NewFakePassiveClock(testNow),
	})
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	state, statuses := filterAll(tb, fw, nodes, pods, pod)
	if len(statuses) < len(nodes) {
		tb.Fatalf("the pod fits somewhere; preemption would not run")
	}
	res, st := fw.RunPostFilterPlugins(ctx, state, pod, statuses)
	if !st.IsSuccess() {
		return outcome{Reason: st.Message()}
	}
	out := outcome{Node: res.NominatedNodeName}
	for _, v := range res.Victims {
		if v.Spec.Priority != nil && pod.Spec.Priority != nil && *v.Spec.Priority >= *pod.Spec.Priority {
			tb.Errorf("PR-10: victim %s has priority %d, preemptor %d", v.Name, *v.Spec.Priority, *pod.Spec.Priority)
		}
		out.Victims = append(out.Victims, v.Name)
	}
	sort.Strings(out.Victims)
	return out
}

func node(name string, cpu string) *corev1.Node {
	return st.MakeNode().Name(name).Capacity(cpu, "64Gi", "110").Obj()
}

func running(name, node string, prio int32, cpu string) *corev1.Pod {
	return st.MakePod().Name(name).Label("app", name).Priority(prio).Req(cpu, "").Node(node).Obj()
}

func preemptor(prio int32, cpu string) *corev1.Pod {
	return st.MakePod().Name("preemptor").Priority(prio).Req(cpu, "").Obj()
}

func budget(name string, app string, allowed int32) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed},
	}
}

func TestCandidateSelection(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes []*corev1.Node
		pods  []*corev1.Pod
		pdbs  []*policyv1.PodDisruptionBudget
		pod   *corev1.Pod
		want  outcome
	}{
		{
			name:  "PR-11 the node whose victims have the lowest priority wins",
			nodes: []*corev1.Node{node("n1", "2"), node("n2", "2")},
			pods:  []*corev1.Pod{running("mid", "n1", 5, "2"), running("low", "n2", 1, "2")},
			pod:   preemptor(10, "1"),
			want:  outcome{Node: "n2", Victims: []string{"low"}},
		},
		{
			name:  "PR-4 pods that need not go are reprieved, the most important first",
			nodes: []*corev1.Node{node("n1", "3")},
			pods:  []*corev1.Pod{running("p1", "n1", 1, "1"), running("p2", "n1", 2, "1"), running("p3", "n1", 3, "1")},
			pod:   preemptor(10, "1"),
			want:  outcome{Node: "n1", Victims: []string{"p1"}},
		},
		{
			name:  "PR-4 as many victims as the pod needs",
			nodes: []*corev1.Node{node("n1", "3")},
			pods:  []*corev1.Pod{running("p1", "n1", 1, "1"), running("p2", "n1", 2, "1"), running("p3", "n1", 3, "1")},
			pod:   preemptor(10, "2"),
			want:  outcome{Node: "n1", Victims: []string{"p1", "p2"}},
		},
		{
			name:  "PR-10 pods of equal or higher priority are never victims",
			nodes: []*corev1.Node{node("n1", "2"), node("n2", "2")},
			pods:  []*corev1.Pod{running("same", "n1", 10, "2"), running("higher", "n2", 20, "2")},
			pod:   preemptor(10, "1"),
			want:  outcome{Reason: defaultpreemption.ReasonNoCandidates},
		},
		{
			name:  "PR-8 a node is no candidate if removing every lower pod is not enough",
			nodes: []*corev1.Node{node("n1", "4")},
			pods:  []*corev1.Pod{running("low", "n1", 1, "1"), running("high", "n1", 20, "3")},
			pod:   preemptor(10, "2"),
			want:  outcome{Reason: defaultpreemption.ReasonNoCandidates},
		},
		{
			name:  "PR-12 preemptionPolicy Never never preempts",
			nodes: []*corev1.Node{node("n1", "2")},
			pods:  []*corev1.Pod{running("low", "n1", 1, "2")},
			pod:   st.MakePod().Name("preemptor").Priority(10).Req("1", "").PreemptionPolicy(corev1.PreemptNever).Obj(),
			want:  outcome{Reason: defaultpreemption.ReasonNeverPolicy},
		},
		{
			name:  "PR-7 victims whose budget allows it are preferred",
			nodes: []*corev1.Node{node("n1", "2"), node("n2", "2")},
			pods:  []*corev1.Pod{running("guarded", "n1", 1, "2"), running("free", "n2", 5, "2")},
			pdbs:  []*policyv1.PodDisruptionBudget{budget("pdb", "guarded", 0)},
			pod:   preemptor(10, "1"),
			want:  outcome{Node: "n2", Victims: []string{"free"}},
		},
		{
			name:  "PR-7 a budget with room left does not count as violated",
			nodes: []*corev1.Node{node("n1", "2"), node("n2", "2")},
			pods:  []*corev1.Pod{running("guarded", "n1", 1, "2"), running("free", "n2", 5, "2")},
			pdbs:  []*policyv1.PodDisruptionBudget{budget("pdb", "guarded", 1)},
			pod:   preemptor(10, "1"),
			want:  outcome{Node: "n1", Victims: []string{"guarded"}},
		},
		{
			name:  "PR-7 budgets are best effort: with no alternative they are violated",
			nodes: []*corev1.Node{node("n1", "2")},
			pods:  []*corev1.Pod{running("guarded", "n1", 1, "2")},
			pdbs:  []*policyv1.PodDisruptionBudget{budget("pdb", "guarded", 0)},
			pod:   preemptor(10, "1"),
			want:  outcome{Node: "n1", Victims: []string{"guarded"}},
		},
		{
			name: "nodes rejected for reasons preemption cannot fix are skipped",
			nodes: []*corev1.Node{
				st.MakeNode().Name("n1").Capacity("2", "64Gi", "110").Taint("dedicated", "x", corev1.TaintEffectNoSchedule).Obj(),
				node("n2", "2"),
			},
			pods: []*corev1.Pod{running("lowest", "n1", 1, "2"), running("low", "n2", 5, "2")},
			pod:  preemptor(10, "1"),
			want: outcome{Node: "n2", Victims: []string{"low"}},
		},
		{
			name:  "a preemptor waits for the victims it preempted on its nominated node",
			nodes: []*corev1.Node{node("n1", "2"), node("n2", "2")},
			pods: []*corev1.Pod{
				st.MakePod().Name("going").Priority(1).Req("2", "").Node("n1").PreemptedByScheduler().Obj(),
				running("low", "n2", 1, "2"),
			},
			pod:  st.MakePod().Name("preemptor").Priority(10).Req("1", "").NominatedNode("n1").Obj(),
			want: outcome{Reason: defaultpreemption.ReasonStillWaiting},
		},
		{
			// Oracle seeds 1268, 1783, 2049, 2863: a pod deleted for
			// another reason may be chosen again (the scheduler then sends
			// no call for it, its deletion being under way).
			name:  "a lower-priority pod terminating for another reason is not waited for",
			nodes: []*corev1.Node{node("n1", "2"), node("n2", "2")},
			pods: []*corev1.Pod{
				st.MakePod().Name("going").Priority(1).Req("2", "").Node("n1").Terminating().Obj(),
				running("low", "n2", 1, "2"),
			},
			pod:  st.MakePod().Name("preemptor").Priority(10).Req("1", "").NominatedNode("n1").Obj(),
			want: outcome{Node: "n1", Victims: []string{"going"}},
		},
		{
			name:  "a victim marked but not being deleted is not waited for",
			nodes: []*corev1.Node{node("n1", "2")},
			pods: []*corev1.Pod{
				st.MakePod().Name("marked").Priority(1).Req("2", "").Node("n1").Condition(corev1.DisruptionTarget, corev1.PodReasonPreemptionByScheduler).Obj(),
			},
			pod:  st.MakePod().Name("preemptor").Priority(10).Req("1", "").NominatedNode("n1").Obj(),
			want: outcome{Node: "n1", Victims: []string{"marked"}},
		},
		{
			name:  "a pod terminating for another disruption is not waited for",
			nodes: []*corev1.Node{node("n1", "2")},
			pods: []*corev1.Pod{
				st.MakePod().Name("evicted").Priority(1).Req("2", "").Node("n1").Condition(corev1.DisruptionTarget, "EvictionByEvictionAPI").Terminating().Obj(),
			},
			pod:  st.MakePod().Name("preemptor").Priority(10).Req("1", "").NominatedNode("n1").Obj(),
			want: outcome{Node: "n1", Victims: []string{"evicted"}},
		},
		{
			name:  "a preempted pod of equal priority is not waited for",
			nodes: []*corev1.Node{node("n1", "2"), node("n2", "2")},
			pods: []*corev1.Pod{
				st.MakePod().Name("peer").Priority(10).Req("1", "").Node("n1").PreemptedByScheduler().Obj(),
				running("low", "n1", 1, "1"),
				running("other", "n2", 20, "2"),
			},
			pod:  st.MakePod().Name("preemptor").Priority(10).Req("1", "").NominatedNode("n1").Obj(),
			want: outcome{Node: "n1", Victims: []string{"low"}},
		},
		{
			name:  "PR-9 victims all come from one node",
			nodes: []*corev1.Node{node("n1", "2"), node("n2", "2")},
			pods:  []*corev1.Pod{running("a", "n1", 1, "1"), running("b", "n1", 1, "1"), running("c", "n2", 1, "1"), running("d", "n2", 1, "1")},
			pod:   preemptor(10, "2"),
			want:  outcome{Node: "n1", Victims: []string{"a", "b"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := runPreemption(t, tc.nodes, tc.pods, tc.pod, tc.pdbs...)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("preemption (-want +got):\n%s", diff)
			}
		})
	}
}

// filterAll sets fw's snapshot to nodes and pods and runs PreFilter and
// every node's Filter for pod, as a scheduling cycle does; it returns the
// cycle state and the nodes' rejections.
func filterAll(tb testing.TB, fw *framework.Framework, nodes []*corev1.Node, pods []*corev1.Pod, pod *corev1.Pod) (*framework.CycleState, framework.NodeToStatus) {
	tb.Helper()
	fw.SetSnapshot(framework.NewSnapshot(pods, nodes))
	state := framework.NewCycleState()
	if st := fw.RunPreFilterPlugins(context.Background(), state, pod); !st.IsSuccess() {
		tb.Fatalf("PreFilter: %v", st)
	}
	statuses := framework.NodeToStatus{}
	for _, ni := range fw.Snapshot().List() {
		if st := fw.RunFilterPlugins(context.Background(), state, pod, ni); !st.IsSuccess() {
			statuses[ni.Node().Name] = st
		}
	}
	return state, statuses
}
