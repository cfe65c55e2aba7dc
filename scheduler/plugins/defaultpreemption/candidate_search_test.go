package defaultpreemption_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/podsafe/podsafe/scheduler/framework"
	"github.com/podsafe/podsafe/scheduler/plugins/defaultpreemption"
	"github.com/podsafe/podsafe/scheduler/plugins/noderesources"
	"github.com/podsafe/podsafe/scheduler/st"
)

// TestCandidateSearchOrder: nodes are tried lowest-priority victims first,
// so even when only one candidate is wanted it is usually the best (PR-11).
func TestCandidateSearchOrder(t *testing.T) {
	one := defaultpreemption.Args{MinCandidateNodesAbsolute: 1, MinCandidateNodesPercentage: 1}
	for _, tc := range []struct {
		name string
		pods []*corev1.Pod
		want outcome
	}{
		{
			name: "the lowest-priority victims are found first",
			pods: []*corev1.Pod{running("p5", "n1", 5, "2"), running("p3", "n2", 3, "2"), running("p1", "n3", 1, "2")},
			want: outcome{Node: "n3", Victims: []string{"p1"}},
		},
		{
			name: "with the wanted candidates found, a better node further on is not seen",
			pods: []*corev1.Pod{
				running("p1", "n1", 1, "1"), running("p2", "n1", 2, "1"),
				running("q2", "n2", 2, "2"),
				running("r1", "n3", 1, "1"), running("r1b", "n3", 1, "1"),
			},
			// n1 and n3 both start at priority 1; n1, first, takes p1 and
			// p2; n3 would take two pods of priority 1.
			want: outcome{Node: "n1", Victims: []string{"p1", "p2"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := []*corev1.Node{node("n1", "2"), node("n2", "2"), node("n3", "2")}
			got := runPreemptionWith(t, one, nodes, tc.pods, preemptor(10, "2"))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("preemption (-want +got):\n%s", diff)
			}
		})
	}
}

// findCandidate filters every node for pod and runs the plugin's search
// itself, so the candidate's PDB violations can be compared too.
func findCandidate(tb testing.TB, nodes []*corev1.Node, pods []*corev1.Pod, pod *corev1.Pod, pdbs []*policyv1.PodDisruptionBudget) *defaultpreemption.Candidate {
	tb.Helper()
	var pl *defaultpreemption.DefaultPreemption
	fw, err := framework.NewFramework([]framework.PluginSpec{
		{Factory: noderesources.NewFit},
		{Factory: func(h framework.Handle) (framework.Plugin, error) {
			p, err := defaultpreemption.New(defaultpreemption.Args{})(h)
			pl, _ = p.(*defaultpreemption.DefaultPreemption)
			return p, err
		}},
	}, framework.Options{
		PodDisruptionBudgets: func() []*policyv1.PodDisruptionBudget { return pdbs },
		Clock:                clocktesting.NewFakePassiveClock(testNow),
	})
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	state, statuses := filterAll(tb, fw, nodes, pods, pod)
	return pl.FindCandidate(ctx, state, pod, statuses)
}

// pickKey is kube-scheduler's pickOneNodeForPreemption order, computed
// here independently of the plugin: smaller is better on every field but
// earliest, where later is better.
type pickKey struct {
	Violations int
	Highest    int32
	Sum        int64
	Victims    int
	Earliest   time.Time
}

func pickKeyOf(c *defaultpreemption.Candidate) pickKey {
	k := pickKey{Violations: c.PDBViolations, Victims: len(c.Victims), Highest: math.MinInt32}
	for _, v := range c.Victims {
		k.Highest = max(k.Highest, v.Priority)
		k.Sum += int64(v.Priority) + math.MaxInt32 + 1
	}
	for _, v := range c.Victims {
		start := testNow
		if v.Pod.Status.StartTime != nil {
			start = v.Pod.Status.StartTime.Time
		}
		if v.Priority == k.Highest && (k.Earliest.IsZero() || start.Before(k.Earliest)) {
			k.Earliest = start
		}
	}
	return k
}

func (k pickKey) better(o pickKey) bool {
	switch {
	case k.Violations != o.Violations:
		return k.Violations < o.Violations
	case k.Highest != o.Highest:
		return k.Highest < o.Highest
	case k.Sum != o.Sum:
		return k.Sum < o.Sum
	case k.Victims != o.Victims:
		return k.Victims < o.Victims
	}
	return k.Earliest.After(o.Earliest)
}

