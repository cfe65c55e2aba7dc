package podtopologyspread_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsafe/podsafe/scheduler/framework"
	"github.com/podsafe/podsafe/scheduler/plugins/podtopologyspread"
	"github.com/podsafe/podsafe/scheduler/st"
)

// fourNodes is the cluster of seed 004's examples: node1 and node2 in
// zoneA, node3 and node4 in zoneB.
func fourNodes() []*corev1.Node {
	return []*corev1.Node{
		st.MakeNode().Name("node1").Label(zone, "zoneA").Obj(),
		st.MakeNode().Name("node2").Label(zone, "zoneA").Obj(),
		st.MakeNode().Name("node3").Label(zone, "zoneB").Obj(),
		st.MakeNode().Name("node4").Label(zone, "zoneB").Obj(),
	}
}

// threeZones has one node in each of zones a, b and c.
func threeZones() []*corev1.Node {
	return []*corev1.Node{
		st.MakeNode().Name("a1").Label(zone, "a").Obj(),
		st.MakeNode().Name("b1").Label(zone, "b").Obj(),
		st.MakeNode().Name("c1").Label(zone, "c").Obj(),
	}
}

const rack = "example.com/rack"

// rackedZones has a1 (zone a, rack r1), a2 (zone a, no rack) and b1 (zone
// b, rack r2).
func rackedZones() []*corev1.Node {
	return []*corev1.Node{
		st.MakeNode().Name("a1").Label(zone, "a").Label(rack, "r1").Obj(),
		st.MakeNode().Name("a2").Label(zone, "a").Obj(),
		st.MakeNode().Name("b1").Label(zone, "b").Label(rack, "r2").Obj(),
	}
}

// nilSelector leaves a constraint without a labelSelector.
func nilSelector(c *corev1.TopologySpreadConstraint) { c.LabelSelector = nil }

func fooBar(name, node string) *corev1.Pod {
	return st.MakePod().Name(name).Label("foo", "bar").Node(node).Obj()
}

