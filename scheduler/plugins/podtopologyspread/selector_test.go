package podtopologyspread_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/podsafe/podsafe/scheduler/plugins/podtopologyspread"
	"github.com/podsafe/podsafe/scheduler/st"
)

func indexer(tb testing.TB, objs ...runtime.Object) cache.Indexer {
	tb.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objs {
		if err := idx.Add(o); err != nil {
			tb.Fatal(err)
		}
	}
	return idx
}

func service(ns, name string, selector map[string]string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{Selector: selector}}
}

// workloads serves the objects of every kind through listers.
func workloads(tb testing.TB, objs ...runtime.Object) podtopologyspread.Workloads {
	tb.Helper()
	var svcs, rcs, rss, sss []runtime.Object
	for _, o := range objs {
		switch o.(type) {
		case *corev1.Service:
			svcs = append(svcs, o)
		case *corev1.ReplicationController:
			rcs = append(rcs, o)
		case *appsv1.ReplicaSet:
			rss = append(rss, o)
		case *appsv1.StatefulSet:
			sss = append(sss, o)
		}
	}
	return podtopologyspread.Workloads{
		Services:               corelisters.NewServiceLister(indexer(tb, svcs...)),
		ReplicationControllers: corelisters.NewReplicationControllerLister(indexer(tb, rcs...)),
		ReplicaSets:            appslisters.NewReplicaSetLister(indexer(tb, rss...)),
		StatefulSets:           appslisters.NewStatefulSetLister(indexer(tb, sss...)),
	}
}

