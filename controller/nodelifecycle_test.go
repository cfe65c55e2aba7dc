package controller

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

func TestTolerationFor(t *testing.T) {
	taint := &corev1.Taint{Key: TaintUnreachable, Effect: corev1.TaintEffectNoExecute}
	for _, tc := range []struct {
		name        string
		pod         *corev1.Pod
		want        time.Duration
		wantForever bool
	}{
		{name: "no toleration gets the default", pod: makePod("p").obj(), want: 300 * time.Second},
		{name: "matching toleration with seconds",
			pod: makePod("p").toleration(corev1.Toleration{Key: TaintUnreachable, Operator: corev1.TolerationOpExists,
				Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](30)}).obj(),
			want: 30 * time.Second},
		{name: "the shortest matching toleration wins",
			pod: makePod("p").
				toleration(corev1.Toleration{Key: TaintUnreachable, Operator: corev1.TolerationOpExists, TolerationSeconds: ptr.To[int64](30)}).
				toleration(corev1.Toleration{Operator: corev1.TolerationOpExists, TolerationSeconds: ptr.To[int64](10)}).obj(),
			want: 10 * time.Second},
		{name: "matching toleration without seconds tolerates forever",
			pod:         makePod("p").toleration(corev1.Toleration{Key: TaintUnreachable, Operator: corev1.TolerationOpExists}).obj(),
			wantForever: true},
		{name: "other key does not match",
			pod: makePod("p").toleration(corev1.Toleration{Key: "other", Operator: corev1.TolerationOpExists,
				TolerationSeconds: ptr.To[int64](5)}).obj(),
			want: 300 * time.Second},
		{name: "other effect does not match",
			pod: makePod("p").toleration(corev1.Toleration{Key: TaintUnreachable, Operator: corev1.TolerationOpExists,
				Effect: corev1.TaintEffectNoSchedule}).obj(),
			want: 300 * time.Second},
		{name: "negative seconds mean at once",
			pod: makePod("p").toleration(corev1.Toleration{Key: TaintUnreachable, Operator: corev1.TolerationOpExists,
				TolerationSeconds: ptr.To[int64](-5)}).obj(),
			want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, forever := tolerationFor(tc.pod, taint, DefaultTolerationSeconds)
			if got != tc.want || forever != tc.wantForever {
				t.Errorf("tolerationFor = %v, %v; want %v, %v", got, forever, tc.want, tc.wantForever)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	cs := fake.NewClientset()
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"node lifecycle without client", NodeLifecycleConfig{}.Validate()},
		{"node lifecycle period above grace", NodeLifecycleConfig{Client: cs, NodeMonitorPeriod: time.Minute}.Validate()},
		{"pod GC negative threshold", PodGCConfig{Client: cs, TerminatedPodThreshold: -1}.Validate()},
		{"pet without client", PetConfig{}.Validate()},
		{"replica set without client", ReplicaSetConfig{}.Validate()},
	} {
		if !errors.Is(tc.err, ErrInvalidConfig) {
			t.Errorf("%s: Validate = %v, want ErrInvalidConfig", tc.name, tc.err)
		}
	}
	for _, err := range []error{
		NodeLifecycleConfig{Client: cs}.Validate(), PodGCConfig{Client: cs}.Validate(),
		PetConfig{Client: cs}.Validate(), ReplicaSetConfig{Client: cs}.Validate(),
	} {
		if err != nil {
			t.Errorf("defaults do not validate: %v", err)
		}
	}
}

// TestPodChangedQueuesItsNode: a pod event queues the pod's node, so that a
// pod landing on a node already down is considered; an unscheduled pod
// queues nothing.
func TestPodChangedQueuesItsNode(t *testing.T) {
	nl, err := NewNodeLifecycle(NodeLifecycleConfig{Client: fake.NewClientset(), Clock: clocktesting.NewFakeClock(time.Unix(1000, 0))})
	if err != nil {
		t.Fatal(err)
	}
	nl.podChanged(makePod("pending").obj())
	if n := nl.queue.q.Len(); n != 0 {
		t.Fatalf("an unscheduled pod queued %d keys, want none", n)
	}
	nl.podChanged(makePod("p").node("n1").obj())
	if n := nl.queue.q.Len(); n != 1 {
		t.Fatalf("a pod on n1 queued %d keys, want 1", n)
	}
	if key, _ := nl.queue.q.Get(); key != "n1" {
		t.Errorf("queued %q, want n1", key)
	}
}

// TestSyncNodeGraceBoundary: as in Kubernetes' node lifecycle controller,
// which marks a node down only once now is After(probe + grace), a lease
// exactly the grace period old still counts as fresh; one nanosecond more
// and the node is marked Ready=Unknown and tainted unreachable.
func TestSyncNodeGraceBoundary(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	node := makeNode("n1", true)
	cs := fake.NewClientset(node)
	nl, err := NewNodeLifecycle(NodeLifecycleConfig{Client: cs, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if err := nl.factory.Core().V1().Nodes().Informer().GetIndexer().Add(node); err != nil {
		t.Fatal(err)
	}
	nl.leaseChanged(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: NodeLeaseNamespace},
		Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: clk.Now()}}})
	state := func() (corev1.ConditionStatus, bool) {
		t.Helper()
		n, err := cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return nodeCondition(n, corev1.NodeReady).Status, unreachableTaint(n) != nil
	}
	clk.Step(DefaultNodeMonitorGracePeriod)
	if err := nl.syncNode(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if ready, tainted := state(); ready != corev1.ConditionTrue || tainted {
		t.Fatalf("lease exactly the grace period old: Ready=%s, tainted %v; want Ready=True, untainted", ready, tainted)
	}
	clk.Step(time.Nanosecond)
	if err := nl.syncNode(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	if ready, tainted := state(); ready != corev1.ConditionUnknown || !tainted {
		t.Errorf("lease older than the grace period: Ready=%s, tainted %v; want Ready=Unknown, tainted", ready, tainted)
	}
}

// TestEvictPodsSkipsTerminalAndTerminating: on a node down past the
// toleration, only running pods are marked NodeDown and deleted; finished
// pods and pods already terminating are left alone.
func TestEvictPodsSkipsTerminalAndTerminating(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	node := makeNode("n1", false)
	node.Spec.Taints = []corev1.Taint{{Key: TaintUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: clk.Now()}}}
	pods := []*corev1.Pod{
		makePod("running").node("n1").phase(corev1.PodRunning).obj(),
		makePod("done").node("n1").phase(corev1.PodSucceeded).obj(),
		makePod("going").node("n1").phase(corev1.PodRunning).terminating().obj(),
	}
	cs := fake.NewClientset(node, pods[0], pods[1], pods[2])
	nl, err := NewNodeLifecycle(NodeLifecycleConfig{Client: cs, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if err := nl.factory.Core().V1().Nodes().Informer().GetIndexer().Add(node); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if err := nl.pods.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	clk.Step(time.Hour)
	cs.ClearActions()
	if err := nl.evictPods(context.Background(), "n1"); err != nil {
		t.Fatal(err)
	}
	var touched []string
	for _, a := range cs.Actions() {
		if a.GetResource().Resource != "pods" {
			continue
		}
		switch a := a.(type) {
		case k8stesting.DeleteAction:
			touched = append(touched, "delete "+a.GetName())
		case k8stesting.UpdateAction:
			touched = append(touched, "update "+a.GetObject().(*corev1.Pod).Name)
		}
	}
	if want := []string{"update running", "delete running"}; !slices.Equal(touched, want) {
		t.Errorf("pod writes %v, want %v", touched, want)
	}
}
