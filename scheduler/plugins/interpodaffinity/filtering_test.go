package interpodaffinity_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/podsafe/podsafe/scheduler/framework"
	"github.com/podsafe/podsafe/scheduler/st"
)

func TestFilter(t *testing.T) {
	db := map[string]string{"app": "db"}
	web := map[string]string{"app": "web"}
	bare := st.MakeNode().Name("bare").Obj()
	for _, tc := range []struct {
		name     string
		nodes    []*corev1.Node
		pods     []*corev1.Pod
		nsLabels map[string]labels.Set
		pod      *corev1.Pod
		want     filterResult
	}{
		{
			name:  "a pod without terms, and no pod repelling it, is skipped",
			nodes: fourNodes(),
			pods:  []*corev1.Pod{app("d1", "db", "n1")},
			pod:   st.MakePod().Name("in").Label("app", "web").Obj(),
			want:  filterResult{Skipped: true, Feasible: []string{"n1", "n2", "n3", "n4"}},
		},
		{
			name:  "required affinity admits the zone holding a matching pod only, for good",
			nodes: fourNodes(),
			pods:  []*corev1.Pod{app("d1", "db", "n1"), app("w3", "web", "n3")},
			pod:   st.MakePod().Name("in").PodAffinity(zone, db).Obj(),
			want:  filterResult{Feasible: []string{"n1", "n2"}, Unresolvable: []string{"n3", "n4"}},
		},
		{
			name:  "required affinity on hostname admits the node holding the pod",
			nodes: fourNodes(),
			pods:  []*corev1.Pod{app("d3", "db", "n3")},
			pod:   st.MakePod().Name("in").PodAffinity(host, db).Obj(),
			want:  filterResult{Feasible: []string{"n3"}, Unresolvable: []string{"n1", "n2", "n4"}},
		},
		{
			name:  "a node without the topology key never satisfies affinity",
			nodes: append(fourNodes(), bare),
			pods:  []*corev1.Pod{app("d1", "db", "n1"), app("d5", "db", "bare")},
			pod:   st.MakePod().Name("in").PodAffinity(zone, db).Obj(),
			want:  filterResult{Feasible: []string{"n1", "n2"}, Unresolvable: []string{"bare", "n3", "n4"}},
		},
		{
			name:  "the first pod of a self-attracting group may go anywhere with the key",
			nodes: append(fourNodes(), bare),
			pods:  []*corev1.Pod{app("d1", "db", "n1")},
			pod:   st.MakePod().Name("in").Label("app", "web").PodAffinity(zone, web).Obj(),
			want:  filterResult{Feasible: []string{"n1", "n2", "n3", "n4"}, Unresolvable: []string{"bare"}},
		},
		{
			name:  "a pod attracted by pods that do not exist, and not by itself, fits nowhere",
			nodes: fourNodes(),
			pods:  []*corev1.Pod{app("w1", "web", "n1")},
			pod:   st.MakePod().Name("in").Label("app", "web").PodAffinity(zone, db).Obj(),
			want:  filterResult{Unresolvable: []string{"n1", "n2", "n3", "n4"}},
		},
		{
			name:  "several affinity terms must all hold for one pod",
			nodes: fourNodes(),
			pods: []*corev1.Pod{
				app("d1", "db", "n1"),
				st.MakePod().Name("c3").Label("tier", "cache").Node("n3").Obj(),
				st.MakePod().Name("dc4").Label("app", "db").Label("tier", "cache").Node("n4").Obj(),
			},
			pod:  st.MakePod().Name("in").PodAffinity(zone, db).PodAffinity(zone, map[string]string{"tier": "cache"}).Obj(),
			want: filterResult{Feasible: []string{"n3", "n4"}, Unresolvable: []string{"n1", "n2"}},
		},
		{
			name:  "required anti-affinity keeps the pod out of the zone, preemption may help",
			nodes: fourNodes(),
			pods:  []*corev1.Pod{app("w1", "web", "n1")},
			pod:   st.MakePod().Name("in").Label("app", "web").PodAntiAffinity(zone, web).Obj(),
			want:  filterResult{Feasible: []string{"n3", "n4"}, Unschedulable: []string{"n1", "n2"}},
		},
		{
			name:  "anti-affinity on hostname: one per node",
			nodes: fourNodes(),
			pods:  []*corev1.Pod{app("w1", "web", "n1"), app("w4", "web", "n4")},
			pod:   st.MakePod().Name("in").Label("app", "web").PodAntiAffinity(host, web).Obj(),
			want:  filterResult{Feasible: []string{"n2", "n3"}, Unschedulable: []string{"n1", "n4"}},
		},
		{
			name:  "an existing pod's anti-affinity repels the incoming pod",
			nodes: fourNodes(),
			pods:  []*corev1.Pod{st.MakePod().Name("lonely").Label("app", "db").PodAntiAffinity(zone, web).Node("n3").Obj()},
			pod:   st.MakePod().Name("in").Label("app", "web").Obj(),
			want:  filterResult{Feasible: []string{"n1", "n2"}, Unschedulable: []string{"n3", "n4"}},
		},
		{
			name:  "an existing pod's anti-affinity that does not select the pod is ignored",
			nodes: fourNodes(),
			pods:  []*corev1.Pod{st.MakePod().Name("lonely").PodAntiAffinity(zone, db).Node("n3").Obj()},
			pod:   st.MakePod().Name("in").Label("app", "web").Obj(),
			want:  filterResult{Skipped: true, Feasible: []string{"n1", "n2", "n3", "n4"}},
		},
		{
			name:  "terms look in the declaring pod's namespace by default",
			nodes: fourNodes(),
			pods: []*corev1.Pod{
				st.MakePod().Name("other-db").Namespace("other").Label("app", "db").Node("n1").Obj(),
				st.MakePod().Name("other-lonely").Namespace("other").PodAntiAffinity(zone, web).Node("n3").Obj(),
				app("d4", "db", "n4"),
			},
			pod:  st.MakePod().Name("in").Label("app", "web").PodAffinity(zone, db).Obj(),
			want: filterResult{Feasible: []string{"n3", "n4"}, Unresolvable: []string{"n1", "n2"}},
		},
		{
			name:  "namespaces named by the term replace the pod's own",
			nodes: fourNodes(),
			pods: []*corev1.Pod{
				st.MakePod().Name("other-db").Namespace("other").Label("app", "db").Node("n1").Obj(),
				app("d4", "db", "n4"),
			},
			pod:  st.MakePod().Name("in").PodAffinity(zone, db, st.TermNamespaces("other")).Obj(),
			want: filterResult{Feasible: []string{"n1", "n2"}, Unresolvable: []string{"n3", "n4"}},
		},
		{
			name:  "a namespaceSelector picks namespaces by their labels",
			nodes: fourNodes(),
			pods: []*corev1.Pod{
				st.MakePod().Name("x-db").Namespace("team-x").Label("app", "db").Node("n3").Obj(),
				st.MakePod().Name("y-db").Namespace("team-y").Label("app", "db").Node("n1").Obj(),
			},
			nsLabels: map[string]labels.Set{"team-x": {"team": "x"}, "team-y": {"team": "y"}},
			pod:      st.MakePod().Name("in").PodAffinity(zone, db, st.TermNamespaceSelector(map[string]string{"team": "x"})).Obj(),
			want:     filterResult{Feasible: []string{"n3", "n4"}, Unresolvable: []string{"n1", "n2"}},
		},
		{
			name:  "an empty namespaceSelector selects every namespace",
			nodes: fourNodes(),
			pods: []*corev1.Pod{
				st.MakePod().Name("x-web").Namespace("team-x").Label("app", "web").Node("n3").Obj(),
			},
			pod:  st.MakePod().Name("in").PodAntiAffinity(zone, web, st.TermNamespaceSelector(map[string]string{})).Obj(),
			want: filterResult{Feasible: []string{"n1", "n2"}, Unschedulable: []string{"n3", "n4"}},
		},
		{
			name:  "terminating pods still count until they are gone",
			nodes: fourNodes(),
			pods:  []*corev1.Pod{st.MakePod().Name("w1").Label("app", "web").Node("n1").Terminating().Obj()},
			pod:   st.MakePod().Name("in").PodAntiAffinity(zone, web).Obj(),
			want:  filterResult{Feasible: []string{"n3", "n4"}, Unschedulable: []string{"n1", "n2"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fw := newFramework(t, tc.nodes, tc.pods, tc.nsLabels)
			got := runFilter(t, fw, preFilter(t, fw, tc.pod), tc.pod)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("filter result (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPreFilterInvalidTerm: a pod whose affinity term does not parse is
// rejected everywhere as UnschedulableAndUnresolvable (kube-scheduler's
// "parsing pod"), so it is reported unschedulable and never preempts,
// rather than failing as an internal error.
func TestPreFilterInvalidTerm(t *testing.T) {
	fw := newFramework(t, fourNodes(), nil, nil)
	pod := st.MakePod().Name("p").PodAffinity(zone, map[string]string{"app": "db"}).Obj()
	pod.Spec.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].LabelSelector.MatchExpressions =
		[]metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus"}}
	got := fw.RunPreFilterPlugins(context.Background(), framework.NewCycleState(), pod)
	if got.Code() != framework.UnschedulableAndUnresolvable || !strings.HasPrefix(got.Message(), "parsing pod: ") {
		t.Errorf("PreFilter = %v, want UnschedulableAndUnresolvable: parsing pod: ...", got)
	}
}

// TestPreFilterExtensions dry-runs removing and re-adding pods as preemption
// does, on clones of the state, and checks the filter follows while the
// original state stays as it was.
func TestPreFilterExtensions(t *testing.T) {
	web := map[string]string{"app": "web"}
	ctx := context.Background()
	pods := []*corev1.Pod{
		app("w1", "web", "n1"),
		st.MakePod().Name("lonely").PodAntiAffinity(host, web).Node("n3").Obj(),
	}
	fw := newFramework(t, fourNodes(), pods, nil)
	pod := st.MakePod().Name("in").Label("app", "web").PodAntiAffinity(zone, web).Obj()
	state := preFilter(t, fw, pod)
	before := runFilter(t, fw, state, pod)
	want := filterResult{Feasible: []string{"n4"}, Unschedulable: []string{"n1", "n2", "n3"}}
	if diff := cmp.Diff(want, before); diff != "" {
		t.Fatalf("before (-want +got):\n%s", diff)
	}
	snap := fw.Snapshot()
	dry := state.Clone()
	for _, node := range []string{"n1", "n3"} {
		ni := snap.Get(node).Clone()
		pi := ni.Pods[0]
		ni.RemovePod(pi.Pod.UID)
		if st := fw.RunPreFilterExtensionRemovePod(ctx, dry, pod, pi, ni); !st.IsSuccess() {
			t.Fatalf("RemovePod: %v", st)
		}
	}
	want = filterResult{Feasible: []string{"n1", "n2", "n3", "n4"}}
	if diff := cmp.Diff(want, runFilter(t, fw, dry, pod)); diff != "" {
		t.Errorf("after removing both (-want +got):\n%s", diff)
	}
	ni := snap.Get("n2").Clone()
	added := framework.NewPodInfo(app("w2", "web", "n2"))
	ni.AddPod(added)
	if st := fw.RunPreFilterExtensionAddPod(ctx, dry, pod, added, ni); !st.IsSuccess() {
		t.Fatalf("AddPod: %v", st)
	}
	want = filterResult{Feasible: []string{"n3", "n4"}, Unschedulable: []string{"n1", "n2"}}
	if diff := cmp.Diff(want, runFilter(t, fw, dry, pod)); diff != "" {
		t.Errorf("after adding w2 (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, runFilter(t, fw, state, pod)); diff != "" {
		t.Errorf("the original state changed (-want +got):\n%s", diff)
	}
}