func TestWorkloadsSelector(t *testing.T) {
	objs := []runtime.Object{
		service("default", "web", map[string]string{"app": "web"}),
		service("default", "canary", map[string]string{"app": "web", "track": "canary"}),
		service("default", "manual", nil),
		service("other", "web", map[string]string{"app": "web", "ns": "other"}),
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "rs", UID: "rs-uid"},
			Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "hash": "abc"}}}},
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "ss"},
			Spec: appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"db"}}}}}},
		&corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "rc"},
			Spec: corev1.ReplicationControllerSpec{Selector: map[string]string{"app": "legacy"}}},
	}
	full := workloads(t, objs...)
	noRC := full
	noRC.ReplicationControllers = nil
	ownedByRS := func(uid types.UID) *st.PodWrapper {
		w := st.MakePod().Name("p").Label("app", "web").Label("hash", "abc").OwnedBy("ReplicaSet", "rs")
		w.OwnerReferences[0].UID = uid
		return w
	}
	for _, tc := range []struct {
		name string
		w    podtopologyspread.Workloads
		pod  *corev1.Pod
		// want is the selector's string form; "<nil>" means no workload.
		want string
	}{
		{"a Service selecting the pod", full, st.MakePod().Name("p").Label("app", "web").Obj(), "app=web"},
		{"every Service selecting the pod", full, st.MakePod().Name("p").Label("app", "web").Label("track", "canary").Obj(),
			"app=web,track=canary"},
		{"Services of other namespaces and without a selector do not count", full,
			st.MakePod().Name("p").Namespace("other").Label("app", "api").Obj(), "<nil>"},
		{"a pod of no workload", full, st.MakePod().Name("p").Label("app", "api").Obj(), "<nil>"},
		{"the ReplicaSet's selector, with the Service's", full, ownedByRS("rs-uid").Obj(), "app=web,hash=abc"},
		// Oracle seed 61: kube-scheduler finds the owner by name only.
		{"a ReplicaSet of another UID is still the owner", full,
			ownedByRS("other-uid").Label("app", "api").Obj(), "app=web,hash=abc"},
		// Oracle seed 26: kube-scheduler knows apps/v1 ReplicaSets only.
		{"a ReplicaSet reference at another version is no workload", full,
			func() *corev1.Pod {
				p := ownedByRS("rs-uid").Label("app", "api").Obj()
				p.OwnerReferences[0].APIVersion = "apps/v1beta2"
				return p
			}(), "<nil>"},
		{"the StatefulSet's selector", full,
			st.MakePod().Name("p").Label("tier", "db").OwnedBy("StatefulSet", "ss").Obj(), "tier in (db)"},
		{"the ReplicationController's selector", full,
			st.MakePod().Name("p").Label("app", "legacy").Label("v", "1").OwnedBy("ReplicationController", "rc").Obj(), "app=legacy"},
		{"a ReplicationController the API does not serve stands in by the pod's labels", noRC,
			st.MakePod().Name("p").Label("app", "legacy").Label("v", "1").OwnedBy("ReplicationController", "rc").Obj(), "app=legacy,v=1"},
		{"an owner not (yet) known adds nothing", full,
			st.MakePod().Name("p").Label("app", "x").OwnedBy("ReplicaSet", "gone").Obj(), "<nil>"},
		{"a Job is not a workload for spreading", full,
			st.MakePod().Name("p").Label("app", "x").OwnedBy("Job", "j").Obj(), "<nil>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := "<nil>"
			if sel := tc.w.Selector(tc.pod); sel != nil {
				got = sel.String()
			}
			if got != tc.want {
				t.Errorf("Selector = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestServiceDefaults: the cluster defaults apply to a pod that belongs to
// a Service and has no constraints of its own (TS-9).
func TestServiceDefaults(t *testing.T) {
	dns := corev1.DoNotSchedule
	w := workloads(t, service("default", "foo", map[string]string{"foo": "bar"}))
	seedPods := []*corev1.Pod{fooBar("p1", "node1"), fooBar("p2", "node2"), fooBar("p3", "node3")}
	zoneList := []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: zone, WhenUnsatisfiable: dns}}
	for _, tc := range []struct {
		name string
		args podtopologyspread.Args
		pod  *corev1.Pod
		// wantRank ranks the nodes by score, nil if scoring skipped;
		// wantFilter is the filter's verdict.
		wantRank   []string
		wantFilter filterResult
	}{
		{
			name:       "a Service's pod gets the system defaults: preferences by node and zone",
			args:       podtopologyspread.Args{DefaultSelector: w.Selector},
			pod:        st.MakePod().Name("in").Label("foo", "bar").Obj(),
			wantRank:   []string{"node4", "node3", "node1", "node2"},
			wantFilter: filterResult{Skipped: true, Feasible: []string{"node1", "node2", "node3", "node4"}},
		},
		{
			name:       "a Service's pod gets a List default that filters",
			args:       podtopologyspread.Args{DefaultSelector: w.Selector, DefaultingType: podtopologyspread.ListDefaulting, DefaultConstraints: zoneList},
			pod:        st.MakePod().Name("in").Label("foo", "bar").Obj(),
			wantFilter: filterResult{Feasible: []string{"node3", "node4"}},
		},
		{
			name: "a Service's pod with constraints of its own keeps only those",
			args: podtopologyspread.Args{DefaultSelector: w.Selector, DefaultingType: podtopologyspread.ListDefaulting, DefaultConstraints: zoneList},
			pod: st.MakePod().Name("in").Label("foo", "bar").
				Spread(1, host, corev1.ScheduleAnyway, map[string]string{"foo": "bar"}).Obj(),
			wantRank:   []string{"node4", "node1", "node2", "node3"},
			wantFilter: filterResult{Skipped: true, Feasible: []string{"node1", "node2", "node3", "node4"}},
		},
		{
			name:       "an empty List disables the defaults for a Service's pod",
			args:       podtopologyspread.Args{DefaultSelector: w.Selector, DefaultingType: podtopologyspread.ListDefaulting},
			pod:        st.MakePod().Name("in").Label("foo", "bar").Obj(),
			wantFilter: filterResult{Skipped: true, Feasible: []string{"node1", "node2", "node3", "node4"}},
		},
		{
			name:       "a pod no Service selects gets no defaults",
			args:       podtopologyspread.Args{DefaultSelector: w.Selector, DefaultingType: podtopologyspread.ListDefaulting, DefaultConstraints: zoneList},
			pod:        st.MakePod().Name("in").Label("foo", "baz").Obj(),
			wantFilter: filterResult{Skipped: true, Feasible: []string{"node1", "node2", "node3", "node4"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pl, snap := newPlugin(t, tc.args, fourNodes(), seedPods)
			if diff := cmp.Diff(tc.wantRank, runScore(t, pl, snap, tc.pod)); diff != "" {
				t.Errorf("ranking (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantFilter, runFilter(t, pl, snap, tc.pod)); diff != "" {
				t.Errorf("filter result (-want +got):\n%s", diff)
			}
		})
	}
}
