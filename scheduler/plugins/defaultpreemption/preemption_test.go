package defaultpreemption_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
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

// TestPDBViolations: budgets are spent as kube-scheduler spends them
// (FilterVictimsWithPDBViolation), which decides between candidates that
// differ only in how many budgets they violate.
func TestPDBViolations(t *testing.T) {
	selecting := func(name string, allowed int32, sel metav1.LabelSelector) *policyv1.PodDisruptionBudget {
		return &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &sel},
			Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed},
		}
	}
	noApp := metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpDoesNotExist}}}
	for _, tc := range []struct {
		name  string
		nodes []*corev1.Node
		pods  []*corev1.Pod
		pdbs  []*policyv1.PodDisruptionBudget
		want  outcome
	}{
		{
			// Oracle seeds 100452, 102882, 107519: the unlabelled pod
			// matches the DoesNotExist selector, yet violates nothing.
			name:  "a pod without labels violates no budget",
			nodes: []*corev1.Node{node("n1", "2"), node("n2", "2")},
			pods: []*corev1.Pod{
				st.MakePod().Name("bare").Priority(1).Req("2", "").Node("n1").Obj(),
				st.MakePod().Name("tagged").Label("app", "x").Priority(5).Req("2", "").Node("n2").Obj(),
			},
			pdbs: []*policyv1.PodDisruptionBudget{selecting("no-app", 0, noApp)},
			want: outcome{Node: "n1", Victims: []string{"bare"}},
		},
		{
			name:  "a labelled pod a DoesNotExist selector matches violates it",
			nodes: []*corev1.Node{node("n1", "2"), node("n2", "2")},
			pods: []*corev1.Pod{
				st.MakePod().Name("plain").Label("team", "x").Priority(1).Req("2", "").Node("n1").Obj(),
				st.MakePod().Name("tagged").Label("app", "x").Priority(5).Req("2", "").Node("n2").Obj(),
			},
			pdbs: []*policyv1.PodDisruptionBudget{selecting("no-app", 0, noApp)},
			want: outcome{Node: "n2", Victims: []string{"tagged"}},
		},
		{
			// a exceeds a-only and stops there, leaving team's one
			// disruption to b: n1 violates one budget, as n2 does, and
			// wins on its lower highest victim. Spending team for a too
			// would count two violations on n1 and pick n2.
			name:  "a pod is violating at the first budget it exceeds and spends no later one",
			nodes: []*corev1.Node{node("n1", "2"), node("n2", "2")},
			pods: []*corev1.Pod{
				st.MakePod().Name("a").Label("app", "a").Label("team", "x").Priority(2).Req("1", "").Node("n1").Obj(),
				st.MakePod().Name("b").Label("team", "x").Priority(1).Req("1", "").Node("n1").Obj(),
				st.MakePod().Name("e").Label("app", "a").Priority(3).Req("2", "").Node("n2").Obj(),
			},
			pdbs: []*policyv1.PodDisruptionBudget{budget("a-only", "a", 0),
				selecting("team", 1, metav1.LabelSelector{MatchLabels: map[string]string{"team": "x"}})},
			want: outcome{Node: "n1", Victims: []string{"a", "b"}},
		},
		{
			name:  "a pod the budget already counts as disrupted does not spend it",
			nodes: []*corev1.Node{node("n1", "2"), node("n2", "2")},
			pods: []*corev1.Pod{
				st.MakePod().Name("counted").Label("app", "g").Priority(1).Req("2", "").Node("n1").Obj(),
				st.MakePod().Name("free").Label("app", "f").Priority(5).Req("2", "").Node("n2").Obj(),
			},
			pdbs: func() []*policyv1.PodDisruptionBudget {
				b := budget("g", "g", 0)
				b.Status.DisruptedPods = map[string]metav1.Time{"counted": {}}
				return []*policyv1.PodDisruptionBudget{b}
			}(),
			want: outcome{Node: "n1", Victims: []string{"counted"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := runPreemption(t, tc.nodes, tc.pods, preemptor(10, "2"), tc.pdbs...)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("preemption (-want +got):\n%s", diff)
			}
		})
	}
}

