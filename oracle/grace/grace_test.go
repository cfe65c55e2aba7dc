package grace

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/google/go-cmp/cmp"

	"github.com/podsafe/podsafe/raftstore"
)

var (
	seedFlag    = flag.Uint64("grace.seed", 1, "first seed of the generated cases")
	casesFlag   = flag.Int("grace.cases", 5000, "number of generated cases of the pure comparison")
	apiFlag     = flag.Int("grace.api-cases", 3000, "number of generated cases run through podsafe's API server")
	pureFlag    = flag.Int("grace.pure-cases", 5000, "number of generated cases of each kind (fresh pod, pod already terminating) of the direct comparison of apiserver.GracefulDelete")
	reportsFlag = flag.Int("grace.reproducers", 1, "failing cases shrunk and printed as reproducers, per kind of disagreement")
)

// TestFirstGrace requires apiserver.EffectiveGracePeriod to give the first
// DELETE of a pod the grace upstream's pod strategy (CheckGracefulDelete)
// gives it, on thousands of generated pods and DeleteOptions: grace nil,
// negative, 0 or positive; terminationGracePeriodSeconds nil, negative, 0
// or positive; scheduled or not; in every phase.
func TestFirstGrace(t *testing.T) {
	failures, graceful, immediate := 0, 0, 0
	for i := range *casesFlag {
		seed := *seedFlag + uint64(i)
		c := Generate(seed)
		want, _, err := UpstreamFirstGrace(c)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if want == 0 {
			immediate++
		} else {
			graceful++
		}
		if got := PodsafeFirstGrace(c); got == want {
			continue
		}
		failures++
		if failures > *reportsFlag {
			continue
		}
		small, err := Shrink(Case{TerminationGracePeriodSeconds: c.TerminationGracePeriodSeconds, NodeName: c.NodeName, Phase: c.Phase, First: c.First},
			func(c Case) (bool, error) {
				w, _, err := UpstreamFirstGrace(c)
				return err == nil && PodsafeFirstGrace(c) != w, err
			})
		if err != nil {
			t.Fatalf("seed %d: shrinking: %v", seed, err)
		}
		w, _, _ := UpstreamFirstGrace(small)
		t.Errorf("seed %d: upstream grace %d, podsafe %d; shrunk to %s:\n%s", seed, w, PodsafeFirstGrace(small), small.Literal(),
			FirstGraceReproducer(fmt.Sprintf("oracle seed %d", seed), small, w))
	}
	t.Logf("%d cases: %d graceful, %d deleted at once upstream; %d disagree", *casesFlag, graceful, immediate, failures)
	if failures > 0 {
		t.Errorf("%d of %d first DELETEs disagree (rerun one: -grace.seed N -grace.cases 1)", failures, *casesFlag)
	}
}

