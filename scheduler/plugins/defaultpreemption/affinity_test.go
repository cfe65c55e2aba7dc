package defaultpreemption_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsafe/podsafe/scheduler/plugins/defaultpreemption"
	"github.com/podsafe/podsafe/scheduler/st"
)

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
