package podtopologyspread_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsafe/podsafe/scheduler/plugins/podtopologyspread"
	"github.com/podsafe/podsafe/scheduler/st"
)

func TestScore(t *testing.T) {
	anyway := corev1.ScheduleAnyway
	foo := map[string]string{"foo": "bar"}
	threeHosts := func() []*corev1.Node {
		return []*corev1.Node{st.MakeNode().Name("n1").Obj(), st.MakeNode().Name("n2").Obj(), st.MakeNode().Name("n3").Obj()}
	}
	seedPods := []*corev1.Pod{fooBar("p1", "node1"), fooBar("p2", "node2"), fooBar("p3", "node3")}
	for _, tc := range []struct {
		name  string
		args  podtopologyspread.Args
		nodes []*corev1.Node
		pods  []*corev1.Pod
		pod   *corev1.Pod
		// want ranks the nodes best first; nil means PreScore skipped.
		want []string
	}{
		{
			name:  "TS-3 hostname: fewer matching pods rank higher",
			nodes: threeHosts(),
			pods:  []*corev1.Pod{fooBar("a", "n1"), fooBar("b", "n1"), fooBar("c", "n3")},
			pod:   st.MakePod().Name("in").Label("foo", "bar").Spread(1, host, anyway, foo).Obj(),
			want:  []string{"n2", "n3", "n1"},
		},
		{
			name:  "TS-3 zone: the emptier zone ranks higher",
			nodes: fourNodes(), pods: seedPods,
			pod:  st.MakePod().Name("in").Label("foo", "bar").Spread(1, zone, anyway, foo).Obj(),
			want: []string{"node3", "node4", "node1", "node2"},
		},
		{
			name: "TS-5 a node without the key ranks last",
			nodes: []*corev1.Node{
				st.MakeNode().Name("a1").Label(zone, "a").Obj(),
				st.MakeNode().Name("bare").Obj(),
			},
			pods: []*corev1.Pod{fooBar("pa", "a1")},
			pod:  st.MakePod().Name("in").Label("foo", "bar").Spread(1, zone, anyway, foo).Obj(),
			want: []string{"a1", "bare"},
		},
		{
			name:  "TS-6 pods of other namespaces do not count",
			nodes: threeHosts()[:2],
			pods: []*corev1.Pod{
				st.MakePod().Name("x1").Namespace("other").Label("foo", "bar").Node("n1").Obj(),
				st.MakePod().Name("x2").Namespace("other").Label("foo", "bar").Node("n1").Obj(),
				fooBar("mine", "n2"),
			},
			pod:  st.MakePod().Name("in").Label("foo", "bar").Spread(1, host, anyway, foo).Obj(),
			want: []string{"n1", "n2"},
		},
		{
			name:  "DoNotSchedule constraints do not score",
			nodes: fourNodes(), pods: seedPods,
			pod: st.MakePod().Name("in").Label("foo", "bar").
				Spread(1, zone, corev1.DoNotSchedule, foo).Obj(),
		},
		{
			name:  "TS-9 system defaults spread a ReplicaSet's pods by node and zone",
			nodes: fourNodes(), pods: seedPods,
			pod:  st.MakePod().Name("in").Label("foo", "bar").OwnedBy("ReplicaSet", "rs").Obj(),
			want: []string{"node4", "node3", "node1", "node2"},
		},
		{
			name:  "TS-9 system defaults apply to StatefulSet pods too",
			nodes: fourNodes(), pods: seedPods,
			pod:  st.MakePod().Name("in").Label("foo", "bar").OwnedBy("StatefulSet", "ss").Obj(),
			want: []string{"node4", "node3", "node1", "node2"},
		},
		{
			name:  "TS-9 defaults skip a pod without an owner",
			nodes: fourNodes(), pods: seedPods,
			pod: st.MakePod().Name("in").Label("foo", "bar").Obj(),
		},
		{
			name:  "TS-9 defaults skip a pod owned by a kind that is not a workload",
			nodes: fourNodes(), pods: seedPods,
			pod: st.MakePod().Name("in").Label("foo", "bar").OwnedBy("Job", "j").Obj(),
		},
		{
			name:  "TS-9 defaults skip a pod with constraints of its own",
			nodes: fourNodes(), pods: seedPods,
			pod: st.MakePod().Name("in").Label("foo", "bar").OwnedBy("ReplicaSet", "rs").
				Spread(1, zone, corev1.DoNotSchedule, foo).Obj(),
		},
		{
			name:  "TS-9 an empty List disables defaulting",
			args:  podtopologyspread.Args{DefaultingType: podtopologyspread.ListDefaulting},
			nodes: fourNodes(), pods: seedPods,
			pod: st.MakePod().Name("in").Label("foo", "bar").OwnedBy("ReplicaSet", "rs").Obj(),
		},
		{
			name: "TS-9 a List replaces the built-in defaults",
			args: podtopologyspread.Args{DefaultingType: podtopologyspread.ListDefaulting,
				DefaultConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: host, WhenUnsatisfiable: anyway}}},
			nodes: threeHosts(),
			pods:  []*corev1.Pod{fooBar("a", "n1"), fooBar("b", "n1"), fooBar("c", "n3")},
			pod:   st.MakePod().Name("in").Label("foo", "bar").OwnedBy("ReplicaSet", "rs").Obj(),
			want:  []string{"n2", "n3", "n1"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pl, snap := newPlugin(t, tc.args, tc.nodes, tc.pods)
			got := runScore(t, pl, snap, tc.pod)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ranking (-want +got):\n%s", diff)
			}
		})
	}
}

