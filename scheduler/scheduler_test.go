package scheduler

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/podsafe/podsafe/scheduler/st"
)

// TestWorkloadSelector: the scheduler starts listers only for the workload
// kinds the API serves, and default spreading then groups a pod with the
// pods of the Service selecting it (TS-9); before that, or for a kind the
// API does not serve, the pod's own labels stand in.
func TestWorkloadSelector(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}}}
	cs := fake.NewClientset(svc)
	cs.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "pods"}, {Name: "services"}}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{{Name: "replicasets"}}},
	}
	s, err := New(Config{Client: cs})
	if err != nil {
		t.Fatal(err)
	}
	pod := st.MakePod().Name("p").Label("app", "web").Label("version", "2").Obj()
	rcPod := st.MakePod().Name("q").Label("app", "legacy").OwnedBy("ReplicationController", "rc").Obj()
	if sel := s.workloadSelector(rcPod); sel == nil || sel.String() != "app=legacy" {
		t.Errorf("before discovery, an RC pod's selector is %v, want its labels", sel)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := s.watchWorkloads(ctx); err != nil {
		t.Fatal(err)
	}
	s.factory.Start(ctx.Done())
	defer func() {
		cancel()
		s.factory.Shutdown()
	}()
	for typ, ok := range s.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("informer %v did not sync", typ)
		}
	}
	w := s.workloads.Load()
	if w.Services == nil || w.ReplicaSets == nil || w.StatefulSets != nil || w.ReplicationControllers != nil {
		t.Errorf("listers %+v, want Services and ReplicaSets only", *w)
	}
	if sel := s.workloadSelector(pod); sel == nil || sel.String() != "app=web" {
		t.Errorf("selector of a Service's pod = %v, want app=web", sel)
	}
	if sel := s.workloadSelector(rcPod); sel == nil || sel.String() != "app=legacy" {
		t.Errorf("selector of a pod of an unserved RC = %v, want its labels", sel)
	}
}

// TestNominationOutlivesStaleVersions: a pod version from before the
// scheduler's own nominatedNodeName patch keeps the nomination, so the next
// cycle waits for the victims instead of preempting again (PR-4); binding
// ends it.
func TestNominationOutlivesStaleVersions(t *testing.T) {
	s, err := New(Config{Client: fake.NewClientset()})
	if err != nil {
		t.Fatal(err)
	}
	pod := st.MakePod().Name("p").Priority(10).Obj()
	s.onPod(pod)
	s.nominator.Set(pod, "n1") // as preempt does
	s.onPod(pod.DeepCopy())    // the informer's version from before the patch
	if got := s.nominator.NodeOf(pod.UID); got != "n1" {
		t.Errorf("nomination after a stale version = %q, want n1", got)
	}
	bound := pod.DeepCopy()
	bound.Spec.NodeName = "n2"
	s.onPod(bound)
	if got := s.nominator.NodeOf(pod.UID); got != "" {
		t.Errorf("nomination after binding = %q, want none", got)
	}
}

// TestScheduleOneTriesOwnNominationFirst: a nomination the informer has not
// shown yet is still tried first, so the pod binds there rather than on a
// better-scoring node (PR-4).
func TestScheduleOneTriesOwnNominationFirst(t *testing.T) {
	pod := st.MakePod().Name("p").UID("p").Priority(10).Req("500m", "").Obj()
	cs := fake.NewClientset(pod)
	s, err := New(Config{Client: cs})
	if err != nil {
		t.Fatal(err)
	}
	s.onNode(st.MakeNode().Name("n1").Capacity("4", "16Gi", "110").Obj())
	s.onNode(st.MakeNode().Name("n2").Capacity("4", "16Gi", "110").Obj())
	s.onPod(st.MakePod().Name("busy").UID("busy").Node("n2").Req("3", "12Gi").Obj())
	s.onPod(pod)
	s.nominator.Set(pod, "n2") // as preempt does, before the informer shows the patch
	s.ScheduleOne(context.Background())
	var bound []string
	for _, a := range cs.Actions() {
		if ca, ok := a.(k8stesting.CreateAction); ok && ca.GetSubresource() == "binding" {
			bound = append(bound, ca.GetObject().(*corev1.Binding).Target.Name)
		}
	}
	if len(bound) != 1 || bound[0] != "n2" {
		t.Errorf("bindings to %v, want [n2]", bound)
	}
}
