package grace

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsafe/podsafe/apiserver"
)

// Diff lists how podsafe's outcomes (got) differ from upstream's (want),
// DELETE by DELETE; none when they agree.
func Diff(want, got []Outcome) []string {
	var out []string
	for i := range max(len(want), len(got)) {
		var w, g string
		if i < len(want) {
			w = want[i].String()
		}
		if i < len(got) {
			g = got[i].String()
		}
		if w != g {
			out = append(out, fmt.Sprintf("after DELETE %d: upstream %s; podsafe %s", i+1, orNone(w), orNone(g)))
		}
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "no such DELETE"
	}
	return s
}

// Shrink returns the simplest case it finds that still disagrees
// (disagrees reports so): it drops the second DELETE, the phases, the
// spec's grace and the node, and halves every number toward 0, one change
// at a time, for as long as some change keeps the disagreement.
func Shrink(c Case, disagrees func(Case) (bool, error)) (Case, error) {
	for {
		progressed := false
		for _, cand := range simpler(c) {
			bad, err := disagrees(cand)
			if err != nil {
				return c, err
			}
			if bad {
				c, progressed = cand, true
				break
			}
		}
		if !progressed {
			return c, nil
		}
	}
}

// simpler lists the cases one step simpler than c.
func simpler(c Case) []Case {
	var out []Case
	try := func(f func(*Case)) {
		d := c
		f(&d)
		if d != c {
			out = append(out, d)
		}
	}
	try(func(d *Case) {
		*d = Case{TerminationGracePeriodSeconds: d.TerminationGracePeriodSeconds, NodeName: d.NodeName, Phase: d.Phase, First: d.First,
			Terminating: d.Terminating, StoredGrace: d.StoredGrace, StoredDeadline: d.StoredDeadline}
	})
	try(func(d *Case) { d.Terminating, d.StoredGrace, d.StoredDeadline = false, nil, 0 })
	try(func(d *Case) { d.StoredGrace = nil })
	try(func(d *Case) { d.StoredDeadline /= 2 })
	try(func(d *Case) { d.PhaseBefore = "" })
	try(func(d *Case) { d.Phase = "" })
	try(func(d *Case) { d.TerminationGracePeriodSeconds = nil })
	try(func(d *Case) { d.First = nil })
	try(func(d *Case) { d.SecondGrace = nil })
	try(func(d *Case) { d.NodeName = "" })
	try(func(d *Case) { d.Elapsed /= 2 })
	for _, p := range []**int64{&c.TerminationGracePeriodSeconds, &c.First, &c.SecondGrace, &c.StoredGrace} {
		if *p == nil || **p == 0 {
			continue
		}
		for _, v := range []int64{0, 1, **p / 2} {
			if v == **p {
				continue
			}
			keep := *p
			*p = ptr(v)
			out = append(out, c)
			*p = keep
		}
	}
	return out
}

// FirstGraceReproducer prints a first-DELETE disagreement as an entry of
// apiserver's TestEffectiveGracePeriod table (its makePod builder and
// int64p), with upstream's grace as the wanted value.
func FirstGraceReproducer(name string, c Case, want int64) string {
	return fmt.Sprintf("{%q, %s, %s, %d},\n", name, makePodLiteral(c), int64pLiteral(c.First), want)
}

// DeletionReproducer prints a disagreement on the stored pod as an entry
// of apiserver's TestGracefulDeletion table (steps as admin; the deadline
// rounded up to the second, podsafe's resolution), with upstream's outcome
// of the last DELETE as the wanted state and every difference in a comment
// above it.
func DeletionReproducer(name string, c Case, want []Outcome, diffs []string) string {
	var b strings.Builder
	b.WriteString("// upstream k8s.io/kubernetes v1.37.2 vs podsafe:\n")
	for _, d := range diffs {
		b.WriteString("//   " + d + "\n")
	}
	steps := []string{fmt.Sprintf("{identity: IdentityAdmin, grace: %s}", int64pLiteral(c.First))}
	if c.Second && len(want) > 1 {
		phase := ""
		if c.PhaseBefore != "" {
			phase = "phase: " + phaseLiteral(c.PhaseBefore) + ", "
		}
		steps = append(steps, fmt.Sprintf("{advance: %d * time.Millisecond, %sidentity: IdentityAdmin, grace: %s}",
			c.Elapsed*1000+500, phase, int64pLiteral(c.SecondGrace)))
	}
	last := want[len(want)-1]
	state := "deletionState{}"
	if !last.Removed && last.Grace != nil && last.Deadline != nil {
		state = fmt.Sprintf("deletionState{true, at(%d), %d}", *last.Deadline, *last.Grace)
	}
	fmt.Fprintf(&b, "{%q, %s,\n\t[]step{%s},\n\t%s},\n", name, makePodLiteral(c), strings.Join(steps, ", "), state)
	return b.String()
}

