package scheduler

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsafe/podsafe/scheduler/plugins/podtopologyspread"
	"github.com/podsafe/podsafe/scheduler/st"
)

// TestFilters is the table test of every filter plugin, through the default
// profile.
func TestFilters(t *testing.T) {
	dns, anyway := corev1.DoNotSchedule, corev1.ScheduleAnyway
	honor, ignore := corev1.NodeInclusionPolicyHonor, corev1.NodeInclusionPolicyIgnore
	twoZones := func() []*corev1.Node {
		return []*corev1.Node{
			st.MakeNode().Name("a1").Label(zone, "a").Obj(),
			st.MakeNode().Name("a2").Label(zone, "a").Obj(),
			st.MakeNode().Name("b1").Label(zone, "b").Obj(),
		}
	}
	for _, tc := range []struct {
		name  string
		cfg   Config
		nodes []*corev1.Node
		pods  []*corev1.Pod
		pod   *corev1.Pod
		want  []string
	}{
		{
			name:  "NodeResourcesFit: cpu",
			nodes: []*corev1.Node{st.MakeNode().Name("n1").Capacity("2", "4Gi", "10").Obj(), st.MakeNode().Name("n2").Capacity("4", "4Gi", "10").Obj()},
			pods:  []*corev1.Pod{st.MakePod().Name("x").Req("1", "").Node("n1").Obj()},
			pod:   st.MakePod().Name("p").Req("2", "").Obj(),
			want:  []string{"n2"},
		},
		{
			name:  "NodeResourcesFit: memory and pod count",
			nodes: []*corev1.Node{st.MakeNode().Name("n1").Capacity("8", "1Gi", "10").Obj(), st.MakeNode().Name("n2").Capacity("8", "8Gi", "1").Obj(), st.MakeNode().Name("n3").Capacity("8", "8Gi", "2").Obj()},
			pods:  []*corev1.Pod{st.MakePod().Name("x").Node("n2").Obj(), st.MakePod().Name("y").Node("n3").Obj()},
			pod:   st.MakePod().Name("p").Req("", "2Gi").Obj(),
			want:  []string{"n3"},
		},
		{
			name:  "NodeName",
			nodes: twoZones(),
			pod:   st.MakePod().Name("p").Node("b1").Obj(),
			want:  []string{"b1"},
		},
		{
			name:  "NodeUnschedulable",
			nodes: []*corev1.Node{st.MakeNode().Name("n1").Unschedulable().Obj(), st.MakeNode().Name("n2").Obj()},
			pod:   st.MakePod().Name("p").Obj(),
			want:  []string{"n2"},
		},
		{
			name:  "NodeAffinity: nodeSelector",
			nodes: twoZones(),
			pod:   st.MakePod().Name("p").NodeSelector(zone, "a").Obj(),
			want:  []string{"a1", "a2"},
		},
		{
			name:  "NodeAffinity: required In",
			nodes: twoZones(),
			pod:   st.MakePod().Name("p").NodeAffinityIn(zone, "b").Obj(),
			want:  []string{"b1"},
		},
		{
			name:  "TaintToleration: untolerated NoSchedule excluded, PreferNoSchedule ignored",
			nodes: []*corev1.Node{st.MakeNode().Name("n1").Taint("k", "v", corev1.TaintEffectNoSchedule).Obj(), st.MakeNode().Name("n2").Taint("k", "v", corev1.TaintEffectPreferNoSchedule).Obj()},
			pod:   st.MakePod().Name("p").Obj(),
			want:  []string{"n2"},
		},
		{
			name:  "TaintToleration: tolerated",
			nodes: []*corev1.Node{st.MakeNode().Name("n1").Taint("k", "v", corev1.TaintEffectNoSchedule).Obj()},
			pod:   st.MakePod().Name("p").Toleration("k", corev1.TaintEffectNoSchedule).Obj(),
			want:  []string{"n1"},
		},
		{
			name:  "TS-5: nodes missing the key are never chosen and their pods not counted",
			nodes: append(twoZones(), st.MakeNode().Name("nokey").Obj()),
			pods:  fooPods("nokey", "nokey", "a1"),
			pod:   st.MakePod().Name("p").Label("foo", "bar").Spread(1, zone, dns, fooBar).Obj(),
			want:  []string{"b1"},
		},
		{
			name:  "TS-6: pods of other namespaces do not count",
			nodes: twoZones(),
			pods:  []*corev1.Pod{st.MakePod().Name("o1").Namespace("other").Label("foo", "bar").Node("a1").Obj(), st.MakePod().Name("o2").Namespace("other").Label("foo", "bar").Node("a2").Obj()},
			pod:   st.MakePod().Name("p").Label("foo", "bar").Spread(1, zone, dns, fooBar).Obj(),
			want:  []string{"a1", "a2", "b1"},
		},
		{
			name:  "TS-2: minDomains above the domain count makes the global minimum 0",
			nodes: twoZones(),
			pods:  fooPods("a1", "b1"),
			pod:   st.MakePod().Name("p").Label("foo", "bar").Spread(1, zone, dns, fooBar, st.MinDomains(3)).Obj(),
			want:  nil,
		},
		{
			name:  "TS-2: minDomains met has no effect",
			nodes: twoZones(),
			pods:  fooPods("a1", "b1"),
			pod:   st.MakePod().Name("p").Label("foo", "bar").Spread(1, zone, dns, fooBar, st.MinDomains(2)).Obj(),
			want:  []string{"a1", "a2", "b1"},
		},
		{
			name:  "matchLabelKeys narrows counting to the pod's own value",
			nodes: twoZones(),
			pods: []*corev1.Pod{
				st.MakePod().Name("old1").Label("foo", "bar").Label("rev", "1").Node("b1").Obj(),
				st.MakePod().Name("old2").Label("foo", "bar").Label("rev", "1").Node("b1").Obj(),
				st.MakePod().Name("new1").Label("foo", "bar").Label("rev", "2").Node("a1").Obj(),
			},
			pod:  st.MakePod().Name("p").Label("foo", "bar").Label("rev", "2").Spread(1, zone, dns, fooBar, st.MatchLabelKeys("rev")).Obj(),
			want: []string{"b1"},
		},
		{
			name:  "TS-7: nodeAffinityPolicy Honor excludes zone b from the minimum",
			nodes: twoZones(),
			pods:  fooPods("a1"),
			pod:   st.MakePod().Name("p").Label("foo", "bar").NodeSelector(zone, "a").Spread(1, zone, dns, fooBar, st.NodeAffinityPolicy(honor)).Obj(),
			want:  []string{"a1", "a2"},
		},
		{
			name:  "TS-7: nodeAffinityPolicy Ignore keeps zone b at 0",
			nodes: twoZones(),
			pods:  fooPods("a1"),
			pod:   st.MakePod().Name("p").Label("foo", "bar").NodeSelector(zone, "a").Spread(1, zone, dns, fooBar, st.NodeAffinityPolicy(ignore)).Obj(),
			want:  nil,
		},
		{
			name: "TS-8: nodeTaintsPolicy Honor drops the tainted empty zone",
			nodes: []*corev1.Node{
				st.MakeNode().Name("a1").Label(zone, "a").Obj(),
				st.MakeNode().Name("b1").Label(zone, "b").Taint("t", "", corev1.TaintEffectNoSchedule).Obj(),
			},
			pods: fooPods("a1"),
			pod:  st.MakePod().Name("p").Label("foo", "bar").Spread(1, zone, dns, fooBar, st.NodeTaintsPolicy(honor)).Obj(),
			want: []string{"a1"},
		},
		{
			name: "TS-8, TS-11: nodeTaintsPolicy Ignore counts the tainted zone",
			nodes: []*corev1.Node{
				st.MakeNode().Name("a1").Label(zone, "a").Obj(),
				st.MakeNode().Name("b1").Label(zone, "b").Taint("t", "", corev1.TaintEffectNoSchedule).Obj(),
			},
			pods: fooPods("a1"),
			pod:  st.MakePod().Name("p").Label("foo", "bar").Spread(1, zone, dns, fooBar).Obj(),
			want: nil,
		},
		{
			name:  "TS-3: ScheduleAnyway never filters",
			nodes: twoZones(),
			pods:  fooPods("a1", "a1", "a2"),
			pod:   st.MakePod().Name("p").Label("foo", "bar").Spread(1, zone, anyway, fooBar).Obj(),
			want:  []string{"a1", "a2", "b1"},
		},
		{
			name:  "TS-9: list defaults with DoNotSchedule apply to owned pods",
			cfg:   Config{PodTopologySpread: podtopologyspread.Args{DefaultingType: podtopologyspread.ListDefaulting, DefaultConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: zone, WhenUnsatisfiable: dns}}}},
			nodes: twoZones(),
			pods:  fooPods("a1"),
			pod:   st.MakePod().Name("p").Label("foo", "bar").OwnedBy("ReplicaSet", "rs").Obj(),
			want:  []string{"b1"},
		},
		{
			name:  "TS-9: defaults do not apply to pods without an owner",
			cfg:   Config{PodTopologySpread: podtopologyspread.Args{DefaultingType: podtopologyspread.ListDefaulting, DefaultConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: zone, WhenUnsatisfiable: dns}}}},
			nodes: twoZones(),
			pods:  fooPods("a1"),
			pod:   st.MakePod().Name("p").Label("foo", "bar").Obj(),
			want:  []string{"a1", "a2", "b1"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fw := newTestFramework(t, tc.cfg, tc.nodes, tc.pods)
			if diff := cmp.Diff(tc.want, feasible(t, fw, tc.pod)); diff != "" {
				t.Errorf("feasible nodes (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSpreadScoring checks ScheduleAnyway prefers the emptier domain (TS-3)
// and that the built-in defaults spread owned pods (TS-9).
func TestSpreadScoring(t *testing.T) {
	nodes := func() []*corev1.Node {
		return []*corev1.Node{
			st.MakeNode().Name("a1").Label(zone, "a").Label(podtopologyspread.LabelZone, "a").Obj(),
			st.MakeNode().Name("b1").Label(zone, "b").Label(podtopologyspread.LabelZone, "b").Obj(),
		}
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		pod  *corev1.Pod
		want string
	}{
		{"own ScheduleAnyway constraint", Config{}, st.MakePod().Name("p").Label("foo", "bar").Spread(1, zone, corev1.ScheduleAnyway, fooBar).Obj(), "b1"},
		{"system defaults for a ReplicaSet pod", Config{}, st.MakePod().Name("p").Label("foo", "bar").OwnedBy("ReplicaSet", "rs").Obj(), "b1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// a1 holds matching pods but is otherwise emptier, so resource
			// scoring alone would pick it.
			pods := fooPods("a1", "a1", "a1")
			for _, p := range pods {
				p.OwnerReferences = tc.pod.OwnerReferences
			}
			pods = append(pods, st.MakePod().Name("big").Req("4", "16Gi").Node("b1").Obj())
			fw := newTestFramework(t, tc.cfg, nodes(), pods)
			got, err := scheduleIn(t, fw, tc.pod)
			if err != nil || got != tc.want {
				t.Errorf("scheduled to %q (err %v), want %s", got, err, tc.want)
			}
		})
	}
}