// TestScoreValues pins normalized scores to kube-scheduler's: each
// constraint adds count × weight + maxSkew − 1.
func TestScoreValues(t *testing.T) {
	anyway := corev1.ScheduleAnyway
	for _, tc := range []struct {
		name  string
		args  podtopologyspread.Args
		nodes []*corev1.Node
		pods  []*corev1.Pod
		pod   *corev1.Pod
		want  map[string]int64
	}{
		{
			// Oracle seed 49: zone weight ln 4; n0 scores 0 + 2, n1
			// 1.39 + 2 = 3, so n1 gets 100 × 2 / 3.
			name: "maxSkew − 1 is added once, not weighted",
			nodes: []*corev1.Node{
				st.MakeNode().Name("n0").Label(zone, "zc").Obj(),
				st.MakeNode().Name("n1").Label(zone, "za").Obj(),
			},
			pods: []*corev1.Pod{st.MakePod().Name("p0").Label("app", "web").Node("n1").Obj()},
			pod: st.MakePod().Name("in").Spread(1, zone, anyway, map[string]string{"app": "web"}).
				Spread(3, zone, anyway, map[string]string{"app": "db"}).Obj(),
			want: map[string]int64{"n0": 100, "n1": 66},
		},
		{
			name:  "an empty labelSelector counts no pod",
			nodes: []*corev1.Node{st.MakeNode().Name("n0").Obj(), st.MakeNode().Name("n1").Obj()},
			pods:  []*corev1.Pod{fooBar("p0", "n1"), st.MakePod().Name("p1").Node("n1").Obj()},
			pod:   st.MakePod().Name("in").Spread(1, host, anyway, map[string]string{}).Obj(),
			want:  map[string]int64{"n0": 100, "n1": 100},
		},
		{
			// With the built-in defaults a node without a zone still gets
			// hostname spreading: n1 scores 1.39 + 2 (host) + 1.39 + 4
			// (zone a) = 9, n2 0 + 2 (host; no zone, no zone term) = 2.
			name: "TS-9 system defaults score a node without a zone by hostname",
			nodes: []*corev1.Node{
				st.MakeNode().Name("n1").Label(zone, "a").Obj(),
				st.MakeNode().Name("n2").Obj(),
			},
			pods: []*corev1.Pod{fooBar("p", "n1")},
			pod:  st.MakePod().Name("in").Label("foo", "bar").OwnedBy("ReplicaSet", "rs").Obj(),
			want: map[string]int64{"n1": 22, "n2": 100},
		},
		{
			name: "a node without a key of the pod's own constraints scores 0",
			nodes: []*corev1.Node{
				st.MakeNode().Name("n1").Label(zone, "a").Obj(),
				st.MakeNode().Name("n2").Obj(),
			},
			pods: []*corev1.Pod{fooBar("p", "n1")},
			pod: st.MakePod().Name("in").Label("foo", "bar").Spread(3, host, anyway, map[string]string{"foo": "bar"}).
				Spread(5, zone, anyway, map[string]string{"foo": "bar"}).Obj(),
			want: map[string]int64{"n1": 100, "n2": 0},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pl, snap := newPlugin(t, tc.args, tc.nodes, tc.pods)
			got := runScores(t, pl, snap, tc.pod)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("scores (-want +got):\n%s", diff)
			}
		})
	}
}

func TestArgsValidate(t *testing.T) {
	one := int32(1)
	for _, tc := range []struct {
		name    string
		args    podtopologyspread.Args
		wantErr bool
	}{
		{name: "zero value", args: podtopologyspread.Args{}},
		{name: "unknown defaulting type", args: podtopologyspread.Args{DefaultingType: "Zone"}, wantErr: true},
		{name: "maxSkew 0", args: podtopologyspread.Args{DefaultingType: podtopologyspread.ListDefaulting,
			DefaultConstraints: []corev1.TopologySpreadConstraint{{TopologyKey: zone}}}, wantErr: true},
		{name: "minDomains with ScheduleAnyway", args: podtopologyspread.Args{DefaultingType: podtopologyspread.ListDefaulting,
			DefaultConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: zone, MinDomains: &one,
				WhenUnsatisfiable: corev1.ScheduleAnyway}}}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.args.Validate(); (err != nil) != tc.wantErr {
				t.Errorf("Validate() = %v, want error %v", err, tc.wantErr)
			}
		})
	}
}