// TestCandidateSearchFindsBest compares, on random clusters, the search
// that stops once no node can beat its best candidate with the best of
// every node dry-run alone: both must be equal on all five of
// kube-scheduler's criteria. Priorities repeat and go negative, start times
// repeat or are unset (now), budgets protect some pods, and a few pods
// have the lowest priority, which adds nothing to the shifted sum, so
// every criterion decides some rounds.
func TestCandidateSearchFindsBest(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	compared := 0
	decidedBy := map[string]int{}
	for round := range 400 {
		var nodes []*corev1.Node
		var pods []*corev1.Pod
		for n := range 6 {
			name := fmt.Sprintf("n%d", n)
			nodes = append(nodes, node(name, "4"))
			for p := range 1 + rng.IntN(4) {
				pn := fmt.Sprintf("%s-p%d", name, p)
				prio := int32(rng.IntN(8) - 3)
				if rng.IntN(8) == 0 {
					// Adds nothing to the shifted sum: only the number of
					// victims tells such nodes apart.
					prio = math.MinInt32
				}
				w := st.MakePod().Name(pn).Label("app", pn).Label("group", fmt.Sprint("g", rng.IntN(3))).
					Priority(prio).Req("1", "").Node(name)
				if rng.IntN(4) > 0 {
					w = w.StartTime(testNow.Add(-time.Duration(1+rng.IntN(4)) * time.Minute))
				}
				pods = append(pods, w.Obj())
			}
		}
		var pdbs []*policyv1.PodDisruptionBudget
		for g := range rng.IntN(3) {
			b := budget(fmt.Sprint("pdb", g), "", int32(rng.IntN(2)))
			b.Spec.Selector.MatchLabels = map[string]string{"group": fmt.Sprint("g", g)}
			pdbs = append(pdbs, b)
		}
		pod := preemptor(5, fmt.Sprint(1+rng.IntN(4)))
		if fits := func() bool {
			for _, n := range nodes {
				used := 0
				for _, p := range pods {
					if p.Spec.NodeName == n.Name {
						used++
					}
				}
				if used+int(pod.Spec.Containers[0].Resources.Requests.Cpu().Value()) <= 4 {
					return true
				}
			}
			return false
		}(); fits {
			continue
		}
		got := findCandidate(t, nodes, pods, pod, pdbs)
		compared++
		var keys []pickKey
		for _, n := range nodes {
			var alone []*corev1.Pod
			for _, p := range pods {
				if p.Spec.NodeName == n.Name {
					alone = append(alone, p)
				}
			}
			if c := findCandidate(t, []*corev1.Node{n}, alone, pod, pdbs); c != nil {
				keys = append(keys, pickKeyOf(c))
			}
		}
		sort.SliceStable(keys, func(i, j int) bool { return keys[i].better(keys[j]) })
		switch {
		case len(keys) == 0 && got != nil:
			t.Fatalf("round %d: preempted on %s, but no node alone is a candidate", round, got.Node)
		case len(keys) > 0 && got == nil:
			t.Fatalf("round %d: no preemption, want victims like %+v", round, keys[0])
		case len(keys) > 0:
			if diff := cmp.Diff(keys[0], pickKeyOf(got)); diff != "" {
				t.Fatalf("round %d: candidate on %s (-want +got):\n%s", round, got.Node, diff)
			}
			if len(keys) > 1 {
				decidedBy[decidingCriterion(keys[0], keys[1])]++
			}
		}
	}
	if compared < 100 {
		t.Errorf("only %d of 400 random clusters needed preemption", compared)
	}
	for _, c := range []string{"violations", "highest", "sum", "victims", "earliest start"} {
		if decidedBy[c] == 0 {
			t.Errorf("no round was decided by %s between the two best nodes (%v): the test does not cover it", c, decidedBy)
		}
	}
}

// decidingCriterion names the first criterion on which the best key beats
// the runner-up.
func decidingCriterion(best, next pickKey) string {
	switch {
	case best.Violations != next.Violations:
		return "violations"
	case best.Highest != next.Highest:
		return "highest"
	case best.Sum != next.Sum:
		return "sum"
	case best.Victims != next.Victims:
		return "victims"
	case !best.Earliest.Equal(next.Earliest):
		return "earliest start"
	}
	return "tie"
}
