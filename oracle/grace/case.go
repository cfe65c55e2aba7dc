package grace

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Case is one generated deletion: a pod as a client created it, the phase
// its kubelet reported, a first DELETE and maybe a second one while it
// terminates.
type Case struct {
	// TerminationGracePeriodSeconds is the spec's as created (nil: left to
	// defaulting).
	TerminationGracePeriodSeconds *int64
	// NodeName is "" for an unscheduled pod.
	NodeName string
	// Phase is status.phase when the first DELETE comes ("": Pending).
	Phase corev1.PodPhase
	// First is the first DELETE's gracePeriodSeconds (nil: not given).
	First *int64
	// Second says a second DELETE comes, Elapsed + 0.5 s after the first,
	// asking for SecondGrace (nil: not given), after the kubelet reported
	// PhaseBefore ("": no change).
	Second      bool
	SecondGrace *int64
	Elapsed     int64
	PhaseBefore corev1.PodPhase
	// Terminating seeds the pod as already terminating when the first
	// DELETE comes: deletionGracePeriodSeconds StoredGrace (nil, 0 and
	// negative included, states no DELETE of podsafe's leaves: another
	// writer's, or a deletion left half done) and deletionTimestamp
	// StoredDeadline + 0.75 s after the first DELETE (off the half-second
	// grid of the DELETEs, so no shortened deadline falls exactly on one).
	// Only the pure comparison (TestGracefulDelete) runs such cases.
	Terminating    bool
	StoredGrace    *int64
	StoredDeadline int64
}

// Outcome is the stored pod after one DELETE.
type Outcome struct {
	// Removed says the object is gone.
	Removed bool
	// Grace is its deletionGracePeriodSeconds (nil: not terminating).
	Grace *int64
	// Deadline is its deletionTimestamp in whole seconds after the first
	// DELETE, rounded up (nil: not terminating).
	Deadline *int64
	// Pending says the DELETE wrote nothing: a graceful deletion was
	// already under way and this one did not shorten it.
	Pending bool
}

func (o Outcome) String() string {
	if o.Removed {
		return "removed"
	}
	s := "not terminating"
	if o.Grace != nil || o.Deadline != nil {
		s = fmt.Sprintf("terminating, deletionGracePeriodSeconds %s, deadline %s s after the first DELETE", ptrString(o.Grace), ptrString(o.Deadline))
	}
	if o.Pending {
		s += ", pending (nothing written)"
	}
	return s
}

// Pod builds the case's pod as a client would create it, named name, with
// the metadata.generation 1 both API servers give a pod at creation.
func (c Case) Pod(namespace, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID("uid-" + name), Generation: 1},
		Spec: corev1.PodSpec{
			NodeName:                      c.NodeName,
			TerminationGracePeriodSeconds: copyPtr(c.TerminationGracePeriodSeconds),
			Containers:                    []corev1.Container{{Name: "app", Image: "podsafe.io/sim:1"}},
		},
		Status: corev1.PodStatus{Phase: c.Phase},
	}
}

// PodAt is the case's pod as stored when its first DELETE comes at t0:
// Pod, terminating as the case seeds it when Terminating.
func (c Case) PodAt(namespace, name string, t0 time.Time) *corev1.Pod {
	p := c.Pod(namespace, name)
	if c.Terminating {
		ts := metav1.NewTime(t0.Add(time.Duration(c.StoredDeadline)*time.Second + storedOffset))
		p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &ts, copyPtr(c.StoredGrace)
	}
	return p
}

// storedOffset puts a seeded deletionTimestamp off the half-second grid of
// the DELETEs (see Case.Terminating).
const storedOffset = 750 * time.Millisecond

// Generate draws the case of one seed; the same seed always gives the same
// case. Graces come from small ranges around the interesting edges (nil,
// negative, 0, 1, 2, the default 30), and second DELETEs shorten, lengthen
// or repeat the first, or give none.
func Generate(seed uint64) Case {
	r := rand.New(rand.NewPCG(seed, 0x6a09e667f3bcc909))
	var c Case
	c.TerminationGracePeriodSeconds = drawGrace(r, 0.3)
	if r.Float64() < 0.85 {
		c.NodeName = "node-1"
	}
	c.Phase = drawPhase(r, 0.7)
	c.First = drawGrace(r, 0.3)
	if r.Float64() < 0.65 {
		c.Second = true
		first := int64(30)
		switch {
		case c.First != nil:
			first = *c.First
		case c.TerminationGracePeriodSeconds != nil:
			first = *c.TerminationGracePeriodSeconds
		}
		first = max(first, 1)
		switch x := r.Float64(); {
		case x < 0.35:
			c.SecondGrace = ptr(r.Int64N(first))
		case x < 0.5:
			c.SecondGrace = ptr(first)
		case x < 0.65:
			c.SecondGrace = ptr(first + 1 + r.Int64N(60))
		default:
			c.SecondGrace = drawGrace(r, 0.4)
		}
		c.Elapsed = r.Int64N(first + 5)
		if r.Float64() < 0.3 {
			c.PhaseBefore = drawPhase(r, 0.2)
		}
	}
	return c
}

