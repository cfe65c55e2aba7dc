package framework_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsafe/podsafe/scheduler/framework"
	"github.com/podsafe/podsafe/scheduler/st"
)

const gpu corev1.ResourceName = "example.com/gpu"

const (
	mi = int64(1) << 20
	gi = int64(1) << 30
)

// TestPodRequests: a pod's requests are Kubernetes' (component-helpers'
// PodRequests), for bound pods as for the incoming one: sidecars add up
// with the containers, plain init containers only raise the floor,
// pod-level requests replace the containers' CPU and memory, and ephemeral
// storage and extended resources are counted (oracle seeds 24 and 143
// with -oracle.bound-pod-level).
func TestPodRequests(t *testing.T) {
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want framework.Resource
	}{
		{
			name: "containers only",
			pod:  st.MakePod().Name("p").Req("500m", "1Gi").Node("n1").Obj(),
			want: framework.Resource{MilliCPU: 500, Memory: gi, Pods: 1},
		},
		{
			name: "an init container larger than the containers sets the floor",
			pod:  st.MakePod().Name("p").Req("500m", "1Gi").InitContainer("2", "512Mi").Node("n1").Obj(),
			want: framework.Resource{MilliCPU: 2000, Memory: gi, Pods: 1},
		},
		{
			// Oracle seed 24: a bound pod's sidecar was not counted.
			name: "a sidecar runs beside the containers",
			pod:  st.MakePod().Name("p").Req("500m", "256Mi").Sidecar("250m", "128Mi").Node("n1").Obj(),
			want: framework.Resource{MilliCPU: 750, Memory: 384 * mi, Pods: 1},
		},
		{
			name: "an init container after a sidecar needs room beside it",
			pod:  st.MakePod().Name("p").Req("100m", "").Sidecar("300m", "").InitContainer("1", "").Node("n1").Obj(),
			want: framework.Resource{MilliCPU: 1300, Pods: 1},
		},
		{
			// Oracle seed 143: a bound pod's pod-level requests were
			// ignored.
			name: "pod-level requests replace the containers' CPU and memory",
			pod:  st.MakePod().Name("p").Req("250m", "256Mi").Request(corev1.ResourceEphemeralStorage, "1Gi").PodLevelReq("1200m", "384Mi").Node("n1").Obj(),
			want: framework.Resource{MilliCPU: 1200, Memory: 384 * mi, EphemeralStorage: gi, Pods: 1},
		},
		{
			name: "overhead is added",
			pod:  st.MakePod().Name("p").Req("500m", "").Overhead("100m", "64Mi").Node("n1").Obj(),
			want: framework.Resource{MilliCPU: 600, Memory: 64 * mi, Pods: 1},
		},
		{
			name: "ephemeral storage and extended resources",
			pod:  st.MakePod().Name("p").Request(corev1.ResourceEphemeralStorage, "512Mi").Request(gpu, "2").Node("n1").Obj(),
			want: framework.Resource{EphemeralStorage: 512 * mi, Pods: 1, Scalar: map[corev1.ResourceName]int64{gpu: 2}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, framework.PodRequests(tc.pod)); diff != "" {
				t.Errorf("PodRequests (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNodeInfoRequested: NodeInfo sums its pods' requests, scalar
// resources included, and a clone's sums change independently of the
// original's.
func TestNodeInfoRequested(t *testing.T) {
	node := st.MakeNode().Name("n1").Allocatable(gpu, "4").Allocatable(corev1.ResourceEphemeralStorage, "10Gi").Obj()
	snap := framework.NewSnapshot([]*corev1.Pod{
		st.MakePod().Name("a").Req("1", "1Gi").Sidecar("500m", "").Request(gpu, "1").Node("n1").Obj(),
		st.MakePod().Name("b").PodLevelReq("2", "2Gi").Request(corev1.ResourceEphemeralStorage, "1Gi").Node("n1").Obj(),
	}, []*corev1.Node{node})
	ni := snap.Get("n1")
	wantAlloc := framework.Resource{MilliCPU: 8000, Memory: 32 * gi, Pods: 110, EphemeralStorage: 10 * gi,
		Scalar: map[corev1.ResourceName]int64{gpu: 4}}
	if diff := cmp.Diff(wantAlloc, ni.Allocatable); diff != "" {
		t.Errorf("Allocatable (-want +got):\n%s", diff)
	}
	want := framework.Resource{MilliCPU: 3500, Memory: 3 * gi, Pods: 2, EphemeralStorage: gi,
		Scalar: map[corev1.ResourceName]int64{gpu: 1}}
	if diff := cmp.Diff(want, ni.Requested); diff != "" {
		t.Errorf("Requested (-want +got):\n%s", diff)
	}
	clone := ni.Clone()
	clone.RemovePod("a")
	clone.AddPod(framework.NewPodInfo(st.MakePod().Name("c").Request(gpu, "3").Node("n1").Obj()))
	wantClone := framework.Resource{MilliCPU: 2000, Memory: 2 * gi, Pods: 2, EphemeralStorage: gi,
		Scalar: map[corev1.ResourceName]int64{gpu: 3}}
	if diff := cmp.Diff(wantClone, clone.Requested); diff != "" {
		t.Errorf("clone's Requested (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, ni.Requested); diff != "" {
		t.Errorf("original's Requested after changing the clone (-want +got):\n%s", diff)
	}
	clone.RemovePod("c")
	if got := clone.Requested.Scalar[gpu]; got != 0 {
		t.Errorf("gpu requested after removing every gpu pod = %d, want 0", got)
	}
}
