package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/cluster/scaledclock"
)

// Clock faults. Each shifts the clock view of one component (a kubelet or a
// controller: cluster.ClockComponents) and heals by resetting it. Only the
// component's readings move; its timers keep their durations, as a wall
// clock step leaves monotonic timers alone. Durations are in cluster (scaled)
// time.
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

func clockAvailable(c *cluster.Cluster) bool { return len(c.ClockComponents()) > 0 }

// pickClock picks a random component with its own clock view.
func pickClock(c *cluster.Cluster, rng *rand.Rand) (string, *scaledclock.Clock, error) {
	comps := c.ClockComponents()
	if len(comps) == 0 {
		return "", nil, fmt.Errorf("no component runs on its own clock view")
	}
	name := comps[rng.IntN(len(comps))]
	return name, c.ComponentClock(name), nil
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
func (clockSkew) Available(c *cluster.Cluster) bool { return clockAvailable(c) }
func (clockSkew) Inject(ctx context.Context, c *cluster.Cluster, rng *rand.Rand) (Injection, error) {
	return shiftClock(c, rng, "skew", minSkew, maxSkew)
}

// clockJump steps one component's clock by minutes to hours.
type clockJump struct{}

func (clockJump) Name() string { return "clock-jump" }
func (clockJump) Describe() string {
	return "step one kubelet's or controller's clock by 5 min to 2 h, either way, then reset it"
}
func (clockJump) Available(c *cluster.Cluster) bool { return clockAvailable(c) }
func (clockJump) Inject(ctx context.Context, c *cluster.Cluster, rng *rand.Rand) (Injection, error) {
	return shiftClock(c, rng, "jump", minJump, maxJump)
}

func shiftClock(c *cluster.Cluster, rng *rand.Rand, what string, lo, hi time.Duration) (Injection, error) {
	name, view, err := pickClock(c, rng)
	if err != nil {
		return Injection{}, err
	}
	d := offsetIn(rng, lo, hi)
	view.Jump(d)
	return Injection{
		Description: fmt.Sprintf("%s clock of %s by %+v", what, name, d),
		Targets:     []string{name},
		Heal: func() error {
			view.ResetOffset()
			return nil
		},
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
func (clockStrobe) Available(c *cluster.Cluster) bool { return clockAvailable(c) }
func (clockStrobe) Inject(ctx context.Context, c *cluster.Cluster, rng *rand.Rand) (Injection, error) {
	name, view, err := pickClock(c, rng)
	if err != nil {
		return Injection{}, err
	}
	delta := offsetIn(rng, minStrobe, maxStrobe)
	period := (minStrobePeriod + time.Duration(rng.Int64N(int64(maxStrobePeriod-minStrobePeriod)))).Truncate(time.Millisecond)
	wall := max(c.Clock().WallFor(period), time.Millisecond)
	base := view.Offset()
	view.SetOffset(base + delta)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		// The strobe paces itself on wall time: the view it flips must not
		// pace it, and the cluster clock's timers are wall timers anyway.
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
					view.SetOffset(base + delta)
				} else {
					view.SetOffset(base)
				}
			}
		}
	})
	var once sync.Once
	return Injection{
		Description: fmt.Sprintf("strobe clock of %s by %+v every %s", name, delta, period),
		Targets:     []string{name},
		Heal: func() error {
			once.Do(func() {
				close(stop)
				wg.Wait()
				view.ResetOffset()
			})
			return nil
		},
	}, nil
}