// TestGracefulDelete requires apiserver.GracefulDelete to decide every
// DELETE as upstream's graceful-deletion rules (UpstreamDecide) decide it
// on the same pod, request and instant (GP-6, PS-3): the outcome (at once,
// graceful, pending), deletionGracePeriodSeconds, deletionTimestamp and
// generation. Cases are Generate's (a fresh pod, a first DELETE and maybe
// a second on the pod as podsafe left it) and GenerateTerminating's (a pod
// already terminating in any stored state, deletionGracePeriodSeconds nil,
// 0 or negative included).
func TestGracefulDelete(t *testing.T) {
	type gen struct {
		what string
		fn   func(uint64) Case
	}
	failures, steps := 0, 0
	kinds := map[string]int{}
	outcomes := map[string]int{}
	for _, g := range []gen{{"fresh pod", Generate}, {"pod already terminating", GenerateTerminating}} {
		for i := range *pureFlag {
			seed := *seedFlag + uint64(i)
			c := g.fn(seed)
			k, diffs, err := pureDisagreement(c)
			if err != nil {
				t.Fatalf("%s seed %d: %v", g.what, seed, err)
			}
			for n, s := range PodsafeSteps(c) {
				steps++
				outcomes[fmt.Sprintf("%s, DELETE %d: %s", g.what, n+1, s.Outcome)]++
			}
			if len(diffs) == 0 {
				continue
			}
			failures++
			k = g.what + ", " + k
			kinds[k]++
			if kinds[k] > *reportsFlag {
				continue
			}
			small, err := Shrink(c, func(c Case) (bool, error) {
				k2, d, err := pureDisagreement(c)
				return err == nil && len(d) > 0 && g.what+", "+k2 == k, err
			})
			if err != nil {
				t.Fatalf("%s seed %d: shrinking: %v", g.what, seed, err)
			}
			row, err := pureReproducer(fmt.Sprintf("oracle %s seed %d: %s", g.what, seed, k), small)
			if err != nil {
				t.Fatalf("%s seed %d: %v", g.what, seed, err)
			}
			t.Errorf("%s seed %d disagrees (%s), shrunk to %s; as a row of apiserver's TestGracefulDelete:\n%s", g.what, seed, k, small.Literal(), row)
		}
	}
	t.Logf("%d cases of each kind, %d DELETEs; %d cases disagree", *pureFlag, steps, failures)
	for _, k := range slices.Sorted(maps.Keys(outcomes)) {
		t.Logf("  %5d  %s", outcomes[k], k)
	}
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		t.Logf("  %5d  disagree: %s", kinds[k], k)
	}
	if failures > 0 {
		t.Errorf("%d of %d cases disagree (rerun one: -grace.seed N -grace.pure-cases 1)", failures, 2**pureFlag)
	}
}

// pureDisagreement compares the case's DELETEs as apiserver.GracefulDelete
// decides them with upstream's decisions on the same inputs; it returns the
// kind of the first disagreement and its differences, or none.
func pureDisagreement(c Case) (string, []string, error) {
	for n, s := range PodsafeSteps(c) {
		want, wantOutcome, err := UpstreamDecide(s.Before, s.Requested, s.Now)
		if err != nil {
			return "", nil, err
		}
		diffs := DecisionDiff(want, wantOutcome, s.Answer, s.Outcome)
		if len(diffs) == 0 {
			continue
		}
		which := fmt.Sprintf("DELETE %d", n+1)
		if s.Before.DeletionTimestamp != nil {
			which += " of a terminating pod"
		}
		if wantOutcome != s.Outcome {
			return fmt.Sprintf("%s: upstream %s, podsafe %s", which, wantOutcome, s.Outcome), diffs, nil
		}
		field, _, _ := strings.Cut(diffs[0], ":")
		return fmt.Sprintf("%s: both %s, %s differs", which, wantOutcome, field), diffs, nil
	}
	return "", nil, nil
}

// pureReproducer prints the case's first disagreeing DELETE as a row of
// apiserver's TestGracefulDelete.
func pureReproducer(name string, c Case) (string, error) {
	for _, s := range PodsafeSteps(c) {
		want, wantOutcome, err := UpstreamDecide(s.Before, s.Requested, s.Now)
		if err != nil {
			return "", err
		}
		if diffs := DecisionDiff(want, wantOutcome, s.Answer, s.Outcome); len(diffs) > 0 {
			return StepReproducer(name, s, want, wantOutcome, diffs), nil
		}
	}
	return "", fmt.Errorf("case %s no longer disagrees", c.Literal())
}

