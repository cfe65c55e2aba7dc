package defaultpreemption

import (
	"math"
	"time"

	"github.com/podsafe/podsafe/scheduler/framework"
)

// Candidate is one node where preemption would work and the victims it takes.
type Candidate struct {
	Node          string
	Victims       []*framework.PodInfo
	PDBViolations int
}

// startTime is when a pod started: status.startTime, or now for a pod not
// started yet (assumed, or bound but not running), as kube-scheduler's
// GetPodStartTime has it.
func startTime(pi *framework.PodInfo, now time.Time) time.Time {
	if pi.StartTime.IsZero() {
		return now
	}
	return pi.StartTime
}

// moreImportant orders pods by priority, then the one that started first
// (kube-scheduler's MoreImportantPod): among equals, the longest-running pod
// is the last to be preempted.
func moreImportant(a, b *framework.PodInfo, now time.Time) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	return startTime(a, now).Before(startTime(b, now))
}

// candidateKey is what candidates are compared by, in kube-scheduler's
// order (pickOneNodeForPreemption; PR-7, PR-11): fewest PDB violations,
// then the lowest highest-priority victim, then the lowest sum of victim
// priorities, then the fewest victims, then the latest earliest start
// among the victims of the highest priority; a tie goes to the candidate
// found first.
type candidateKey struct {
	violations, victims int
	highest             int32
	sum                 int64
	// earliest is the earliest start among the victims of priority
	// highest.
	earliest time.Time
}

func keyOf(c *Candidate, now time.Time) candidateKey {
	k := candidateKey{violations: c.PDBViolations, victims: len(c.Victims), highest: math.MinInt32}
	for i, v := range c.Victims {
		start := startTime(v, now)
		switch {
		case i == 0 || v.Priority > k.highest:
			k.highest, k.earliest = v.Priority, start
		case v.Priority == k.highest && start.Before(k.earliest):
			k.earliest = start
		}
		// Shift so negative priorities still add up in order: a node
		// with more victims of a negative priority has the larger sum.
		k.sum += int64(v.Priority) + math.MaxInt32 + 1
	}
	return k
}

// less reports whether k is strictly better than o.
func (k candidateKey) less(o candidateKey) bool {
	switch {
	case k.violations != o.violations:
		return k.violations < o.violations
	case k.highest != o.highest:
		return k.highest < o.highest
	case k.sum != o.sum:
		return k.sum < o.sum
	case k.victims != o.victims:
		return k.victims < o.victims
	}
	// The victims that matter most have run the shortest: they lose the
	// least work.
	return k.earliest.After(o.earliest)
}

// unbeatableAbove reports whether no candidate on a node whose
// lower-priority pods all have priority low or more, and whose pods of
// priority exactly low started at latest or before, can be strictly
// better than k. Such a candidate has at least one victim, of priority
// low or more, so its highest victim is no lower than low and its sum no
// lower than that victim's; it only ties k on the first four criteria
// when k and it both take one victim of priority low, and then its
// victim started no later than latest.
func (k candidateKey) unbeatableAbove(low int32, latest time.Time) bool {
	if k.violations != 0 {
		return false
	}
	return low > k.highest || (low == k.highest && k.victims == 1 && !latest.After(k.earliest))
}
