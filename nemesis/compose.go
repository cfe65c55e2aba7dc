package nemesis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/podsafe/podsafe/target"
)

// Part is one part of a composed schedule, as one of Jepsen's nemesis
// packages is under compose: its own faults, one of them active at a time,
// on its own timer. Parts run side by side, so a partition of one part
// may be in force while another part's kill and a third's clock skew are.
type Part struct {
	// Name labels the part in logs ("" : its faults' names).
	Name   string
	Faults []Fault
	// Interval is the part's mean time between operations (zero: the
	// schedule's Interval).
	Interval time.Duration
}

// Skipped is how many draws of a composed schedule were skipped because the
// fault drawn would have acted on what another part's active fault holds
// (see ErrBusy). A skipped draw records nothing.
func (s *Schedule) Skipped() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.skipped
}

// lane is one part as it runs.
type lane struct {
	name   string
	faults []Fault // those available on the target
	mean   time.Duration
	rng    *rand.Rand
	next   time.Duration // when its next operation is due, from the start
	active uint64        // the injection in force, 0 when none
	via    view
}

// runComposed runs the parts. Each part draws from a generator of its own,
// seeded from rng, so its waits and choices do not depend on the others'.
// The parts' operations run one at a time, as Jepsen's nemesis runs its
// operations, in the order of the times they are due (ties: the part
// listed first), each due time counting from the previous one's rather
// than from when that operation finished: the order of operations, and so
// everything a fault draws, depends on the seed alone, however long an
// injection takes. A heal that is due heals its part's fault; an injection
// that is due draws one of the part's faults, through the part's view of
// the target (see view), and is skipped, recording nothing, when that view
// offers the fault nothing free or the fault reaches for something held.
func (s *Schedule) runComposed(ctx context.Context, t target.Target, rng *rand.Rand, log *slog.Logger) error {
	if len(s.Faults) > 0 {
		return errors.New("a schedule runs its Faults one at a time or its Parts composed, not both")
	}
	h := newHolds(t)
	lanes := make([]*lane, len(s.Parts))
	for i, p := range s.Parts {
		// Every part takes its seed, available or not, so that one part's
		// availability does not change another's draws.
		l := &lane{name: p.Name, mean: p.Interval, rng: rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64())), via: view{h: h, part: i}}
		if l.mean <= 0 {
			l.mean = s.Interval
		}
		if l.name == "" {
			l.name = fmt.Sprintf("part %d", i)
		}
		// A fault that needs an interface the views do not forward
		// would be skipped at every draw: leave it out, and say so.
		for _, f := range available(p.Faults, t, log) {
			if f.Available(l.via) {
				l.faults = append(l.faults, f)
			} else {
				log.Warn("fault left out of a composed schedule: it needs what a part's view does not offer", "fault", f.Name(), "part", l.name)
			}
		}
		l.next = jitter(l.mean, l.rng)
		lanes[i] = l
	}
	start := time.Now()
	var errs []error
	for {
		var l *lane
		for _, c := range lanes {
			if len(c.faults) > 0 && (l == nil || c.next < l.next) {
				l = c
			}
		}
		if l == nil {
			<-ctx.Done()
			break
		}
		if !sleep(ctx, time.Until(start.Add(l.next))) {
			break
		}
		if l.active != 0 {
			errs = append(errs, s.heal(l.active, log))
			l.active = 0
			h.release(l.via.part)
		} else {
			id, err := s.draw(ctx, t, l, log)
			switch {
			case err != nil:
				errs = append(errs, err)
				h.release(l.via.part)
			case id == 0:
				h.release(l.via.part)
			default:
				l.active = id
			}
		}
		l.next += jitter(l.mean, l.rng)
	}
	errs = append(errs, s.HealAll())
	return errors.Join(errs...)
}

// draw injects one of l's faults through its view; a draw that would meet
// another part's fault is skipped (id 0, no error).
func (s *Schedule) draw(ctx context.Context, t target.Target, l *lane, log *slog.Logger) (uint64, error) {
	f := l.faults[l.rng.IntN(len(l.faults))]
	if !f.Available(l.via) {
		s.skip(log, l, f, "everything it could act on is held by another part's fault")
		return 0, nil
	}
	id, err := s.inject(ctx, t, l.via, f, l.rng, log)
	if errors.Is(err, ErrBusy) {
		s.skip(log, l, f, err.Error())
		return 0, nil
	}
	return id, err
}

func (s *Schedule) skip(log *slog.Logger, l *lane, f Fault, why string) {
	s.mu.Lock()
	s.skipped++
	s.mu.Unlock()
	log.Info("fault skipped", "part", l.name, "fault", f.Name(), "why", why)
}
