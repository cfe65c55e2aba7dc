package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/podsafe/podsafe/target"
)

// Clock faults. Each shifts the clock of one component (one the target can
// apply target.Clock to: on the embedded cluster a kubelet, a controller or
// the scheduler once it runs) through target.Clocks and heals by resetting
// it. Only the component's readings move; its timers keep their durations,
// as a wall clock step leaves monotonic timers alone. Durations are in the
// target's time (the embedded cluster's is scaled).
func init() {
	register("clock", clockSkew{}, clockJump{}, clockStrobe{})
}

// Ranges the offsets are drawn from, either sign.
const (
	// Skews stay around the node lease and monitor periods (tens of
	// seconds), where a wrong reading decides whether a lease looks expired.
	minSkew, maxSkew = time.Second, time.Minute
	// Jumps go well past every lease, grace period and toleration.
	minJump, maxJump = 5 * time.Minute, 2 * time.Hour
	// A strobe flips between the true reading and an offset of this size,
	// every strobe period.
	minStrobe, maxStrobe             = 10 * time.Second, 5 * time.Minute
	minStrobePeriod, maxStrobePeriod = time.Second, 10 * time.Second
)

// needsClock is what every clock fault needs.
var needsClock = []target.Capability{target.Clock}

// clockComponents lists, sorted by name, the components whose clock t can
// move.
func clockComponents(t target.Target) []string {
	if _, ok := t.(target.Clocks); !ok {
		return nil
	}
	var out []string
	for _, c := range t.Components() {
		if t.Can(target.Clock, c.Name) {
			out = append(out, c.Name)
		}
	}
	slices.Sort(out)
	return out
}

func clockAvailable(t target.Target) bool { return len(clockComponents(t)) > 0 }

// pickClock picks a random component whose clock t can move.
func pickClock(t target.Target, rng *rand.Rand) (string, target.Clocks, error) {
	comps := clockComponents(t)
	if len(comps) == 0 {
		return "", nil, fmt.Errorf("no component runs on its own clock: %w", target.ErrUnsupported)
	}
	return comps[rng.IntN(len(comps))], t.(target.Clocks), nil
}

// offsetIn draws an offset of random sign with magnitude in [lo, hi).
func offsetIn(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	d := (lo + time.Duration(rng.Int64N(int64(hi-lo)))).Truncate(time.Millisecond)
	if rng.IntN(2) == 0 {
		return -d
	}
	return d
}

// clockSkew sets one component's clock off by tens of seconds.
type clockSkew struct{}

func (clockSkew) Name() string { return "clock-skew" }
func (clockSkew) Describe() string {
	return "set one kubelet's or controller's clock off by 1 s to 1 min, either way, then reset it"
}
func (clockSkew) Needs() []target.Capability     { return needsClock }
func (clockSkew) Available(t target.Target) bool { return clockAvailable(t) }
func (clockSkew) Inject(ctx context.Context, t target.Target, rng *rand.Rand) (Injection, error) {
	return shiftClock(t, rng, "skew", minSkew, maxSkew)
}

// clockJump steps one component's clock by minutes to hours.
type clockJump struct{}

func (clockJump) Name() string { return "clock-jump" }
func (clockJump) Describe() string {
	return "step one kubelet's or controller's clock by 5 min to 2 h, either way, then reset it"
}
func (clockJump) Needs() []target.Capability     { return needsClock }
func (clockJump) Available(t target.Target) bool { return clockAvailable(t) }
func (clockJump) Inject(ctx context.Context, t target.Target, rng *rand.Rand) (Injection, error) {
	return shiftClock(t, rng, "jump", minJump, maxJump)
}

func shiftClock(t target.Target, rng *rand.Rand, what string, lo, hi time.Duration) (Injection, error) {
	name, clocks, err := pickClock(t, rng)
	if err != nil {
		return Injection{}, err
	}
	d := offsetIn(rng, lo, hi)
	base, err := clocks.ClockOffset(name)
	if err != nil {
		return Injection{}, err
	}
	if err := clocks.SetClockOffset(name, base+d); err != nil {
		return Injection{}, err
	}
	return Injection{
		Description: fmt.Sprintf("%s clock of %s by %+v", what, name, d),
		Targets:     []string{name},
		Components:  []string{name},
		Params:      map[string]string{"offset": d.String()},
		Heal:        func() error { return clocks.ResetClock(name) },
	}, nil
}

// clockStrobe flips one component's clock between the true reading and an
// offset, again and again, until healed (Jepsen's strobe): each reading may
// be minutes off from the one before, either way.
type clockStrobe struct{}

func (clockStrobe) Name() string { return "clock-strobe" }
func (clockStrobe) Describe() string {
	return "flip one kubelet's or controller's clock between true and 10 s to 5 min off, every 1 to 10 s, until reset"
}
func (clockStrobe) Needs() []target.Capability     { return needsClock }
func (clockStrobe) Available(t target.Target) bool { return clockAvailable(t) }
func (clockStrobe) Inject(ctx context.Context, t target.Target, rng *rand.Rand) (Injection, error) {
	name, clocks, err := pickClock(t, rng)
	if err != nil {
		return Injection{}, err
	}
	delta := offsetIn(rng, minStrobe, maxStrobe)
	period := (minStrobePeriod + time.Duration(rng.Int64N(int64(maxStrobePeriod-minStrobePeriod)))).Truncate(time.Millisecond)
	wall := max(clocks.WallFor(period), time.Millisecond)
	base, err := clocks.ClockOffset(name)
	if err != nil {
		return Injection{}, err
	}
	if err := clocks.SetClockOffset(name, base+delta); err != nil {
		return Injection{}, err
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		// The strobe paces itself on wall time: the clock it flips must
		// not pace it, and the embedded cluster clock's timers are wall
		// timers anyway.
		t := time.NewTicker(wall)
		defer t.Stop()
		off := true
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				off = !off
				if off {
					_ = clocks.SetClockOffset(name, base+delta)
				} else {
					_ = clocks.SetClockOffset(name, base)
				}
			}
		}
	})
	var once sync.Once
	var healErr error
	return Injection{
		Description: fmt.Sprintf("strobe clock of %s by %+v every %s", name, delta, period),
		Targets:     []string{name},
		Components:  []string{name},
		Params:      map[string]string{"offset": delta.String(), "period": period.String()},
		Heal: func() error {
			once.Do(func() {
				close(stop)
				wg.Wait()
				healErr = clocks.ResetClock(name)
			})
			return healErr
		},
	}, nil
}
