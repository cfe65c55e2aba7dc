package noderesources_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podsafe/podsafe/scheduler/framework"
	"github.com/podsafe/podsafe/scheduler/plugins/noderesources"
	"github.com/podsafe/podsafe/scheduler/st"
)

const gpu corev1.ResourceName = "example.com/gpu"

// fitResult is what Fit made of one node: its code and reasons.
type fitResult struct {
	Code    framework.Code
	Reasons []string
}

// runFit runs PreFilter and Filter for pod on every node of a snapshot of
// nodes and pods.
func runFit(t *testing.T, nodes []*corev1.Node, pods []*corev1.Pod, pod *corev1.Pod) map[string]fitResult {
	t.Helper()
	ctx := context.Background()
	snap := framework.NewSnapshot(pods, nodes)
	p, err := noderesources.NewFit(nil)
	if err != nil {
		t.Fatal(err)
	}
	fit := p.(*noderesources.Fit)
	state := framework.NewCycleState()
	if st := fit.PreFilter(ctx, state, pod, snap.List()); !st.IsSuccess() {
		t.Fatalf("PreFilter: %v", st)
	}
	out := map[string]fitResult{}
	for _, ni := range snap.List() {
		st := fit.Filter(ctx, state, pod, ni)
		out[ni.Node().Name] = fitResult{Code: st.Code(), Reasons: st.Reasons()}
	}
	return out
}

func withAllocatable(n *corev1.Node, name corev1.ResourceName, q string) *corev1.Node {
	n.Status.Allocatable[name] = resource.MustParse(q)
	return n
}

func withoutAllocatable(n *corev1.Node, name corev1.ResourceName) *corev1.Node {
	delete(n.Status.Allocatable, name)
	return n
}

func withRequest(p *corev1.Pod, name corev1.ResourceName, q string) *corev1.Pod {
	if p.Spec.Containers[0].Resources.Requests == nil {
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{}
	}
	p.Spec.Containers[0].Resources.Requests[name] = resource.MustParse(q)
	return p
}

func withSidecar(p *corev1.Pod, cpu string) *corev1.Pod {
	always := corev1.ContainerRestartPolicyAlways
	p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "sidecar", Image: "pause", RestartPolicy: &always,
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}})
	return p
}

func withPodLevel(p *corev1.Pod, cpu, mem string) *corev1.Pod {
	p.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}
	return p
}