// GenerateTerminating draws a case of one seed whose pod is already
// terminating when its first DELETE comes (Case.Terminating), in any state
// a stored pod can be in: deletionGracePeriodSeconds nil, 0, negative or
// positive, its deadline past or to come; the DELETEs shorten, repeat or
// lengthen that grace, or give none. The same seed always gives the same
// case.
func GenerateTerminating(seed uint64) Case {
	c := Generate(seed)
	r := rand.New(rand.NewPCG(seed, 0xbb67ae8584caa73b))
	c.Terminating = true
	switch x := r.Float64(); {
	case x < 0.15:
		c.StoredGrace = nil
	case x < 0.3:
		c.StoredGrace = ptr(0)
	case x < 0.4:
		c.StoredGrace = ptr(-1 - r.Int64N(5))
	default:
		c.StoredGrace = ptr(1 + r.Int64N(60))
	}
	c.StoredDeadline = r.Int64N(151) - 60
	if g := c.StoredGrace; g != nil && *g > 0 {
		switch x := r.Float64(); {
		case x < 0.3:
			c.First = ptr(r.Int64N(*g))
		case x < 0.45:
			c.First = ptr(*g)
		case x < 0.6:
			c.First = ptr(*g + 1 + r.Int64N(30))
		}
	}
	return c
}

// drawGrace returns nil with probability pNil, else a grace period.
func drawGrace(r *rand.Rand, pNil float64) *int64 {
	if r.Float64() < pNil {
		return nil
	}
	switch x := r.Float64(); {
	case x < 0.1:
		return ptr(-1 - r.Int64N(5))
	case x < 0.25:
		return ptr(int64(0))
	case x < 0.5:
		return ptr(1 + r.Int64N(3))
	case x < 0.6:
		return ptr(int64(30))
	}
	return ptr(1 + r.Int64N(120))
}

// drawPhase returns Pending or Running with probability pLive, else a
// terminal phase.
func drawPhase(r *rand.Rand, pLive float64) corev1.PodPhase {
	if r.Float64() < pLive {
		return []corev1.PodPhase{"", corev1.PodPending, corev1.PodRunning}[r.IntN(3)]
	}
	return []corev1.PodPhase{corev1.PodSucceeded, corev1.PodFailed}[r.IntN(2)]
}

// Literal prints the case as a Go composite literal of this package's Case
// (ptr.To from k8s.io/utils/ptr for pointers).
func (c Case) Literal() string {
	var f []string
	add := func(name, v string) { f = append(f, name+": "+v) }
	if c.TerminationGracePeriodSeconds != nil {
		add("TerminationGracePeriodSeconds", ptrLiteral(c.TerminationGracePeriodSeconds))
	}
	if c.NodeName != "" {
		add("NodeName", fmt.Sprintf("%q", c.NodeName))
	}
	if c.Phase != "" {
		add("Phase", phaseLiteral(c.Phase))
	}
	if c.First != nil {
		add("First", ptrLiteral(c.First))
	}
	if c.Second {
		add("Second", "true")
		if c.SecondGrace != nil {
			add("SecondGrace", ptrLiteral(c.SecondGrace))
		}
		add("Elapsed", fmt.Sprint(c.Elapsed))
		if c.PhaseBefore != "" {
			add("PhaseBefore", phaseLiteral(c.PhaseBefore))
		}
	}
	if c.Terminating {
		add("Terminating", "true")
		if c.StoredGrace != nil {
			add("StoredGrace", ptrLiteral(c.StoredGrace))
		}
		add("StoredDeadline", fmt.Sprint(c.StoredDeadline))
	}
	return "grace.Case{" + strings.Join(f, ", ") + "}"
}

func phaseLiteral(p corev1.PodPhase) string {
	switch p {
	case corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed, corev1.PodUnknown:
		return "corev1.Pod" + string(p)
	}
	return fmt.Sprintf("corev1.PodPhase(%q)", string(p))
}

func ptrLiteral(p *int64) string { return fmt.Sprintf("ptr.To[int64](%d)", *p) }

func ptrString(p *int64) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}

func ptr(v int64) *int64 { return &v }

func copyPtr(p *int64) *int64 {
	if p == nil {
		return nil
	}
	return ptr(*p)
}