// TestDeletion requires podsafe's API server to store what upstream's
// graceful-deletion rules store after each DELETE (removed, or terminating
// with its deletionGracePeriodSeconds and deadline, and written or left
// alone), a second DELETE that shortens, lengthens, repeats or gives no
// grace, of a pod maybe turned terminal, included (GP-6, PS-3).
func TestDeletion(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a raftstore and an API server")
	}
	ctx := context.Background()
	store := raftstore.OpenTestCluster(t, 1).Stores[0]
	ps, err := NewPodsafe(store)
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	run := func(c Case) (want, got []Outcome, err error) {
		if want, err = Upstream(c); err != nil {
			return nil, nil, err
		}
		got, err = ps.Run(ctx, c)
		return want, got, err
	}
	failures, seconds := 0, 0
	kinds := map[string]int{}
	for i := range *apiFlag {
		seed := *seedFlag + uint64(i)
		c := Generate(seed)
		want, got, err := run(c)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if len(want) > 1 {
			seconds++
		}
		diffs := Diff(want, got)
		if len(diffs) == 0 {
			continue
		}
		failures++
		k := kind(c, want, got)
		kinds[k]++
		// One reproducer per kind of disagreement, shrunk within its kind.
		if kinds[k] > *reportsFlag {
			continue
		}
		small, err := Shrink(c, func(c Case) (bool, error) {
			w, g, err := run(c)
			return err == nil && len(Diff(w, g)) > 0 && kind(c, w, g) == k, err
		})
		if err != nil {
			t.Fatalf("seed %d: shrinking: %v", seed, err)
		}
		w, g, err := run(small)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		t.Errorf("seed %d disagrees (%s), shrunk to %s:\n%s", seed, k, small.Literal(),
			DeletionReproducer(fmt.Sprintf("oracle seed %d: %s", seed, k), small, w, Diff(w, g)))
	}
	t.Logf("%d cases, %d with a second DELETE; %d disagree:", *apiFlag, seconds, failures)
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		t.Logf("  %4d  %s", kinds[k], k)
	}
	if failures > 0 {
		t.Errorf("%d of %d deletions disagree (rerun one: -grace.seed N -grace.api-cases 1)", failures, *apiFlag)
	}
}

// kind names the sort of a disagreement: which DELETE, what it asked for,
// and what differs in the stored pod.
func kind(c Case, want, got []Outcome) string {
	i := 0
	for i < len(want) && i < len(got) && want[i].String() == got[i].String() {
		i++
	}
	which := "first DELETE"
	if i > 0 {
		switch {
		case c.SecondGrace == nil:
			which = "second DELETE without a grace"
		case *c.SecondGrace <= 0:
			which = "second DELETE with grace <= 0"
		default:
			which = "second DELETE with a grace"
		}
		if c.PhaseBefore == corev1.PodSucceeded || c.PhaseBefore == corev1.PodFailed {
			which += " of a pod turned terminal"
		}
	}
	if i >= len(want) || i >= len(got) {
		return which + ": a DELETE only one side got"
	}
	w, g := want[i], got[i]
	switch {
	case g.Removed && !w.Removed:
		return which + ": podsafe removes the pod, upstream keeps it terminating"
	case w.Removed && !g.Removed:
		return which + ": upstream removes the pod, podsafe keeps it"
	case ptrString(w.Grace) != ptrString(g.Grace):
		return which + ": deletionGracePeriodSeconds differs"
	case w.Pending != g.Pending:
		return which + ": pending on one side only"
	}
	return which + ": only the deadline differs"
}

// TestShrink checks the shrinker keeps the disagreement and simplifies.
func TestShrink(t *testing.T) {
	c := Case{TerminationGracePeriodSeconds: ptr(45), NodeName: "node-1", Phase: "Running", First: ptr(60),
		Second: true, SecondGrace: ptr(17), Elapsed: 9, PhaseBefore: "Failed"}
	// Disagrees whenever the second DELETE asks for more than 3 s.
	got, err := Shrink(c, func(c Case) (bool, error) { return c.Second && c.SecondGrace != nil && *c.SecondGrace > 3, nil })
	if err != nil {
		t.Fatal(err)
	}
	want := Case{NodeName: "", Second: true, SecondGrace: ptr(4)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("shrunk (-want +got):\n%s", diff)
	}
	if lit := got.Literal(); lit != "grace.Case{Second: true, SecondGrace: ptr.To[int64](4), Elapsed: 0}" {
		t.Errorf("literal %s", lit)
	}
}
