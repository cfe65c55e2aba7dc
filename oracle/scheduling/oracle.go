package scheduling

import (
	"context"
	"fmt"
)

// Oracle compares podsafe's verdicts with upstream's.
type Oracle struct {
	Upstream *Upstream
	Podsafe  Podsafe
}

// NewOracle returns an oracle over the pinned upstream release.
func NewOracle() *Oracle { return &Oracle{Upstream: NewUpstream()} }

// Verdicts runs p through both sides: want is upstream's verdict, got
// podsafe's. An error means a side failed to run at all.
func (o *Oracle) Verdicts(ctx context.Context, p *Problem) (want, got *Verdict, err error) {
	if want, err = o.Upstream.Run(ctx, p); err != nil {
		return nil, nil, fmt.Errorf("upstream on %s: %w", p, err)
	}
	scoreOn := want.Filter.Feasible
	if scoreOn == nil {
		scoreOn = []string{}
	}
	if got, err = o.Podsafe.Run(ctx, p, scoreOn); err != nil {
		return nil, nil, fmt.Errorf("podsafe on %s: %w", p, err)
	}
	return want, got, nil
}

// Check returns the differences of p's verdicts in part (nil when the
// sides agree).
func (o *Oracle) Check(ctx context.Context, p *Problem, part Part) ([]string, error) {
	want, got, err := o.Verdicts(ctx, p)
	if err != nil {
		return nil, err
	}
	return Diff(part, want, got), nil
}

// Minimize shrinks a problem that fails in part and returns the smallest
// failing problem found, with upstream's verdict and the differences on
// it. A problem on which a side errors counts as not failing, so a
// reproducer always runs.
func (o *Oracle) Minimize(ctx context.Context, p *Problem, part Part) (*Problem, *Verdict, []string, error) {
	small := Shrink(p, func(q *Problem) bool {
		diffs, err := o.Check(ctx, q, part)
		return err == nil && len(diffs) > 0
	})
	want, got, err := o.Verdicts(ctx, small)
	if err != nil {
		return nil, nil, nil, err
	}
	return small, want, Diff(part, want, got), nil
}
