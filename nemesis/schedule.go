package nemesis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/podsafe/podsafe/history"
	"github.com/podsafe/podsafe/target"
)

// Schedule injects faults drawn from Faults with a seeded generator: wait about
// Interval, inject one fault, wait about Interval, heal it, repeat. Every
// injection is recorded as an interval in the history, with what it did in
// structured form (its effect, the links it cut, the components and nodes
// it acted on, its drawn parameters) beside its description. When ctx ends
// every active fault is healed.
//
// With Parts set the schedule is composed instead (see Part): each part
// runs that cycle on its own faults and its own timer, so faults of
// different parts overlap.
type Schedule struct {
	Faults []Fault
	// Interval is the mean time between nemesis operations (default 5 s); each
	// wait is drawn uniformly from [Interval/2, 3·Interval/2).
	Interval time.Duration
	// Parts, when set, compose the schedule: they run instead of Faults.
	Parts    []Part
	Recorder *history.Recorder
	Logger   *slog.Logger

	mu      sync.Mutex
	active  map[uint64]Injection
	seq     uint64         // injections so far
	counts  map[string]int // injections so far, by fault name
	skipped int            // composed draws skipped for a conflict
	// live counts the faults injected and not yet healed, from the end of
	// their injection to the end of their heal (as the history records
	// them); since is when live last went from 0 to 1, and faultTime sums
	// the times before it during which live was above 0.
	live      int
	since     time.Time
	faultTime time.Duration
}

// FaultTime is how long some fault of the schedule has been in force so
// far: the union of its faults' times, each from the end of its injection
// to the end of its heal.
func (s *Schedule) FaultTime() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live > 0 {
		return s.faultTime + time.Since(s.since)
	}
	return s.faultTime
}

// liveChangeLocked counts a fault in (+1) or out (-1) of force; s.mu is held.
func (s *Schedule) liveChangeLocked(d int) {
	if s.live == 0 && d > 0 {
		s.since = time.Now()
	}
	s.live += d
	if s.live == 0 && d < 0 {
		s.faultTime += time.Since(s.since)
	}
}

// Injected is how many faults the schedule has injected so far.
func (s *Schedule) Injected() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int(s.seq)
}

// Counts is how many times each fault has been injected so far, by name.
func (s *Schedule) Counts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.counts))
	for n, k := range s.counts {
		out[n] = k
	}
	return out
}

// Run drives the schedule against t until ctx ends, then heals everything.
// Faults not available on t are left out (and logged).
func (s *Schedule) Run(ctx context.Context, t target.Target, rng *rand.Rand) error {
	if s.Interval <= 0 {
		s.Interval = 5 * time.Second
	}
	log := s.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if len(s.Parts) > 0 {
		return s.runComposed(ctx, t, rng, log)
	}
	avail := available(s.Faults, t, log)
	if len(avail) == 0 {
		<-ctx.Done()
		return nil
	}
	var errs []error
	for {
		if !sleep(ctx, s.jitter(rng)) {
			break
		}
		f := avail[rng.IntN(len(avail))]
		id, err := s.inject(ctx, t, t, f, rng, log)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ok := sleep(ctx, s.jitter(rng))
		errs = append(errs, s.heal(id, log))
		if !ok {
			break
		}
	}
	errs = append(errs, s.HealAll())
	return errors.Join(errs...)
}

func (s *Schedule) jitter(rng *rand.Rand) time.Duration { return jitter(s.Interval, rng) }

// jitter draws a wait uniformly from [mean/2, 3·mean/2).
func jitter(mean time.Duration, rng *rand.Rand) time.Duration {
	return mean/2 + time.Duration(rng.Int64N(int64(mean)))
}

// available keeps the faults available on t, and logs the others.
func available(faults []Fault, t target.Target, log *slog.Logger) []Fault {
	var out []Fault
	for _, f := range faults {
		if f.Available(t) {
			out = append(out, f)
		} else {
			log.Info("fault not available on this target", "fault", f.Name(), "target", t.Kind(), "needs", f.Needs())
		}
	}
	return out
}

// inject injects f through via (t itself, or a composed part's view of t)
// and records it.
func (s *Schedule) inject(ctx context.Context, t, via target.Target, f Fault, rng *rand.Rand, log *slog.Logger) (uint64, error) {
	inj, err := f.Inject(ctx, via, rng)
	if err != nil {
		if !errors.Is(err, ErrBusy) {
			log.Warn("injecting fault", "fault", f.Name(), "err", err)
		}
		return 0, fmt.Errorf("injecting %s: %w", f.Name(), err)
	}
	s.mu.Lock()
	s.seq++
	id := s.seq
	if s.active == nil {
		s.active = map[uint64]Injection{}
	}
	s.active[id] = inj
	if s.counts == nil {
		s.counts = map[string]int{}
	}
	s.counts[f.Name()]++
	s.liveChangeLocked(+1)
	s.mu.Unlock()
	if s.Recorder != nil {
		s.Recorder.Nemesis(startEvent(id, f, t, inj))
	}
	log.Info("fault injected", "fault", f.Name(), "what", inj.Description)
	return id, nil
}

func (s *Schedule) heal(id uint64, log *slog.Logger) error {
	s.mu.Lock()
	inj, ok := s.active[id]
	delete(s.active, id)
	s.mu.Unlock()
	if !ok {
		return nil
	}
	err := inj.Heal()
	if s.Recorder != nil {
		s.Recorder.Nemesis(history.NemesisEvent{ID: id, Description: inj.Description, Phase: history.PhaseEnd, Targets: inj.Targets})
	}
	s.mu.Lock()
	s.liveChangeLocked(-1)
	s.mu.Unlock()
	log.Info("fault healed", "what", inj.Description)
	if err != nil {
		return fmt.Errorf("healing %s: %w", inj.Description, err)
	}
	return nil
}

// HealAll heals every active fault, the latest first.
func (s *Schedule) HealAll() error {
	s.mu.Lock()
	ids := make([]uint64, 0, len(s.active))
	for id := range s.active {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	slices.Sort(ids)
	slices.Reverse(ids)
	var errs []error
	for _, id := range ids {
		errs = append(errs, s.heal(id, slog.New(slog.DiscardHandler)))
	}
	return errors.Join(errs...)
}

// Active describes the faults in force now, for a progress line.
func (s *Schedule) Active() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, inj := range s.active {
		out = append(out, inj.Description)
	}
	return out
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
