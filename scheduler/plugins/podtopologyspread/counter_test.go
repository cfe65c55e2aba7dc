package podtopologyspread

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/podsafe/podsafe/scheduler/framework"
	"github.com/podsafe/podsafe/scheduler/st"
)

// countSummary is what Filter sees of one constraint: every domain's count,
// the global minimum and the number of eligible domains.
type countSummary struct {
	Counts  map[string]int
	Min     int
	Domains int
}

func summarize(t *testing.T, pl *PodTopologySpread, snap *framework.Snapshot, pod *corev1.Pod) []countSummary {
	t.Helper()
	state := framework.NewCycleState()
	if st := pl.PreFilter(context.Background(), state, pod, snap.List()); !st.IsSuccess() {
		t.Fatalf("PreFilter: %v", st)
	}
	d, _ := state.Read(preFilterStateKey)
	s := d.(*preFilterState)
	var out []countSummary
	for i, c := range s.constraints {
		sum := countSummary{Counts: map[string]int{}, Min: s.counts[i].globalMin(1), Domains: s.counts[i].base.domains}
		for _, ni := range snap.List() {
			if v, ok := ni.Node().Labels[c.topologyKey]; ok {
				sum.Counts[v] = s.counts[i].count(v)
			}
		}
		out = append(out, sum)
	}
	return out
}

// TestCountsFollowSnapshotChanges changes a snapshot the way the scheduler
// does (replacing NodeInfos, adding and removing nodes) and checks after
// every change that counts kept between cycles equal counts taken afresh.
func TestCountsFollowSnapshotChanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	dns := corev1.DoNotSchedule
	web := map[string]string{"app": "web"}
	shapes := []*corev1.Pod{
		st.MakePod().Name("LabelZone").Label("app", "web").Spread(1, LabelZone, dns, web).Obj(),
		st.MakePod().Name("host").Label("app", "web").Spread(1, LabelHostname, dns, web).Spread(2, LabelZone, dns, web).Obj(),
		st.MakePod().Name("taints").Label("app", "web").Spread(1, LabelZone, dns, web, st.NodeTaintsPolicy(corev1.NodeInclusionPolicyHonor)).Obj(),
		st.MakePod().Name("affinity").Label("app", "web").NodeAffinityNotIn(LabelZone, "z0").Spread(1, LabelZone, dns, web).Obj(),
		st.MakePod().Name("other-ns").Namespace("other").Label("app", "web").Spread(1, LabelZone, dns, web).Obj(),
	}
	var nodes []*corev1.Node
	for i := range 12 {
		nodes = append(nodes, st.MakeNode().Name(fmt.Sprintf("n%d", i)).Label(LabelZone, fmt.Sprintf("z%d", i%4)).Obj())
	}
	snap := framework.NewSnapshot(nil, nodes)
	cached := mustPlugin(t)
	newPod := 0
	for step := range 300 {
		list := snap.List()
		ni := list[rng.IntN(len(list))].Clone()
		switch op := rng.IntN(10); {
		case op < 4:
			newPod++
			w := st.MakePod().Name(fmt.Sprintf("p%d", newPod)).Node(ni.Node().Name)
			if rng.IntN(3) > 0 {
				w = w.Label("app", "web")
			}
			if rng.IntN(2) == 0 {
				w = w.Namespace("other")
			}
			ni.AddPod(framework.NewPodInfo(w.Obj()))
			snap.Set(ni)
		case op < 7:
			if len(ni.Pods) > 0 {
				ni.RemovePod(ni.Pods[rng.IntN(len(ni.Pods))].Pod.UID)
				snap.Set(ni)
			}
		case op == 7:
			node := ni.Node().DeepCopy()
			node.Labels[LabelZone] = fmt.Sprintf("z%d", rng.IntN(6))
			if rng.IntN(3) == 0 {
				node.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
			} else {
				node.Spec.Taints = nil
			}
			ni.SetNode(node)
			snap.Set(ni)
		case op == 8 && len(list) > 3:
			snap.Remove(ni.Node().Name)
		default:
			fresh := &framework.NodeInfo{}
			fresh.SetNode(st.MakeNode().Name(fmt.Sprintf("m%d", step)).Label(LabelZone, fmt.Sprintf("z%d", rng.IntN(6))).Obj())
			snap.Set(fresh)
		}
		for _, pod := range shapes {
			want := summarize(t, mustPlugin(t), snap, pod)
			got := summarize(t, cached, snap, pod)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("step %d, pod %s: counts (-fresh +kept):\n%s", step, pod.Name, diff)
			}
		}
	}
}

func mustPlugin(t *testing.T) *PodTopologySpread {
	t.Helper()
	p, err := New(Args{})(nil)
	if err != nil {
		t.Fatal(err)
	}
	return p.(*PodTopologySpread)
}

// TestDomainCountsDelta checks the dry-run view over a shared table: counts
// and the global minimum match a plain recount, and clones are independent.
func TestDomainCountsDelta(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		n := 1 + rng.IntN(5)
		plain := map[string]int{}
		ctr := &counter{}
		var nis []*framework.NodeInfo
		for i := range n {
			node := st.MakeNode().Name(fmt.Sprintf("n%d", i)).Label(LabelZone, fmt.Sprintf("z%d", i)).Obj()
			var pods []*corev1.Pod
			for j := range rng.IntN(3) {
				pods = append(pods, st.MakePod().Name(fmt.Sprintf("p%d-%d", i, j)).Label("app", "web").Obj())
			}
			ni := framework.NewNodeInfo(pods...)
			ni.SetNode(node)
			nis = append(nis, ni)
			plain[node.Labels[LabelZone]] = len(pods)
		}
		sel := st.MakePod().Spread(1, LabelZone, corev1.DoNotSchedule, map[string]string{"app": "web"}).Obj()
		c := resolve(sel.Spec.TopologySpreadConstraints[0], mustSelector(t, sel))
		table := ctr.refresh(nis, counterSpec{eligible: func(*corev1.Node) bool { return true },
			topologyKey: LabelZone, namespace: "default", selector: c.selector})
		d := newDomainCounts(table)
		for range 6 {
			domain := fmt.Sprintf("z%d", rng.IntN(n))
			delta := rng.IntN(5) - 2
			before := d.clone()
			beforeCount := before.count(domain)
			d.add(domain, delta)
			plain[domain] += delta
			if got := before.count(domain); got != beforeCount {
				t.Fatalf("round %d: clone changed with the original: %d, want %d", round, got, beforeCount)
			}
			wantMin := math.MaxInt
			for dom, v := range plain {
				wantMin = min(wantMin, v)
				if got := d.count(dom); got != v {
					t.Fatalf("round %d: count(%s) = %d, want %d", round, dom, got, v)
				}
			}
			if got := d.globalMin(1); got != wantMin {
				t.Fatalf("round %d: globalMin = %d, want %d (counts %v)", round, got, wantMin, plain)
			}
		}
	}
}

func mustSelector(t *testing.T, pod *corev1.Pod) labels.Selector {
	t.Helper()
	sel, err := selectorOf(pod, pod.Spec.TopologySpreadConstraints[0])
	if err != nil {
		t.Fatal(err)
	}
	return sel
}
