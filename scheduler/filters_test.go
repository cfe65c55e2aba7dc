package scheduler

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsafe/podsafe/scheduler/st"
)

const zone = "zone"

var fooBar = map[string]string{"foo": "bar"}

// seed004Nodes: node1, node2 in zoneA; node3, node4 in zoneB.
func seed004Nodes() []*corev1.Node {
	return []*corev1.Node{
		st.MakeNode().Name("node1").Label(zone, "zoneA").Label("node", "node1").Obj(),
		st.MakeNode().Name("node2").Label(zone, "zoneA").Label("node", "node2").Obj(),
		st.MakeNode().Name("node3").Label(zone, "zoneB").Label("node", "node3").Obj(),
		st.MakeNode().Name("node4").Label(zone, "zoneB").Label("node", "node4").Obj(),
	}
}

func fooPods(nodes ...string) []*corev1.Pod {
	var out []*corev1.Pod
	for i, n := range nodes {
		out = append(out, st.MakePod().Name(fmt.Sprintf("p-%s-%d", n, i)).Label("foo", "bar").Node(n).Obj())
	}
	return out
}

// TestSeed004Examples are the worked examples of the topology spread seed
// (TS-E).
func TestSeed004Examples(t *testing.T) {
	dns := corev1.DoNotSchedule
	five := []*corev1.Node{
		st.MakeNode().Name("node1").Label(zone, "zoneA").Obj(),
		st.MakeNode().Name("node2").Label(zone, "zoneA").Obj(),
		st.MakeNode().Name("node3").Label(zone, "zoneB").Obj(),
		st.MakeNode().Name("node4").Label(zone, "zoneB").Obj(),
		st.MakeNode().Name("node5").Label(zone, "zoneC").Obj(),
	}
	for _, tc := range []struct {
		name  string
		nodes []*corev1.Node
		pods  []*corev1.Pod
		pod   *corev1.Pod
		want  []string
	}{
		{
			name:  "one zone constraint admits only zoneB",
			nodes: seed004Nodes(), pods: fooPods("node1", "node2", "node3"),
			pod:  st.MakePod().Name("mypod").Label("foo", "bar").Spread(1, zone, dns, fooBar).Obj(),
			want: []string{"node3", "node4"},
		},
		{
			name:  "zone and node constraints admit only node4",
			nodes: seed004Nodes(), pods: fooPods("node1", "node2", "node3"),
			pod: st.MakePod().Name("mypod").Label("foo", "bar").
				Spread(1, zone, dns, fooBar).Spread(1, "node", dns, fooBar).Obj(),
			want: []string{"node4"},
		},
		{
			name: "conflicting constraints on 3 nodes in 2 zones stay Pending",
			nodes: []*corev1.Node{
				st.MakeNode().Name("node1").Label(zone, "zoneA").Label("node", "node1").Obj(),
				st.MakeNode().Name("node2").Label(zone, "zoneA").Label("node", "node2").Obj(),
				st.MakeNode().Name("node3").Label(zone, "zoneB").Label("node", "node3").Obj(),
			},
			// Zones 2:1 admit only zoneB (node3); nodes 2:0:1 admit only
			// node2; the intersection is empty.
			pods: fooPods("node1", "node1", "node3"),
			pod: st.MakePod().Name("mypod").Label("foo", "bar").
				Spread(1, zone, dns, fooBar).Spread(1, "node", dns, fooBar).Obj(),
			want: nil,
		},
		{
			name:  "NotIn zoneC node affinity lands in zoneB",
			nodes: five, pods: fooPods("node1", "node2", "node3"),
			pod: st.MakePod().Name("mypod").Label("foo", "bar").Spread(1, zone, dns, fooBar).
				NodeAffinityNotIn(zone, "zoneC").Obj(),
			want: []string{"node3", "node4"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fw := newTestFramework(t, Config{}, tc.nodes, tc.pods)
			got := feasible(t, fw, tc.pod)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("feasible nodes (-want +got):\n%s", diff)
			}
			node, err := scheduleIn(t, fw, tc.pod)
			if len(tc.want) == 0 {
				if err == nil {
					t.Errorf("pod scheduled to %s, want Pending", node)
				}
				return
			}
			if err != nil || !contains(tc.want, node) {
				t.Errorf("scheduled to %q (err %v), want one of %v", node, err, tc.want)
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