func TestFilter(t *testing.T) {
	dns := corev1.DoNotSchedule
	foo := map[string]string{"foo": "bar"}
	honor, ignore := corev1.NodeInclusionPolicyHonor, corev1.NodeInclusionPolicyIgnore
	seedPods := []*corev1.Pod{fooBar("p1", "node1"), fooBar("p2", "node2"), fooBar("p3", "node3")}
	oneInAB := []*corev1.Pod{fooBar("pa", "a1"), fooBar("pb", "b1")}
	for _, tc := range []struct {
		name  string
		args  podtopologyspread.Args
		nodes []*corev1.Node
		pods  []*corev1.Pod
		pod   *corev1.Pod
		want  filterResult
	}{
		{
			name:  "TS-E: zone maxSkew 1 admits only zoneB",
			nodes: fourNodes(), pods: seedPods,
			pod:  st.MakePod().Name("in").Label("foo", "bar").Spread(1, zone, dns, foo).Obj(),
			want: filterResult{Feasible: []string{"node3", "node4"}},
		},
		{
			name:  "TS-E: zone and node constraints admit only node4",
			nodes: fourNodes(), pods: seedPods,
			pod:  st.MakePod().Name("in").Label("foo", "bar").Spread(1, zone, dns, foo).Spread(1, host, dns, foo).Obj(),
			want: filterResult{Feasible: []string{"node4"}},
		},
		{
			name: "TS-E: conflicting constraints on 3 nodes in 2 zones leave nothing",
			nodes: []*corev1.Node{
				st.MakeNode().Name("node1").Label(zone, "zoneA").Obj(),
				st.MakeNode().Name("node2").Label(zone, "zoneA").Obj(),
				st.MakeNode().Name("node3").Label(zone, "zoneB").Obj(),
			},
			// zoneA holds 3, zoneB 2: the zone rule wants node3, the node rule node2.
			pods: []*corev1.Pod{fooBar("p1", "node1"), fooBar("p2", "node1"), fooBar("p3", "node2"), fooBar("p4", "node3"), fooBar("p5", "node3")},
			pod:  st.MakePod().Name("in").Label("foo", "bar").Spread(1, zone, dns, foo).Spread(1, host, dns, foo).Obj(),
			want: filterResult{},
		},
		{
			name:  "the pod not matching its own selector does not count itself",
			nodes: fourNodes(), pods: seedPods,
			pod:  st.MakePod().Name("in").Spread(1, zone, dns, foo).Obj(),
			want: filterResult{Feasible: []string{"node1", "node2", "node3", "node4"}},
		},
		{
			name:  "TS-2 minDomains above the domain count makes the minimum 0",
			nodes: fourNodes(), pods: []*corev1.Pod{fooBar("p1", "node1"), fooBar("p3", "node3")},
			pod:  st.MakePod().Name("in").Label("foo", "bar").Spread(1, zone, dns, foo, st.MinDomains(3)).Obj(),
			want: filterResult{},
		},
		{
			name:  "TS-2 minDomains met: the real minimum applies",
			nodes: fourNodes(), pods: []*corev1.Pod{fooBar("p1", "node1"), fooBar("p3", "node3")},
			pod:  st.MakePod().Name("in").Label("foo", "bar").Spread(1, zone, dns, foo, st.MinDomains(2)).Obj(),
			want: filterResult{Feasible: []string{"node1", "node2", "node3", "node4"}},
		},
		{
			name:  "TS-1 matchLabelKeys narrow the selector to the pod's value",
			nodes: fourNodes(),
			pods: []*corev1.Pod{
				st.MakePod().Name("old1").Label("foo", "bar").Label("rev", "1").Node("node1").Obj(),
				st.MakePod().Name("old2").Label("foo", "bar").Label("rev", "1").Node("node2").Obj(),
			},
			pod:  st.MakePod().Name("in").Label("foo", "bar").Label("rev", "2").Spread(1, zone, dns, foo, st.MatchLabelKeys("rev")).Obj(),
			want: filterResult{Feasible: []string{"node1", "node2", "node3", "node4"}},
		},
		{
			name:  "TS-1 matchLabelKeys the pod lacks are ignored",
			nodes: fourNodes(),
			pods: []*corev1.Pod{
				st.MakePod().Name("old1").Label("foo", "bar").Label("rev", "1").Node("node1").Obj(),
				st.MakePod().Name("old2").Label("foo", "bar").Label("rev", "1").Node("node2").Obj(),
			},
			pod:  st.MakePod().Name("in").Label("foo", "bar").Spread(1, zone, dns, foo, st.MatchLabelKeys("rev")).Obj(),
			want: filterResult{Feasible: []string{"node3", "node4"}},
		},
		{
			name:  "TS-7 nodeAffinityPolicy Honor leaves zone c out of the minimum",
			nodes: threeZones(), pods: oneInAB,
			pod:  st.MakePod().Name("in").Label("foo", "bar").NodeAffinityNotIn(zone, "c").Spread(1, zone, dns, foo).Obj(),
			want: filterResult{Feasible: []string{"a1", "b1", "c1"}},
		},
		{
			name:  "TS-7 nodeAffinityPolicy Ignore counts zone c",
			nodes: threeZones(), pods: oneInAB,
			pod:  st.MakePod().Name("in").Label("foo", "bar").NodeAffinityNotIn(zone, "c").Spread(1, zone, dns, foo, st.NodeAffinityPolicy(ignore)).Obj(),
			want: filterResult{Feasible: []string{"c1"}},
		},
		{
			name: "TS-8 nodeTaintsPolicy Ignore (default) counts a tainted zone",
			nodes: []*corev1.Node{
				st.MakeNode().Name("a1").Label(zone, "a").Obj(),
				st.MakeNode().Name("b1").Label(zone, "b").Obj(),
				st.MakeNode().Name("c1").Label(zone, "c").Taint("dedicated", "x", corev1.TaintEffectNoSchedule).Obj(),
			},
			pods: oneInAB,
			pod:  st.MakePod().Name("in").Label("foo", "bar").Spread(1, zone, dns, foo).Obj(),
			want: filterResult{Feasible: []string{"c1"}},
		},
		{
			name: "TS-8 nodeTaintsPolicy Honor leaves an untolerated tainted zone out",
			nodes: []*corev1.Node{
				st.MakeNode().Name("a1").Label(zone, "a").Obj(),
				st.MakeNode().Name("b1").Label(zone, "b").Obj(),
				st.MakeNode().Name("c1").Label(zone, "c").Taint("dedicated", "x", corev1.TaintEffectNoSchedule).Obj(),
			},
			pods: oneInAB,
			pod:  st.MakePod().Name("in").Label("foo", "bar").Spread(1, zone, dns, foo, st.NodeTaintsPolicy(honor)).Obj(),
			want: filterResult{Feasible: []string{"a1", "b1", "c1"}},
		},
		{
			name: "TS-8 nodeTaintsPolicy Honor counts a tolerated tainted zone",
			nodes: []*corev1.Node{
				st.MakeNode().Name("a1").Label(zone, "a").Obj(),
				st.MakeNode().Name("b1").Label(zone, "b").Obj(),
				st.MakeNode().Name("c1").Label(zone, "c").Taint("dedicated", "x", corev1.TaintEffectNoSchedule).Obj(),
			},
			pods: oneInAB,
			pod: st.MakePod().Name("in").Label("foo", "bar").Toleration("dedicated", corev1.TaintEffectNoSchedule).
				Spread(1, zone, dns, foo, st.NodeTaintsPolicy(honor)).Obj(),
			want: filterResult{Feasible: []string{"c1"}},
		},
		{
			name:  "TS-6 pods of other namespaces do not count",
			nodes: fourNodes(),
			pods: []*corev1.Pod{
				st.MakePod().Name("x1").Namespace("other").Label("foo", "bar").Node("node1").Obj(),
				st.MakePod().Name("x2").Namespace("other").Label("foo", "bar").Node("node2").Obj(),
			},
			pod:  st.MakePod().Name("in").Label("foo", "bar").Spread(1, zone, dns, foo).Obj(),
			want: filterResult{Feasible: []string{"node1", "node2", "node3", "node4"}},
		},
		{
			name:  "terminating pods do not count",
			nodes: fourNodes(),
			pods: []*corev1.Pod{
				st.MakePod().Name("t1").Label("foo", "bar").Terminating().Node("node1").Obj(),
				st.MakePod().Name("t2").Label("foo", "bar").Terminating().Node("node2").Obj(),
			},
			pod:  st.MakePod().Name("in").Label("foo", "bar").Spread(1, zone, dns, foo).Obj(),
			want: filterResult{Feasible: []string{"node1", "node2", "node3", "node4"}},
		},
		{
			name: "TS-5 a node without the key is rejected for good and its pods do not count",
			nodes: []*corev1.Node{
				st.MakeNode().Name("a1").Label(zone, "a").Obj(),
				st.MakeNode().Name("b1").Label(zone, "b").Obj(),
				st.MakeNode().Name("bare").Obj(),
			},
			pods: []*corev1.Pod{fooBar("pa", "a1"), fooBar("x1", "bare"), fooBar("x2", "bare")},
			pod:  st.MakePod().Name("in").Label("foo", "bar").Spread(1, zone, dns, foo).Obj(),
			want: filterResult{Feasible: []string{"b1"}, Unresolvable: []string{"bare"}},
		},
		{
			// Oracle seed 77: kube-scheduler counts no pod for an empty
			// selector, yet the pod matches it itself.
			name:  "an empty labelSelector counts no pod, but the pod matches it",
			nodes: threeZones(),
			pods:  []*corev1.Pod{st.MakePod().Name("x1").Node("a1").Obj(), st.MakePod().Name("x2").Node("a1").Obj(), fooBar("x3", "a1")},
			pod:   st.MakePod().Name("in").Spread(1, zone, dns, map[string]string{}).Obj(),
			want:  filterResult{Feasible: []string{"a1", "b1", "c1"}},
		},
		{
			name:  "an empty labelSelector with a matchLabelKeys value counts the pods with that value",
			nodes: threeZones(),
			pods: []*corev1.Pod{
				st.MakePod().Name("x1").Label("rev", "2").Node("a1").Obj(),
				st.MakePod().Name("x2").Label("rev", "1").Node("b1").Obj(),
			},
			pod:  st.MakePod().Name("in").Label("rev", "2").Spread(1, zone, dns, map[string]string{}, st.MatchLabelKeys("rev")).Obj(),
			want: filterResult{Feasible: []string{"b1", "c1"}},
		},
		{
			name:  "a nil labelSelector counts no pod and the pod does not match it",
			nodes: threeZones(), pods: []*corev1.Pod{fooBar("x1", "a1"), fooBar("x2", "a1")},
			pod:  st.MakePod().Name("in").Label("foo", "bar").Spread(1, zone, dns, nil, nilSelector).Obj(),
			want: filterResult{Feasible: []string{"a1", "b1", "c1"}},
		},
		{
			// The first constraint that fails decides: a2 fails the zone
			// skew before the rack constraint finds its key missing.
			name:  "a skew failure before a missing key is Unschedulable",
			nodes: rackedZones(), pods: []*corev1.Pod{fooBar("x1", "a1"), fooBar("x2", "a1")},
			pod:  st.MakePod().Name("in").Label("foo", "bar").Spread(1, zone, dns, foo).Spread(1, rack, dns, foo).Obj(),
			want: filterResult{Feasible: []string{"b1"}},
		},
		{
			name:  "a missing key before a skew failure is UnschedulableAndUnresolvable",
			nodes: rackedZones(), pods: []*corev1.Pod{fooBar("x1", "a1"), fooBar("x2", "a1")},
			pod:  st.MakePod().Name("in").Label("foo", "bar").Spread(1, rack, dns, foo).Spread(1, zone, dns, foo).Obj(),
			want: filterResult{Feasible: []string{"b1"}, Unresolvable: []string{"a2"}},
		},
		{
			name:  "ScheduleAnyway constraints do not filter",
			nodes: fourNodes(), pods: seedPods,
			pod:  st.MakePod().Name("in").Label("foo", "bar").Spread(1, zone, corev1.ScheduleAnyway, foo).Obj(),
			want: filterResult{Skipped: true, Feasible: []string{"node1", "node2", "node3", "node4"}},
		},
		{
			name: "TS-9 a List default that is DoNotSchedule filters an owned pod",
			args: podtopologyspread.Args{DefaultingType: podtopologyspread.ListDefaulting,
				DefaultConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: zone, WhenUnsatisfiable: dns}}},
			nodes: fourNodes(), pods: seedPods,
			pod:  st.MakePod().Name("in").Label("foo", "bar").OwnedBy("ReplicaSet", "rs").Obj(),
			want: filterResult{Feasible: []string{"node3", "node4"}},
		},
		{
			name: "TS-9 defaults do not apply to a pod without an owner",
			args: podtopologyspread.Args{DefaultingType: podtopologyspread.ListDefaulting,
				DefaultConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: zone, WhenUnsatisfiable: dns}}},
			nodes: fourNodes(), pods: seedPods,
			pod:  st.MakePod().Name("in").Label("foo", "bar").Obj(),
			want: filterResult{Skipped: true, Feasible: []string{"node1", "node2", "node3", "node4"}},
		},
		{
			name: "TS-9 defaults do not apply to a pod with constraints of its own",
			args: podtopologyspread.Args{DefaultingType: podtopologyspread.ListDefaulting,
				DefaultConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: zone, WhenUnsatisfiable: dns}}},
			nodes: fourNodes(), pods: seedPods,
			pod: st.MakePod().Name("in").Label("foo", "bar").OwnedBy("ReplicaSet", "rs").
				Spread(1, zone, corev1.ScheduleAnyway, foo).Obj(),
			want: filterResult{Skipped: true, Feasible: []string{"node1", "node2", "node3", "node4"}},
		},
		{
			name:  "TS-9 system defaults are preferences and never filter",
			nodes: fourNodes(), pods: seedPods,
			pod:  st.MakePod().Name("in").Label("foo", "bar").OwnedBy("ReplicaSet", "rs").Obj(),
			want: filterResult{Skipped: true, Feasible: []string{"node1", "node2", "node3", "node4"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pl, snap := newPlugin(t, tc.args, tc.nodes, tc.pods)
			got := runFilter(t, pl, snap, tc.pod)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("filter result (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFilterAfterDryRunRemoval checks what preemption's dry run sees: as in
// kube-scheduler, removing a pod that matches the selector lowers its
// domain's count even when the pod was being deleted and so never counted.
func TestFilterAfterDryRunRemoval(t *testing.T) {
	ctx := context.Background()
	foo := map[string]string{"foo": "bar"}
	nodes := []*corev1.Node{
		st.MakeNode().Name("a1").Label(zone, "a").Obj(),
		st.MakeNode().Name("b1").Label(zone, "b").Obj(),
	}
	running := fooBar("running", "a1")
	deleting := st.MakePod().Name("deleting").Label("foo", "bar").Terminating().Node("a1").Obj()
	pod := st.MakePod().Name("in").Label("foo", "bar").Spread(1, zone, corev1.DoNotSchedule, foo).Obj()
	pl, snap := newPlugin(t, podtopologyspread.Args{}, nodes, []*corev1.Pod{running, deleting})
	state := framework.NewCycleState()
	if st := pl.PreFilter(ctx, state, pod, snap.List()); !st.IsSuccess() {
		t.Fatalf("PreFilter: %v", st)
	}
	a1 := snap.Get("a1")
	if got := pl.Filter(ctx, state, pod, a1).Code(); got != framework.Unschedulable {
		t.Fatalf("Filter on a1 before the dry run = %v, want Unschedulable (zone a holds 1, zone b 0)", got)
	}
	dry, ni := state.Clone(), a1.Clone()
	ni.RemovePod(deleting.UID)
	if st := pl.RemovePod(ctx, dry, pod, framework.NewPodInfo(deleting), ni); !st.IsSuccess() {
		t.Fatalf("RemovePod: %v", st)
	}
	if got := pl.Filter(ctx, dry, pod, ni).Code(); got != framework.Success {
		t.Errorf("Filter on a1 after removing the deleting pod = %v, want Success", got)
	}
	if got := pl.Filter(ctx, state, pod, a1).Code(); got != framework.Unschedulable {
		t.Errorf("Filter on a1 in the original state = %v, want Unschedulable (the dry run works on a clone)", got)
	}
}