// StepReproducer prints a disagreement on one DELETE (podsafe's Step, and
// upstream's answer and outcome on the same pod, request and instant) as a
// row of apiserver's TestGracefulDelete table: its at(ms) counts from the
// case's first DELETE, its deletingPod builds the pod as stored before,
// and the wanted result is upstream's, its deadline as podsafe must store
// it (whole seconds, rounded up) for a graceful deletion, else as answered.
// Every difference goes in a comment above it.
func StepReproducer(name string, s Step, want *corev1.Pod, wantOutcome apiserver.DeleteOutcome, diffs []string) string {
	var b strings.Builder
	b.WriteString("// upstream k8s.io/kubernetes v1.37.2 vs podsafe (apiserver.GracefulDelete):\n")
	for _, d := range diffs {
		b.WriteString("//   " + d + "\n")
	}
	before := s.Before
	deadline, grace := "time.Time{}", "nil"
	if before.DeletionTimestamp != nil {
		deadline = msLiteral(before.DeletionTimestamp.Sub(podsafeStart))
		grace = int64pLiteral(before.DeletionGracePeriodSeconds)
	}
	pod := fmt.Sprintf("deletingPod(%s, %s, %s, %d)", podLiteral(before), deadline, grace, before.Generation)
	wantDeadline := "time.Time{}"
	if ts := want.DeletionTimestamp; ts != nil {
		d := ts.Sub(podsafeStart)
		if wantOutcome == apiserver.DeleteGraceful {
			d = ceilSecond(ts.Add(-callAllowance)).Sub(podsafeStart)
		} else {
			// Upstream's answer trails the instant by its call: back to
			// the case's grid of quarter seconds.
			d = floorTo(d, callAllowance)
		}
		wantDeadline = msLiteral(d)
	}
	fmt.Fprintf(&b, "{%q, %s, %s, %s,\n\tresult{%s, %s, %s, %d}},\n", name, pod, int64pLiteral(s.Requested), msLiteral(s.Now.Sub(podsafeStart)),
		outcomeLiteral(wantOutcome), wantDeadline, int64pLiteral(want.DeletionGracePeriodSeconds), want.Generation)
	return b.String()
}

// msLiteral prints an instant d after the first DELETE as TestGracefulDelete's at(ms).
func msLiteral(d time.Duration) string { return fmt.Sprintf("at(%d)", d.Milliseconds()) }

// floorTo rounds d down to a multiple of unit (negative d too).
func floorTo(d, unit time.Duration) time.Duration {
	r := d.Truncate(unit)
	if r > d {
		r -= unit
	}
	return r
}

func outcomeLiteral(o apiserver.DeleteOutcome) string {
	switch o {
	case apiserver.DeleteNow:
		return "DeleteNow"
	case apiserver.DeleteGraceful:
		return "DeleteGraceful"
	case apiserver.DeletePending:
		return "DeletePending"
	}
	return fmt.Sprintf("DeleteOutcome(%d)", int(o))
}

// podLiteral prints a pod's spec and phase with apiserver's test builder.
func podLiteral(p *corev1.Pod) string {
	s := `makePod("p")`
	if p.Spec.NodeName != "" {
		s += fmt.Sprintf(".node(%q)", p.Spec.NodeName)
	}
	if g := p.Spec.TerminationGracePeriodSeconds; g != nil {
		s += fmt.Sprintf(".grace(%d)", *g)
	}
	if p.Status.Phase != "" {
		s += ".phase(" + phaseLiteral(p.Status.Phase) + ")"
	}
	return s + ".obj()"
}

// makePodLiteral prints the case's pod with apiserver's test builder.
func makePodLiteral(c Case) string { return podLiteral(c.Pod("default", "p")) }

func int64pLiteral(p *int64) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprintf("int64p(%d)", *p)
}
