package scheduling

import (
	"context"
	"go/parser"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// fourNodes is TS-E's cluster: n1 and n2 in zone a, n3 and n4 in zone b,
// one app=web pod on each of n1..n3.
func fourNodes() *Problem {
	p := &Problem{}
	for i, z := range []string{"a", "a", "b", "b"} {
		n := NewNode("n"+string(rune('1'+i)), 4000, 4096, 110)
		n.Labels[LabelZone] = z
		p.Nodes = append(p.Nodes, n)
	}
	for i := range 3 {
		pod := NewPod(NamespaceDefault, "p"+string(rune('1'+i)), 0, 0)
		pod.Labels = map[string]string{"app": "web"}
		pod.Spec.NodeName = p.Nodes[i].Name
		start := At(i)
		pod.Status.StartTime = &start
		p.Pods = append(p.Pods, pod)
	}
	p.Pod = NewPod(NamespaceDefault, "incoming", 0, 0)
	p.Pod.Labels = map[string]string{"app": "web"}
	return p
}

// TestUpstreamKnownVerdicts checks the upstream side against verdicts
// known by hand, so the oracle is known to run the upstream plugins it
// names (a harness that ran nothing would agree with anything).
func TestUpstreamKnownVerdicts(t *testing.T) {
	ctx := context.Background()
	u := NewUpstream()

	spread := fourNodes()
	spread.Pod.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: LabelZone,
		WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	v, err := u.Run(ctx, spread)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"n1": CodeUnschedulable, "n2": CodeUnschedulable, "n3": CodeSuccess, "n4": CodeSuccess}
	if diff := cmp.Diff(want, v.Filter.Spread); diff != "" {
		t.Errorf("TS-E zone constraint, PodTopologySpread Filter (-want +got):\n%s", diff)
	}

	full := fourNodes()
	full.Nodes = full.Nodes[:1]
	full.Nodes[0].Status.Allocatable = NewNode("n1", 1000, 1024, 110).Status.Allocatable
	full.Pods = full.Pods[:1]
	full.Pods[0].Spec.Containers[0].Resources.Requests = NewPod("", "", 800, 0).Spec.Containers[0].Resources.Requests
	full.Pod = NewPod(NamespaceDefault, "incoming", 500, 0)
	prio := int32(100)
	full.Pod.Spec.Priority = &prio
	v, err = u.Run(ctx, full)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"n1": CodeUnschedulable}, v.Filter.Fit); diff != "" {
		t.Errorf("full node, NodeResourcesFit Filter (-want +got):\n%s", diff)
	}
	wantPreemption := &PreemptionVerdict{Node: "n1", Victims: []string{"default/p1"}, Ties: []string{"n1"},
		Candidates: map[string][]string{"n1": {"default/p1"}}}
	if diff := cmp.Diff(wantPreemption, v.Preemption); diff != "" {
		t.Errorf("full node, DefaultPreemption (-want +got):\n%s", diff)
	}

	full.Pod = NewPod(NamespaceDefault, "incoming", 1500, 0)
	v, err = u.Run(ctx, full)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"n1": CodeUnresolvable}, v.Filter.Fit); diff != "" {
		t.Errorf("pod larger than the node, NodeResourcesFit Filter (-want +got):\n%s", diff)
	}
}

// TestDiffBites checks that each part reports a difference planted in a
// copy of a verdict, and nothing for an equal one.
func TestDiffBites(t *testing.T) {
	base := func() *Verdict {
		return &Verdict{
			Filter: FilterVerdict{SpreadPreFilter: CodeSuccess, Spread: map[string]string{"n1": CodeSuccess, "n2": CodeUnschedulable},
				Fit: map[string]string{"n1": CodeSuccess, "n2": CodeSuccess}, Feasible: []string{"n1"}, Chain: map[string]string{"n2": CodeUnschedulable}},
			Score: ScoreVerdict{Scores: map[string]int64{"n1": 100}},
		}
	}
	preempting := func() *Verdict {
		v := base()
		v.Filter.Feasible = nil
		v.Preemption = &PreemptionVerdict{Node: "n1", Victims: []string{"default/a"}, Ties: []string{"n1", "n2"},
			Candidates: map[string][]string{"n1": {"default/a"}, "n2": {"default/b"}}}
		return v
	}
	for _, tc := range []struct {
		name      string
		part      Part
		want, got *Verdict
		differs   bool
	}{
		{"equal filters", PartFilter, base(), base(), false},
		{"spread code", PartFilter, base(), func() *Verdict { v := base(); v.Filter.Spread["n2"] = CodeUnresolvable; return v }(), true},
		{"fit code", PartFilter, base(), func() *Verdict { v := base(); v.Filter.Fit["n1"] = CodeUnschedulable; return v }(), true},
		{"profile code", PartFilter, base(), func() *Verdict { v := base(); v.Filter.Chain["n2"] = CodeUnresolvable; return v }(), true},
		{"equal scores", PartScore, base(), base(), false},
		{"score", PartScore, base(), func() *Verdict { v := base(); v.Score.Scores["n1"] = 50; return v }(), true},
		{"skipped score", PartScore, base(), func() *Verdict { v := base(); v.Score = ScoreVerdict{Skipped: true}; return v }(), true},
		{"another node of the tie", PartPreemption, preempting(), func() *Verdict {
			v := preempting()
			v.Preemption = &PreemptionVerdict{Node: "n2", Victims: []string{"default/b"}}
			return v
		}(), false},
		{"a node outside the tie", PartPreemption, preempting(), func() *Verdict {
			v := preempting()
			v.Preemption = &PreemptionVerdict{Node: "n3", Victims: []string{"default/c"}}
			return v
		}(), true},
		{"other victims", PartPreemption, preempting(), func() *Verdict {
			v := preempting()
			v.Preemption = &PreemptionVerdict{Node: "n2", Victims: []string{"default/a"}}
			return v
		}(), true},
		{"no preemption", PartPreemption, preempting(), func() *Verdict {
			v := preempting()
			v.Preemption = &PreemptionVerdict{}
			return v
		}(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			diffs := Diff(tc.part, tc.want, tc.got)
			if (len(diffs) > 0) != tc.differs {
				t.Errorf("Diff = %q, want a difference: %v", diffs, tc.differs)
			}
		})
	}
}

