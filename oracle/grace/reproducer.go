package grace

import (
	"fmt"
	"strings"
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
		*d = Case{TerminationGracePeriodSeconds: d.TerminationGracePeriodSeconds, NodeName: d.NodeName, Phase: d.Phase, First: d.First}
	})
	try(func(d *Case) { d.PhaseBefore = "" })
	try(func(d *Case) { d.Phase = "" })
	try(func(d *Case) { d.TerminationGracePeriodSeconds = nil })
	try(func(d *Case) { d.First = nil })
	try(func(d *Case) { d.SecondGrace = nil })
	try(func(d *Case) { d.NodeName = "" })
	try(func(d *Case) { d.Elapsed /= 2 })
	for _, p := range []**int64{&c.TerminationGracePeriodSeconds, &c.First, &c.SecondGrace} {
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
	if c.Second && c.PhaseBefore != "" {
		fmt.Fprintf(&b, "// before the second DELETE the pod's status.phase becomes %s\n", c.PhaseBefore)
	}
	steps := []string{fmt.Sprintf("{identity: IdentityAdmin, grace: %s}", int64pLiteral(c.First))}
	if c.Second && len(want) > 1 {
		steps = append(steps, fmt.Sprintf("{advance: %d * time.Millisecond, identity: IdentityAdmin, grace: %s}",
			c.Elapsed*1000+500, int64pLiteral(c.SecondGrace)))
	}
	last := want[len(want)-1]
	state := "deletionState{}"
	if !last.Removed && last.Grace != nil && last.Deadline != nil {
		state = fmt.Sprintf("deletionState{true, at(%d), %d}", *last.Deadline, *last.Grace)
	}
	fmt.Fprintf(&b, "{%q, %s,\n\t[]step{%s},\n\t%s},\n", name, makePodLiteral(c), strings.Join(steps, ", "), state)
	return b.String()
}

// makePodLiteral prints the case's pod with apiserver's test builder.
func makePodLiteral(c Case) string {
	s := `makePod("p")`
	if c.NodeName != "" {
		s += fmt.Sprintf(".node(%q)", c.NodeName)
	}
	if c.TerminationGracePeriodSeconds != nil {
		s += fmt.Sprintf(".grace(%d)", *c.TerminationGracePeriodSeconds)
	}
	if c.Phase != "" {
		s += ".phase(" + phaseLiteral(c.Phase) + ")"
	}
	return s + ".obj()"
}

func int64pLiteral(p *int64) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprintf("int64p(%d)", *p)
}
