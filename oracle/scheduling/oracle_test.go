package scheduling

import (
	"context"
	"flag"
	"fmt"
	"testing"
)

var (
	seedFlag    = flag.Uint64("oracle.seed", 1, "first seed of the generated problems")
	casesFlag   = flag.Int("oracle.cases", 3000, "number of generated problems")
	reportsFlag = flag.Int("oracle.reproducers", 3, "failing problems per part shrunk and printed as reproducers")
	boundFlag   = flag.Bool("oracle.bound-pod-level", true, "give bound pods sidecars and pod-level resources too, not only the incoming pod")
)

// outcome is one generated problem and both sides' verdicts on it.
type outcome struct {
	seed      uint64
	p         *Problem
	want, got *Verdict
}

// outcomes computes every problem's verdicts once, for all parts: each
// part is its own subtest (go test -run 'TestOracle/preemption' runs one).
type outcomes struct {
	o    *Oracle
	list []*outcome
}

func (c *outcomes) all(t *testing.T) []*outcome {
	t.Helper()
	if c.list != nil {
		return c.list
	}
	ctx := context.Background()
	for i := range *casesFlag {
		seed := *seedFlag + uint64(i)
		p := Generate(seed, Options{BoundPodLevelRequests: *boundFlag})
		want, got, err := c.o.Verdicts(ctx, p)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		c.list = append(c.list, &outcome{seed: seed, p: p, want: want, got: got})
	}
	return c.list
}

// TestOracle requires podsafe's PodTopologySpread and NodeResourcesFit
// filters, PodTopologySpread's scores and DefaultPreemption's choice to
// equal upstream kube-scheduler v1.37.2's on generated problems. A failure
// prints shrunk reproducers as table-test entries.
func TestOracle(t *testing.T) {
	c := &outcomes{o: NewOracle()}
	for _, part := range []Part{PartFilter, PartScore, PartPreemption} {
		t.Run(string(part), func(t *testing.T) {
			list := c.all(t)
			failures, exercised, infeasible := 0, 0, 0
			for _, oc := range list {
				if exercises(part, oc.want) {
					exercised++
				}
				if oc.want.Preemption != nil {
					infeasible++
				}
				diffs := Diff(part, oc.want, oc.got)
				if len(diffs) == 0 {
					continue
				}
				failures++
				if failures > *reportsFlag {
					continue
				}
				small, want, smallDiffs, err := c.o.Minimize(context.Background(), oc.p, part)
				if err != nil {
					t.Fatalf("seed %d: shrinking: %v", oc.seed, err)
				}
				name := fmt.Sprintf("oracle seed %d, %s", oc.seed, part)
				t.Errorf("seed %d disagrees (%d differences; shrunk from %s to %s):\n%s",
					oc.seed, len(diffs), oc.p, small, Reproducer(name, part, small, want, smallDiffs))
			}
			t.Logf("%s: %d problems (%d fit no node), %d exercise it, %d disagree", part, len(list), infeasible, exercised, failures)
			if failures > 0 {
				t.Errorf("%d of %d problems disagree in %s (rerun one: -oracle.seed N -oracle.cases 1)", failures, len(list), part)
			}
		})
	}
}

// exercises reports whether upstream's verdict makes part non-trivial.
func exercises(part Part, v *Verdict) bool {
	switch part {
	case PartFilter:
		return v.Filter.SpreadPreFilter != CodeSkip || len(v.Filter.Feasible) < len(v.Filter.Fit)
	case PartScore:
		return !v.Score.Skipped
	case PartPreemption:
		return v.Preemption != nil && v.Preemption.Node != ""
	}
	return false
}