func TestTies(t *testing.T) {
	pod := func(name string, prio int32, start int) *corev1.Pod {
		p := NewPod(NamespaceDefault, name, 0, 0)
		p.Spec.Priority = &prio
		s := At(start)
		p.Status.StartTime = &s
		return p
	}
	victims := func(violations int64, pods ...*corev1.Pod) *extenderv1.Victims {
		return &extenderv1.Victims{Pods: pods, NumPDBViolations: violations}
	}
	for _, tc := range []struct {
		name string
		in   map[string]*extenderv1.Victims
		want []string
	}{
		{"fewest budget violations", map[string]*extenderv1.Victims{"a": victims(1, pod("x", 0, 0)), "b": victims(0, pod("y", 5, 0))}, []string{"b"}},
		{"lowest highest priority", map[string]*extenderv1.Victims{"a": victims(0, pod("x", 5, 0)), "b": victims(0, pod("y", 1, 0), pod("z", 1, 1))}, []string{"b"}},
		{"lowest sum", map[string]*extenderv1.Victims{"a": victims(0, pod("x", 5, 0), pod("w", 1, 0)), "b": victims(0, pod("y", 5, 0), pod("z", 0, 0))}, []string{"b"}},
		{"fewest victims", map[string]*extenderv1.Victims{"a": victims(0, pod("x", -1, 0), pod("w", -1, 0)), "b": victims(0, pod("y", -1, 0))}, []string{"b"}},
		{"latest start of the highest", map[string]*extenderv1.Victims{"a": victims(0, pod("x", 3, 10)), "b": victims(0, pod("y", 3, 20))}, []string{"b"}},
		{"a full tie", map[string]*extenderv1.Victims{"a": victims(0, pod("x", 3, 10)), "b": victims(0, pod("y", 3, 10))}, []string{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ties(tc.in)); diff != "" {
				t.Errorf("ties (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGenerateIsDeterministic(t *testing.T) {
	for seed := range uint64(50) {
		a, b := Generate(seed, Options{}), Generate(seed, Options{})
		if diff := cmp.Diff(a, b); diff != "" {
			t.Fatalf("seed %d generated two problems (-first +second):\n%s", seed, diff)
		}
	}
}

// TestShrink shrinks against a planted failure, a zone label za on any
// node, down to one node with that label.
func TestShrink(t *testing.T) {
	var p *Problem
	for seed := uint64(1); p == nil; seed++ {
		q := Generate(seed, Options{})
		if len(q.Nodes) >= 3 && hasZone(q, "za") {
			p = q
		}
	}
	small := Shrink(p, func(q *Problem) bool { return hasZone(q, "za") })
	if len(small.Nodes) != 1 || len(small.Pods) != 0 || len(small.Nodes[0].Labels) != 1 || small.Nodes[0].Labels[LabelZone] != "za" {
		t.Errorf("shrunk to %s, node labels %v; want one node labelled only zone za and no pods", small, small.Nodes[0].Labels)
	}
	if small.Nodes[0].Name != "n0" {
		t.Errorf("shrunk node is %q, want it renumbered n0", small.Nodes[0].Name)
	}
}

func hasZone(p *Problem, zone string) bool {
	for _, n := range p.Nodes {
		if z, ok := n.Labels[LabelZone]; ok && z == zone {
			return true
		}
	}
	return false
}

// TestReproducerParses checks that reproducers are Go: each object literal
// parses as an expression.
func TestReproducerParses(t *testing.T) {
	for seed := range uint64(30) {
		p := Generate(seed, Options{BoundPodLevelRequests: true})
		for _, obj := range []any{p.Nodes, p.Pods, p.PDBs, p.Services, p.ReplicaSets, p.StatefulSets, p.ReplicationControllers, p.Pod} {
			lit := GoLiteral(obj)
			if _, err := parser.ParseExpr(lit); err != nil {
				t.Fatalf("seed %d: literal does not parse: %v\n%s", seed, err, lit)
			}
		}
	}
}
