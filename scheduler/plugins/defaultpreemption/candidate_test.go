package defaultpreemption_test

import (
	"context"
	"math"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/podsafe/podsafe/scheduler/framework"
	"github.com/podsafe/podsafe/scheduler/plugins/defaultpreemption"
	"github.com/podsafe/podsafe/scheduler/plugins/noderesources"
	"github.com/podsafe/podsafe/scheduler/st"
)

// ago is a start time d before testNow.
func ago(d time.Duration) time.Time { return testNow.Add(-d) }

// started is a running pod that the kubelet started at start.
func started(name, node string, prio int32, cpu string, start time.Time) *corev1.Pod {
	return st.MakePod().Name(name).Label("app", name).Priority(prio).Req(cpu, "").Node(node).StartTime(start).Obj()
}

// TestVictimImportance: among victims of equal priority the pod that
// started first is the most important, so it is reprieved first; a pod
// not started yet counts as starting now. The creation time plays no part
// (kube-scheduler's MoreImportantPod).
func TestVictimImportance(t *testing.T) {
	for _, tc := range []struct {
		name string
		pods []*corev1.Pod
		want outcome
	}{
		{
			name: "the pod that started first is spared, though created last",
			pods: []*corev1.Pod{
				st.MakePod().Name("old").Priority(1).Req("1", "").Node("n1").Created(ago(time.Hour)).StartTime(ago(time.Minute)).Obj(),
				st.MakePod().Name("young").Priority(1).Req("1", "").Node("n1").Created(ago(time.Minute)).StartTime(ago(time.Hour)).Obj(),
			},
			want: outcome{Node: "n1", Victims: []string{"old"}},
		},
		{
			name: "a pod not started yet counts as starting now",
			pods: []*corev1.Pod{
				st.MakePod().Name("unstarted").Priority(1).Req("1", "").Node("n1").Created(ago(time.Hour)).Obj(),
				started("running", "n1", 1, "1", ago(time.Second)),
			},
			want: outcome{Node: "n1", Victims: []string{"unstarted"}},
		},
		{
			name: "priority comes before start time",
			pods: []*corev1.Pod{
				started("low-old", "n1", 1, "1", ago(time.Hour)),
				started("high-new", "n1", 2, "1", ago(time.Second)),
			},
			want: outcome{Node: "n1", Victims: []string{"low-old"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := runPreemption(t, []*corev1.Node{node("n1", "2")}, tc.pods, preemptor(10, "1"))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("preemption (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPickOneNode: candidates are compared as kube-scheduler's
// pickOneNodeForPreemption compares them, each criterion deciding only
// when every earlier one ties.
func TestPickOneNode(t *testing.T) {
	min := int32(math.MinInt32)
	for _, tc := range []struct {
		name  string
		nodes []*corev1.Node
		pods  []*corev1.Pod
		pdbs  []*policyv1.PodDisruptionBudget
		pod   *corev1.Pod
		want  outcome
	}{
		{
			name:  "1. fewest PDB violations beat lower priorities",
			nodes: []*corev1.Node{node("n1", "1"), node("n2", "1")},
			pods:  []*corev1.Pod{started("guarded", "n1", 1, "1", ago(time.Hour)), started("free", "n2", 5, "1", ago(time.Hour))},
			pdbs:  []*policyv1.PodDisruptionBudget{budget("pdb", "guarded", 0)},
			pod:   preemptor(10, "1"),
			want:  outcome{Node: "n2", Victims: []string{"free"}},
		},
		{
			name:  "2. the lowest highest-priority victim beats fewer victims",
			nodes: []*corev1.Node{node("n1", "2"), node("n2", "2")},
			pods: []*corev1.Pod{
				started("a1", "n1", 1, "1", ago(time.Hour)), started("a2", "n1", 1, "1", ago(time.Hour)),
				started("b", "n2", 2, "2", ago(time.Hour)),
			},
			pod:  preemptor(10, "2"),
			want: outcome{Node: "n1", Victims: []string{"a1", "a2"}},
		},
		{
			name:  "3. the lowest sum of priorities",
			nodes: []*corev1.Node{node("n1", "2"), node("n2", "2")},
			pods: []*corev1.Pod{
				started("a1", "n1", 3, "1", ago(time.Hour)), started("a2", "n1", 2, "1", ago(time.Hour)),
				started("b1", "n2", 3, "1", ago(time.Hour)), started("b2", "n2", 1, "1", ago(time.Hour)),
			},
			pod:  preemptor(10, "2"),
			want: outcome{Node: "n2", Victims: []string{"b1", "b2"}},
		},
		{
			name:  "3. the sum is shifted by 2^31: more victims of a negative priority sum higher",
			nodes: []*corev1.Node{node("n1", "3"), node("n2", "3")},
			pods: []*corev1.Pod{
				started("a1", "n1", -1, "1", ago(time.Hour)), started("a2", "n1", -1, "1", ago(time.Hour)),
				started("a3", "n1", -1, "1", ago(time.Hour)),
				started("b", "n2", -1, "3", ago(time.Minute)),
			},
			pod:  preemptor(10, "3"),
			want: outcome{Node: "n2", Victims: []string{"b"}},
		},
		{
			name:  "4. fewest victims when the shifted sums tie",
			nodes: []*corev1.Node{node("n1", "2"), node("n2", "2")},
			pods: []*corev1.Pod{
				// A victim of the lowest priority adds 0 to the shifted sum.
				started("a1", "n1", 0, "1", ago(time.Minute)), started("a2", "n1", min, "1", ago(time.Minute)),
				started("b", "n2", 0, "2", ago(time.Hour)),
			},
			pod:  preemptor(10, "2"),
			want: outcome{Node: "n2", Victims: []string{"b"}},
		},
		{
			name:  "5. the latest earliest start wins the rest",
			nodes: []*corev1.Node{node("n1", "1"), node("n2", "1"), node("n3", "1")},
			pods: []*corev1.Pod{
				started("a", "n1", 1, "1", ago(time.Hour)),
				started("b", "n2", 1, "1", ago(time.Minute)),
				started("c", "n3", 1, "1", ago(2*time.Hour)),
			},
			pod:  preemptor(10, "1"),
			want: outcome{Node: "n2", Victims: []string{"b"}},
		},
		{
			name:  "5. a victim not started yet counts as starting now",
			nodes: []*corev1.Node{node("n1", "1"), node("n2", "1")},
			pods: []*corev1.Pod{
				started("a", "n1", 1, "1", ago(time.Second)),
				st.MakePod().Name("b").Priority(1).Req("1", "").Node("n2").Obj(),
			},
			pod:  preemptor(10, "1"),
			want: outcome{Node: "n2", Victims: []string{"b"}},
		},
		{
			name:  "5. only the start of the highest-priority victims counts",
			nodes: []*corev1.Node{node("n1", "2"), node("n2", "2")},
			pods: []*corev1.Pod{
				started("a5", "n1", 5, "1", ago(10*time.Minute)), started("a1", "n1", 1, "1", ago(100*time.Minute)),
				// n2's low victim started first of all, yet its priority-5
				// victim started after n1's.
				started("b5", "n2", 5, "1", ago(5*time.Minute)), started("b1", "n2", 1, "1", ago(1000*time.Minute)),
			},
			pod:  preemptor(10, "2"),
			want: outcome{Node: "n2", Victims: []string{"b1", "b5"}},
		},
		{
			name:  "a full tie goes to the node found first",
			nodes: []*corev1.Node{node("n1", "1"), node("n2", "1")},
			pods:  []*corev1.Pod{started("a", "n1", 1, "1", ago(time.Hour)), started("b", "n2", 1, "1", ago(time.Hour))},
			pod:   preemptor(10, "1"),
			want:  outcome{Node: "n1", Victims: []string{"a"}},
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

// TestPreemptionCandidates: only nodes the filters rejected as
// Unschedulable are dry-run; every filter answers the code kube-scheduler's
// plugin answers for the same rejection, so nodes that no removal can fix
// are never candidates even when their victims would be the cheapest.
func TestPreemptionCandidates(t *testing.T) {
	// n2 always offers a priority-5 victim; n1 a priority-1 victim, which
	// would win were n1 a candidate.
	fallback := outcome{Node: "n2", Victims: []string{"n2-low"}}
	for _, tc := range []struct {
		name string
		n1   *corev1.Node
		pod  *corev1.Pod
		want outcome
	}{
		{
			name: "NodeResourcesFit: Unschedulable, a candidate",
			n1:   node("n1", "2"),
			pod:  preemptor(10, "1"),
			want: outcome{Node: "n1", Victims: []string{"n1-low"}},
		},
		{
			name: "TaintToleration NoSchedule: UnschedulableAndUnresolvable",
			n1:   st.MakeNode().Name("n1").Capacity("2", "64Gi", "110").Taint("k", "v", corev1.TaintEffectNoSchedule).Obj(),
			pod:  preemptor(10, "1"),
			want: fallback,
		},
		{
			name: "TaintToleration NoExecute: UnschedulableAndUnresolvable",
			n1:   st.MakeNode().Name("n1").Capacity("2", "64Gi", "110").Taint("k", "v", corev1.TaintEffectNoExecute).Obj(),
			pod:  preemptor(10, "1"),
			want: fallback,
		},
		{
			name: "NodeAffinity (nodeSelector): UnschedulableAndUnresolvable",
			n1:   node("n1", "2"),
			pod:  st.MakePod().Name("preemptor").Priority(10).Req("1", "").NodeAffinityNotIn("kubernetes.io/hostname", "n1").Obj(),
			want: fallback,
		},
		{
			name: "NodeUnschedulable (cordoned): UnschedulableAndUnresolvable",
			n1:   st.MakeNode().Name("n1").Capacity("2", "64Gi", "110").Unschedulable().Obj(),
			pod:  preemptor(10, "1"),
			want: fallback,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := []*corev1.Node{tc.n1, node("n2", "2")}
			pods := []*corev1.Pod{running("n1-low", "n1", 1, "2"), running("n2-low", "n2", 5, "2")}
			got := runPreemption(t, nodes, pods, tc.pod)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("preemption (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("NodeName: UnschedulableAndUnresolvable everywhere but the named node", func(t *testing.T) {
		nodes := []*corev1.Node{node("n1", "2"), node("n2", "2")}
		pods := []*corev1.Pod{running("n1-low", "n1", 1, "2"), running("n2-low", "n2", 5, "2")}
		pod := st.MakePod().Name("preemptor").Priority(10).Req("1", "").Obj()
		pod.Spec.NodeName = "n2"
		got := runPreemption(t, nodes, pods, pod)
		if diff := cmp.Diff(fallback, got); diff != "" {
			t.Errorf("preemption (-want +got):\n%s", diff)
		}
	})
}

// TestPreemptionStatuses runs the PostFilter on hand-made filter statuses:
// a node with no status, or with UnschedulableAndUnresolvable, is no
// candidate whatever its pods; a nominated node ruled out for good frees
// the preemptor to preempt elsewhere even while victims terminate there.
func TestPreemptionStatuses(t *testing.T) {
	unsched := framework.NewStatus(framework.Unschedulable, noderesources.ReasonCPU)
	unresolvable := framework.NewStatus(framework.UnschedulableAndUnresolvable, "ruled out")
	nodes := []*corev1.Node{node("n1", "2"), node("n2", "2"), node("n3", "2")}
	pods := []*corev1.Pod{
		running("n1-low", "n1", 1, "2"), running("n2-mid", "n2", 3, "2"), running("n3-high", "n3", 5, "2"),
	}
	for _, tc := range []struct {
		name     string
		pods     []*corev1.Pod
		statuses framework.NodeToStatus
		pod      *corev1.Pod
		want     outcome
	}{
		{
			name:     "every node Unschedulable: the lowest victims",
			statuses: framework.NodeToStatus{"n1": unsched, "n2": unsched, "n3": unsched},
			pod:      preemptor(10, "1"),
			want:     outcome{Node: "n1", Victims: []string{"n1-low"}},
		},
		{
			name:     "a node with no status is no candidate",
			statuses: framework.NodeToStatus{"n2": unsched, "n3": unsched},
			pod:      preemptor(10, "1"),
			want:     outcome{Node: "n2", Victims: []string{"n2-mid"}},
		},
		{
			name:     "an UnschedulableAndUnresolvable node is no candidate",
			statuses: framework.NodeToStatus{"n1": unresolvable, "n2": unresolvable, "n3": unsched},
			pod:      preemptor(10, "1"),
			want:     outcome{Node: "n3", Victims: []string{"n3-high"}},
		},
		{
			name:     "no Unschedulable node at all: no candidates",
			statuses: framework.NodeToStatus{"n1": unresolvable, "n2": unresolvable, "n3": unresolvable},
			pod:      preemptor(10, "1"),
			want:     outcome{Reason: defaultpreemption.ReasonNoCandidates},
		},
		{
			name: "victims the scheduler preempted on the nominated node: wait",
			pods: []*corev1.Pod{st.MakePod().Name("going").Priority(1).Req("2", "").Node("n1").PreemptedByScheduler().Obj(),
				running("n2-mid", "n2", 3, "2")},
			statuses: framework.NodeToStatus{"n1": unsched, "n2": unsched},
			pod:      st.MakePod().Name("preemptor").Priority(10).Req("1", "").NominatedNode("n1").Obj(),
			want:     outcome{Reason: defaultpreemption.ReasonStillWaiting},
		},
		{
			name: "the nominated node ruled out for good: preempt elsewhere",
			pods: []*corev1.Pod{st.MakePod().Name("going").Priority(1).Req("2", "").Node("n1").PreemptedByScheduler().Obj(),
				running("n2-mid", "n2", 3, "2")},
			statuses: framework.NodeToStatus{"n1": unresolvable, "n2": unsched},
			pod:      st.MakePod().Name("preemptor").Priority(10).Req("1", "").NominatedNode("n1").Obj(),
			want:     outcome{Node: "n2", Victims: []string{"n2-mid"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := tc.pods
			if ps == nil {
				ps = pods
			}
			got := postFilterWith(t, nodes, ps, tc.pod, tc.statuses)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("preemption (-want +got):\n%s", diff)
			}
		})
	}
}

// postFilterWith runs PreFilter and then the PostFilter on the given
// statuses, standing in for the filters' verdicts.
func postFilterWith(tb testing.TB, nodes []*corev1.Node, pods []*corev1.Pod, pod *corev1.Pod, statuses framework.NodeToStatus) outcome {
	tb.Helper()
	fw, err := framework.NewFramework([]framework.PluginSpec{
		{Factory: noderesources.NewFit},
		{Factory: defaultpreemption.New(defaultpreemption.Args{})},
	}, framework.Options{Clock: clocktesting.NewFakePassiveClock(testNow)})
	if err != nil {
		tb.Fatal(err)
	}
	fw.SetSnapshot(framework.NewSnapshot(pods, nodes))
	ctx := context.Background()
	state := framework.NewCycleState()
	if st := fw.RunPreFilterPlugins(ctx, state, pod); !st.IsSuccess() {
		tb.Fatalf("PreFilter: %v", st)
	}
	res, st := fw.RunPostFilterPlugins(ctx, state, pod, statuses)
	if !st.IsSuccess() {
		return outcome{Reason: st.Message()}
	}
	out := outcome{Node: res.NominatedNodeName}
	for _, v := range res.Victims {
		out.Victims = append(out.Victims, v.Name)
	}
	sort.Strings(out.Victims)
	return out
}