// TestInterPodAffinityPreemption: a node is no candidate when the preemptor
// is attracted by lower-priority pods there (PR-8), while anti-affinity is
// something preemption can resolve.
func TestInterPodAffinityPreemption(t *testing.T) {
	db := map[string]string{"app": "db"}
	zone := "topology.kubernetes.io/zone"
	zoned := func(name, z, cpu string) *corev1.Node {
		return st.MakeNode().Name(name).Label(zone, z).Capacity(cpu, "64Gi", "110").Obj()
	}
	for _, tc := range []struct {
		name  string
		nodes []*corev1.Node
		pods  []*corev1.Pod
		pod   *corev1.Pod
		want  outcome
	}{
		{
			name:  "PR-8 the node holding the lower-priority pods the preemptor needs is skipped",
			nodes: []*corev1.Node{zoned("n1", "a", "2"), zoned("n2", "a", "2")},
			pods: []*corev1.Pod{
				running("db", "n1", 1, "1"), running("filler", "n1", 1, "1"),
				running("other", "n2", 5, "2"),
			},
			// Without PR-8, n1's priority-1 victims would beat n2's priority 5.
			pod:  st.MakePod().Name("preemptor").Priority(10).Req("2", "").PodAffinity(zone, db).Obj(),
			want: outcome{Node: "n2", Victims: []string{"other"}},
		},
		{
			name:  "PR-8 with the attracting pods on the only node, nothing is preempted",
			nodes: []*corev1.Node{node("n1", "2")},
			pods:  []*corev1.Pod{running("db", "n1", 1, "2")},
			pod:   st.MakePod().Name("preemptor").Priority(10).Req("1", "").PodAffinity("kubernetes.io/hostname", db).Obj(),
			want:  outcome{Reason: defaultpreemption.ReasonNoCandidates},
		},
		{
			name:  "PR-8 holds even for a preemptor that matches its own affinity",
			nodes: []*corev1.Node{node("n1", "2")},
			pods:  []*corev1.Pod{running("db", "n1", 1, "2")},
			pod: st.MakePod().Name("preemptor").Label("app", "db").Priority(10).Req("1", "").
				PodAffinity("kubernetes.io/hostname", db).Obj(),
			want: outcome{Reason: defaultpreemption.ReasonNoCandidates},
		},
		{
			name:  "affinity to a higher-priority pod does not stop preemption of others",
			nodes: []*corev1.Node{node("n1", "2")},
			pods:  []*corev1.Pod{running("db", "n1", 20, "1"), running("filler", "n1", 1, "1")},
			pod:   st.MakePod().Name("preemptor").Priority(10).Req("1", "").PodAffinity("kubernetes.io/hostname", db).Obj(),
			want:  outcome{Node: "n1", Victims: []string{"filler"}},
		},
		{
			name:  "a lower-priority pod the preemptor repels is a victim",
			nodes: []*corev1.Node{node("n1", "4")},
			pods:  []*corev1.Pod{running("db", "n1", 1, "1"), running("keep", "n1", 2, "1")},
			pod:   st.MakePod().Name("preemptor").Priority(10).Req("1", "").PodAntiAffinity("kubernetes.io/hostname", db).Obj(),
			want:  outcome{Node: "n1", Victims: []string{"db"}},
		},
		{
			name:  "a lower-priority pod repelling the preemptor is a victim",
			nodes: []*corev1.Node{node("n1", "4")},
			pods: []*corev1.Pod{
				st.MakePod().Name("shy").Priority(1).Req("1", "").PodAntiAffinity("kubernetes.io/hostname",
					map[string]string{"app": "loud"}).Node("n1").Obj(),
				running("keep", "n1", 2, "1"),
			},
			pod:  st.MakePod().Name("preemptor").Label("app", "loud").Priority(10).Req("1", "").Obj(),
			want: outcome{Node: "n1", Victims: []string{"shy"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := runPreemption(t, tc.nodes, tc.pods, tc.pod)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("preemption (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCandidateSearchOrder: nodes are tried lowest-priority victims first,
// so even when only one candidate is wanted it is usually the best (PR-11).
func TestCandidateSearchOrder(t *testing.T) {
	one := defaultpreemption.Args{MinCandidateNodesAbsolute: 1, MinCandidateNodesPercentage: 1}
	for _, tc := range []struct {
		name string
		pods []*corev1.Pod
		want outcome
	}{
		{
			name: "the lowest-priority victims are found first",
			pods: []*corev1.Pod{running("p5", "n1", 5, "2"), running("p3", "n2", 3, "2"), running("p1", "n3", 1, "2")},
			want: outcome{Node: "n3", Victims: []string{"p1"}},
		},
		{
			name: "with the wanted candidates found, a better node further on is not seen",
			pods: []*corev1.Pod{
				running("p1", "n1", 1, "1"), running("p2", "n1", 2, "1"),
				running("q2", "n2", 2, "2"),
				running("r1", "n3", 1, "1"), running("r1b", "n3", 1, "1"),
			},
			// n1 and n3 both start at priority 1; n1, first, takes p1 and
			// p2; n3 would take two pods of priority 1.
			want: outcome{Node: "n1", Victims: []string{"p1", "p2"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := []*corev1.Node{node("n1", "2"), node("n2", "2"), node("n3", "2")}
			got := runPreemptionWith(t, one, nodes, tc.pods, preemptor(10, "2"))
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

// findCandidate filters every node for pod and runs the plugin's search
// itself, so the candidate's PDB violations can be compared too.
func findCandidate(tb testing.TB, nodes []*corev1.Node, pods []*corev1.Pod, pod *corev1.Pod, pdbs []*policyv1.PodDisruptionBudget) *defaultpreemption.Candidate {
	tb.Helper()
	var pl *defaultpreemption.DefaultPreemption
	fw, err := framework.NewFramework([]framework.PluginSpec{
		{Factory: noderesources.NewFit},
		{Factory: func(h framework.Handle) (framework.Plugin, error) {
			p, err := defaultpreemption.New(defaultpreemption.Args{})(h)
			pl, _ = p.(*defaultpreemption.DefaultPreemption)
			return p, err
		}},
	}, framework.Options{
		PodDisruptionBudgets: func() []*policyv1.PodDisruptionBudget { return pdbs },
		Clock:                clocktesting.NewFakePassiveClock(testNow),
	})
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	state, statuses := filterAll(tb, fw, nodes, pods, pod)
	return pl.FindCandidate(ctx, state, pod, statuses)
}

// pickKey is kube-scheduler's pickOneNodeForPreemption order, computed
// here independently of the plugin: smaller is better on every field but
// earliest, where later is better.
type pickKey struct {
	Violations int
	Highest    int32
	Sum        int64
	Victims    int
	Earliest   time.Time
}

func pickKeyOf(c *defaultpreemption.Candidate) pickKey {
	k := pickKey{Violations: c.PDBViolations, Victims: len(c.Victims), Highest: math.MinInt32}
	for _, v := range c.Victims {
		k.Highest = max(k.Highest, v.Priority)
		k.Sum += int64(v.Priority) + math.MaxInt32 + 1
	}
	for _, v := range c.Victims {
		start := testNow
		if v.Pod.Status.StartTime != nil {
			start = v.Pod.Status.StartTime.Time
		}
		if v.Priority == k.Highest && (k.Earliest.IsZero() || start.Before(k.Earliest)) {
			k.Earliest = start
		}
	}
	return k
}

func (k pickKey) better(o pickKey) bool {
	switch {
	case k.Violations != o.Violations:
		return k.Violations < o.Violations
	case k.Highest != o.Highest:
		return k.Highest < o.Highest
	case k.Sum != o.Sum:
		return k.Sum < o.Sum
	case k.Victims != o.Victims:
		return k.Victims < o.Victims
	}
	return k.Earliest.After(o.Earliest)
}

// TestCandidateSearchFindsBest compares, on random clusters, the search
// that stops once no node can beat its best candidate with the best of
// every node dry-run alone: both must be equal on all five of
// kube-scheduler's criteria. Priorities repeat and go negative, start times
// repeat or are unset (now), budgets protect some pods, and a few pods
// have the lowest priority, which adds nothing to the shifted sum, so
// every criterion decides some rounds.
func TestCandidateSearchFindsBest(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	compared := 0
	decidedBy := map[string]int{}
	for round := range 400 {
		var nodes []*corev1.Node
		var pods []*corev1.Pod
		for n := range 6 {
			name := fmt.Sprintf("n%d", n)
			nodes = append(nodes, node(name, "4"))
			for p := range 1 + rng.IntN(4) {
				pn := fmt.Sprintf("%s-p%d", name, p)
				prio := int32(rng.IntN(8) - 3)
				if rng.IntN(8) == 0 {
					// Adds nothing to the shifted sum: only the number of
					// victims tells such nodes apart.
					prio = math.MinInt32
				}
				w := st.MakePod().Name(pn).Label("app", pn).Label("group", fmt.Sprint("g", rng.IntN(3))).
					Priority(prio).Req("1", "").Node(name)
				if rng.IntN(4) > 0 {
					w = w.StartTime(testNow.Add(-time.Duration(1+rng.IntN(4)) * time.Minute))
				}
				pods = append(pods, w.Obj())
			}
		}
		var pdbs []*policyv1.PodDisruptionBudget
		for g := range rng.IntN(3) {
			b := budget(fmt.Sprint("pdb", g), "", int32(rng.IntN(2)))
			b.Spec.Selector.MatchLabels = map[string]string{"group": fmt.Sprint("g", g)}
			pdbs = append(pdbs, b)
		}
		pod := preemptor(5, fmt.Sprint(1+rng.IntN(4)))
		if fits := func() bool {
			for _, n := range nodes {
				used := 0
				for _, p := range pods {
					if p.Spec.NodeName == n.Name {
						used++
					}
				}
				if used+int(pod.Spec.Containers[0].Resources.Requests.Cpu().Value()) <= 4 {
					return true
				}
			}
			return false
		}(); fits {
			continue
		}
		got := findCandidate(t, nodes, pods, pod, pdbs)
		compared++
		var keys []pickKey
		for _, n := range nodes {
			var alone []*corev1.Pod
			for _, p := range pods {
				if p.Spec.NodeName == n.Name {
					alone = append(alone, p)
				}
			}
			if c := findCandidate(t, []*corev1.Node{n}, alone, pod, pdbs); c != nil {
				keys = append(keys, pickKeyOf(c))
			}
		}
		sort.SliceStable(keys, func(i, j int) bool { return keys[i].better(keys[j]) })
		switch {
		case len(keys) == 0 && got != nil:
			t.Fatalf("round %d: preempted on %s, but no node alone is a candidate", round, got.Node)
		case len(keys) > 0 && got == nil:
			t.Fatalf("round %d: no preemption, want victims like %+v", round, keys[0])
		case len(keys) > 0:
			if diff := cmp.Diff(keys[0], pickKeyOf(got)); diff != "" {
				t.Fatalf("round %d: candidate on %s (-want +got):\n%s", round, got.Node, diff)
			}
			if len(keys) > 1 {
				decidedBy[decidingCriterion(keys[0], keys[1])]++
			}
		}
	}
	if compared < 100 {
		t.Errorf("only %d of 400 random clusters needed preemption", compared)
	}
	for _, c := range []string{"violations", "highest", "sum", "victims", "earliest start"} {
		if decidedBy[c] == 0 {
			t.Errorf("no round was decided by %s between the two best nodes (%v): the test does not cover it", c, decidedBy)
		}
	}
}

// decidingCriterion names the first criterion on which the best key beats
// the runner-up.
func decidingCriterion(best, next pickKey) string {
	switch {
	case best.Violations != next.Violations:
		return "violations"
	case best.Highest != next.Highest:
		return "highest"
	case best.Sum != next.Sum:
		return "sum"
	case best.Victims != next.Victims:
		return "victims"
	case !best.Earliest.Equal(next.Earliest):
		return "earliest start"
	}
	return "tie"
}
