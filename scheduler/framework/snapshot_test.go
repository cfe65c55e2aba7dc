package framework_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsafe/podsafe/scheduler/framework"
	"github.com/podsafe/podsafe/scheduler/st"
)

// TestSnapshotAffinityCounts: the snapshot knows whether any pod has
// inter-pod affinity terms as nodes are replaced and removed.
func TestSnapshotAffinityCounts(t *testing.T) {
	web := map[string]string{"app": "web"}
	nodes := []*corev1.Node{st.MakeNode().Name("n1").Obj(), st.MakeNode().Name("n2").Obj()}
	snap := framework.NewSnapshot([]*corev1.Pod{
		st.MakePod().Name("plain").Node("n1").Obj(),
		st.MakePod().Name("fan").PreferredPodAffinity(1, "zone", web).Node("n1").Obj(),
	}, nodes)
	check := func(step string, affinity, anti bool) {
		t.Helper()
		if got := snap.HasPodsWithAffinity(); got != affinity {
			t.Errorf("%s: HasPodsWithAffinity = %v, want %v", step, got, affinity)
		}
		if got := snap.HasPodsWithRequiredAntiAffinity(); got != anti {
			t.Errorf("%s: HasPodsWithRequiredAntiAffinity = %v, want %v", step, got, anti)
		}
	}
	check("built", true, false)
	ni := snap.Get("n2").Clone()
	ni.AddPod(framework.NewPodInfo(st.MakePod().Name("shy").PodAntiAffinity("zone", web).Node("n2").Obj()))
	snap.Set(ni)
	check("anti-affinity pod added", true, true)
	original := snap.Get("n2")
	ni = original.Clone()
	ni.RemovePod("shy")
	snap.Set(ni)
	check("anti-affinity pod removed", true, false)
	if len(original.PodsWithRequiredAntiAffinity) != 1 {
		t.Errorf("removing from a clone changed the original: %d pods with anti-affinity", len(original.PodsWithRequiredAntiAffinity))
	}
	snap.Remove("n1")
	check("node removed", false, false)
}