func TestFitFilter(t *testing.T) {
	node := func(cpu, mem, pods string) *corev1.Node {
		return st.MakeNode().Name("n1").Capacity(cpu, mem, pods).Obj()
	}
	bound := func(name, cpu, mem string) *corev1.Pod {
		return st.MakePod().Name(name).Req(cpu, mem).Node("n1").Obj()
	}
	ok := fitResult{Code: framework.Success}
	for _, tc := range []struct {
		name string
		node *corev1.Node
		pods []*corev1.Pod
		pod  *corev1.Pod
		want fitResult
	}{
		{
			name: "fits",
			node: node("2", "2Gi", "10"), pods: []*corev1.Pod{bound("a", "1", "1Gi")},
			pod:  st.MakePod().Name("in").Req("1", "1Gi").Obj(),
			want: ok,
		},
		{
			name: "CPU taken by a bound pod: preemption may help",
			node: node("2", "2Gi", "10"), pods: []*corev1.Pod{bound("a", "1500m", "")},
			pod:  st.MakePod().Name("in").Req("1", "").Obj(),
			want: fitResult{Code: framework.Unschedulable, Reasons: []string{noderesources.ReasonCPU}},
		},
		{
			// Oracle seed 1: upstream says UnschedulableAndUnresolvable, so
			// preemption does not try a node no removal can make room on.
			name: "more CPU than the node has allocatable: unresolvable",
			node: node("500m", "1Gi", "110"),
			pod:  st.MakePod().Name("in").Req("1500m", "512Mi").Obj(),
			want: fitResult{Code: framework.UnschedulableAndUnresolvable, Reasons: []string{noderesources.ReasonCPU}},
		},
		{
			name: "more memory than allocatable, CPU merely taken: unresolvable",
			node: node("1", "1Gi", "110"), pods: []*corev1.Pod{bound("a", "1", "")},
			pod:  st.MakePod().Name("in").Req("500m", "2Gi").Obj(),
			want: fitResult{Code: framework.UnschedulableAndUnresolvable, Reasons: []string{noderesources.ReasonCPU, noderesources.ReasonMemory}},
		},
		{
			name: "too many pods is never unresolvable",
			node: node("2", "2Gi", "1"), pods: []*corev1.Pod{bound("a", "", "")},
			pod:  st.MakePod().Name("in").Obj(),
			want: fitResult{Code: framework.Unschedulable, Reasons: []string{noderesources.ReasonPods}},
		},
		{
			name: "no CPU request on a node without CPU allocatable fits",
			node: withoutAllocatable(st.MakeNode().Name("n1").Obj(), corev1.ResourceCPU),
			pod:  st.MakePod().Name("in").Req("", "1Gi").Obj(),
			want: ok,
		},
		{
			// Oracle seed 12.
			name: "ephemeral storage the node does not offer: unresolvable",
			node: node("4", "4Gi", "110"),
			pod:  withRequest(st.MakePod().Name("in").Req("250m", "128Mi").Obj(), corev1.ResourceEphemeralStorage, "512Mi"),
			want: fitResult{Code: framework.UnschedulableAndUnresolvable, Reasons: []string{"Insufficient ephemeral-storage"}},
		},
		{
			name: "ephemeral storage taken by a bound pod",
			node: withAllocatable(node("4", "4Gi", "110"), corev1.ResourceEphemeralStorage, "1Gi"),
			pods: []*corev1.Pod{withRequest(bound("a", "", ""), corev1.ResourceEphemeralStorage, "768Mi")},
			pod:  withRequest(st.MakePod().Name("in").Obj(), corev1.ResourceEphemeralStorage, "512Mi"),
			want: fitResult{Code: framework.Unschedulable, Reasons: []string{"Insufficient ephemeral-storage"}},
		},
		{
			// Oracle seed 7.
			name: "extended resource the node does not offer: unresolvable",
			node: node("4", "4Gi", "110"),
			pod:  withRequest(st.MakePod().Name("in").Obj(), gpu, "1"),
			want: fitResult{Code: framework.UnschedulableAndUnresolvable, Reasons: []string{"Insufficient " + string(gpu)}},
		},
		{
			name: "extended resource used up, CPU short too",
			node: withAllocatable(node("1", "4Gi", "110"), gpu, "2"),
			pods: []*corev1.Pod{withRequest(bound("a", "1", ""), gpu, "2")},
			pod:  withRequest(st.MakePod().Name("in").Req("500m", "").Obj(), gpu, "1"),
			want: fitResult{Code: framework.Unschedulable, Reasons: []string{noderesources.ReasonCPU, "Insufficient " + string(gpu)}},
		},
		{
			name: "extended resource left over fits",
			node: withAllocatable(node("4", "4Gi", "110"), gpu, "2"),
			pods: []*corev1.Pod{withRequest(bound("a", "", ""), gpu, "1")},
			pod:  withRequest(st.MakePod().Name("in").Obj(), gpu, "1"),
			want: ok,
		},
		{
			// Oracle seed 4: a restartable init container runs beside the
			// containers, so its requests add up with theirs.
			name: "sidecar init container adds to the pod's requests",
			node: node("1", "4Gi", "110"), pods: []*corev1.Pod{bound("a", "500m", "")},
			pod:  withSidecar(st.MakePod().Name("in").Req("400m", "").Obj(), "200m"),
			want: fitResult{Code: framework.Unschedulable, Reasons: []string{noderesources.ReasonCPU}},
		},
		{
			// Oracle seed 24 with -oracle.bound-pod-level: NodeInfo counts a
			// bound pod's sidecar beside its containers.
			name: "a bound pod's sidecar takes room",
			node: node("1", "4Gi", "110"), pods: []*corev1.Pod{st.MakePod().Name("a").Req("500m", "").Sidecar("300m", "").Node("n1").Obj()},
			pod:  st.MakePod().Name("in").Req("300m", "").Obj(),
			want: fitResult{Code: framework.Unschedulable, Reasons: []string{noderesources.ReasonCPU}},
		},
		{
			// Oracle seed 143 with -oracle.bound-pod-level.
			name: "a bound pod's pod-level requests take room",
			node: node("2", "4Gi", "110"), pods: []*corev1.Pod{st.MakePod().Name("a").Req("250m", "").PodLevelReq("1800m", "1Gi").Node("n1").Obj()},
			pod:  st.MakePod().Name("in").Req("500m", "").Obj(),
			want: fitResult{Code: framework.Unschedulable, Reasons: []string{noderesources.ReasonCPU}},
		},
		{
			name: "ephemeral storage, memory and an extended resource short at once",
			node: withAllocatable(withAllocatable(node("4", "1Gi", "110"), gpu, "1"), corev1.ResourceEphemeralStorage, "1Gi"),
			pods: []*corev1.Pod{st.MakePod().Name("a").Req("", "768Mi").Request(gpu, "1").Request(corev1.ResourceEphemeralStorage, "768Mi").Node("n1").Obj()},
			pod:  st.MakePod().Name("in").Req("", "512Mi").Request(gpu, "1").Request(corev1.ResourceEphemeralStorage, "512Mi").Obj(),
			want: fitResult{Code: framework.Unschedulable, Reasons: []string{noderesources.ReasonMemory, noderesources.ReasonEphemeralStorage, "Insufficient " + string(gpu)}},
		},
		{
			// Oracle seed 60: pod-level requests replace the containers'.
			name: "pod-level requests count, not the containers'",
			node: node("1", "2Gi", "110"),
			pod:  withPodLevel(st.MakePod().Name("in").Req("250m", "256Mi").Obj(), "1200m", "384Mi"),
			want: fitResult{Code: framework.UnschedulableAndUnresolvable, Reasons: []string{noderesources.ReasonCPU}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := runFit(t, []*corev1.Node{tc.node}, tc.pods, tc.pod)
			if diff := cmp.Diff(map[string]fitResult{"n1": tc.want}, got); diff != "" {
				t.Errorf("Filter (-want +got):\n%s", diff)
			}
		})
	}
}
