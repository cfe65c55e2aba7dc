package interpodaffinity_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsafe/podsafe/scheduler/framework"
	"github.com/podsafe/podsafe/scheduler/plugins/interpodaffinity"
	"github.com/podsafe/podsafe/scheduler/st"
)

// runScore scores every node and returns the normalized scores by node, or
// nil if PreScore skipped.
func runScore(tb testing.TB, fw *framework.Framework, pod *corev1.Pod) map[string]int64 {
	tb.Helper()
	state := framework.NewCycleState()
	scores, st := fw.RunScorePlugins(context.Background(), state, pod, fw.Snapshot().List())
	if !st.IsSuccess() {
		tb.Fatalf("scoring: %v", st)
	}
	if state.SkipScore(interpodaffinity.Name) {
		return nil
	}
	out := map[string]int64{}
	for _, s := range scores {
		if s.Score < 0 || s.Score > framework.MaxNodeScore {
			tb.Fatalf("score of %s is %d, outside 0..%d", s.Name, s.Score, framework.MaxNodeScore)
		}
		out[s.Name] = s.Score
	}
	return out
}

func TestScore(t *testing.T) {
	db := map[string]string{"app": "db"}
	web := map[string]string{"app": "web"}
	for _, tc := range []struct {
		name string
		pods []*corev1.Pod
		pod  *corev1.Pod
		// want is every node's normalized score; nil means PreScore skipped.
		want map[string]int64
	}{
		{
			name: "no terms on either side: skipped",
			pods: []*corev1.Pod{app("d1", "db", "n1")},
			pod:  st.MakePod().Name("in").Label("app", "web").Obj(),
		},
		{
			name: "preferred affinity favours the zone holding a matching pod",
			pods: []*corev1.Pod{app("d1", "db", "n1")},
			pod:  st.MakePod().Name("in").PreferredPodAffinity(10, zone, db).Obj(),
			want: map[string]int64{"n1": 100, "n2": 100, "n3": 0, "n4": 0},
		},
		{
			name: "preferred anti-affinity disfavours the node holding a matching pod",
			pods: []*corev1.Pod{app("w2", "web", "n2")},
			pod:  st.MakePod().Name("in").Label("app", "web").PreferredPodAntiAffinity(10, host, web).Obj(),
			want: map[string]int64{"n1": 100, "n2": 0, "n3": 100, "n4": 100},
		},
		{
			name: "weights add up: more matching pods, higher score",
			pods: []*corev1.Pod{app("d1", "db", "n1"), app("d3", "db", "n3"), app("d4", "db", "n4")},
			pod:  st.MakePod().Name("in").PreferredPodAffinity(10, zone, db).PreferredPodAffinity(5, host, db).Obj(),
			want: map[string]int64{"n1": 33, "n2": 0, "n3": 100, "n4": 100},
		},
		{
			name: "an existing pod's preferred affinity draws the incoming pod to it",
			pods: []*corev1.Pod{st.MakePod().Name("fan").PreferredPodAffinity(20, zone, web).Node("n4").Obj()},
			pod:  st.MakePod().Name("in").Label("app", "web").Obj(),
			want: map[string]int64{"n1": 0, "n2": 0, "n3": 100, "n4": 100},
		},
		{
			name: "an existing pod's preferred anti-affinity pushes the incoming pod away",
			pods: []*corev1.Pod{st.MakePod().Name("shy").PreferredPodAntiAffinity(20, host, web).Node("n1").Obj()},
			pod:  st.MakePod().Name("in").Label("app", "web").Obj(),
			want: map[string]int64{"n1": 0, "n2": 100, "n3": 100, "n4": 100},
		},
		{
			name: "an existing pod's required affinity draws the incoming pod to it too",
			pods: []*corev1.Pod{st.MakePod().Name("needy").PodAffinity(zone, web).Node("n2").Obj()},
			pod:  st.MakePod().Name("in").Label("app", "web").Obj(),
			want: map[string]int64{"n1": 100, "n2": 100, "n3": 0, "n4": 0},
		},
		{
			name: "terms that match nothing leave every node equal",
			pods: []*corev1.Pod{app("w1", "web", "n1")},
			pod:  st.MakePod().Name("in").PreferredPodAffinity(10, zone, db).Obj(),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fw := newFramework(t, fourNodes(), tc.pods, nil)
			if diff := cmp.Diff(tc.want, runScore(t, fw, tc.pod)); diff != "" {
				t.Errorf("scores (-want +got):\n%s", diff)
			}
		})
	}
}
