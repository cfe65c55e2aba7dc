package kubelet

import "time"

// Restart back-off of LC-6.
const (
	BackoffInitial = 10 * time.Second
	BackoffMax     = 5 * time.Minute
	// BackoffReset: a container that ran this long before exiting restarts
	// with the initial delay again.
	BackoffReset = 10 * time.Minute
)

// Backoff is one container's restart back-off (LC-6): 10 s, 20 s, 40 s, …
// capped at 5 min, back to 10 s once a run lasted 10 min. The zero value is
// ready. It holds no clock; callers pass times. Not safe for concurrent use.
type Backoff struct {
	last time.Duration // the previous delay; 0 before the first restart
}

// Next returns the delay before restarting a container that ran for ran
// (from its start to its exit) and remembers it. It is deterministic.
func (b *Backoff) Next(ran time.Duration) time.Duration {
	switch {
	case b.last == 0 || ran >= BackoffReset:
		b.last = BackoffInitial
	default:
		b.last *= 2
		if b.last > BackoffMax {
			b.last = BackoffMax
		}
	}
	return b.last
}

// shouldRestart reports whether a container that exited with code should be
// restarted under policy (LC-6).
func shouldRestart(policy string, code int) bool {
	switch policy {
	case "Never":
		return false
	case "OnFailure":
		return code != 0
	default: // Always, and the API's default
		return true
	}
}
