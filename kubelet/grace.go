package kubelet

import (
	"context"
	"time"

	"github.com/pingcap/failpoint"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsafe/podsafe/internal/fpctx"
)

// Grace-period constants of GP-1, GP-3, GP-5 and LC-11.
const (
	// MinimumGracePeriodSeconds is GP-1's fallback and GP-3's shutdown
	// window: containers always get at least this long after preStop.
	MinimumGracePeriodSeconds = 2
	// PreStopExtension is LC-11's "one-time extension of 2 s" for a preStop
	// hook still running when the grace period expires. It is no extra wait
	// for the hook: the kubelet abandons the hook at the grace deadline and
	// sends TERM then, and the extension is GP-3's minimum shutdown window
	// between that TERM and KILL (upstream kuberuntime_container.go v1.37.2,
	// executePreStopHook waits at most the grace period, lines 801-808, and
	// killContainer then raises what is left to minimumGracePeriodInSeconds,
	// lines 907-910, before StopContainer, line 915).
	PreStopExtension = MinimumGracePeriodSeconds * time.Second
)

// KillReason says why the kubelet is killing a container; probe kills use
// the probe's own grace period (GP-1).
type KillReason string

// The reasons a container is killed.
const (
	ReasonDeletion     KillReason = "Deletion"
	ReasonStartupProbe KillReason = "StartupProbe"
	ReasonLiveness     KillReason = "LivenessProbe"
	ReasonEviction     KillReason = "Eviction"
	// ReasonOrphaned: the pod vanished from the API (force deletion, LC-13).
	ReasonOrphaned KillReason = "Orphaned"
)

// ContainerGracePeriod is GP-1, the grace period for killing container c of
// pod: the pod's deletionGracePeriodSeconds when set; else the spec's
// terminationGracePeriodSeconds, replaced by the startup or liveness probe's
// own terminationGracePeriodSeconds for a kill caused by that probe; else
// MinimumGracePeriodSeconds. It is pure.
func ContainerGracePeriod(pod *corev1.Pod, c *corev1.Container, reason KillReason) int64 {
	switch {
	case pod.DeletionGracePeriodSeconds != nil:
		return *pod.DeletionGracePeriodSeconds
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		g := *pod.Spec.TerminationGracePeriodSeconds
		if c == nil {
			return g
		}
		switch {
		case reason == ReasonStartupProbe && c.StartupProbe != nil && c.StartupProbe.TerminationGracePeriodSeconds != nil:
			g = *c.StartupProbe.TerminationGracePeriodSeconds
		case reason == ReasonLiveness && c.LivenessProbe != nil && c.LivenessProbe.TerminationGracePeriodSeconds != nil:
			g = *c.LivenessProbe.TerminationGracePeriodSeconds
		}
		return g
	}
	return MinimumGracePeriodSeconds
}

// EffectiveGracePeriod is GP-4 and GP-5, the pod-level grace period of a
// termination. current is the grace period of the termination under way (0
// when none has begun, as after a kubelet restart: PS-5). The pod's
// deletionGracePeriodSeconds, then override (eviction), each win when there
// is no current value or they are smaller; with nothing set it falls back to
// the spec; it is never below 1 s. changed reports that a termination under
// way must now use a different (shorter) value. It is pure.
func EffectiveGracePeriod(current int64, pod *corev1.Pod, override *int64) (grace int64, changed bool) {
	return effectiveGracePeriod(fpctx.For(fpctx.Unnamed), current, pod, override)
}

// effectiveGracePeriod is EffectiveGracePeriod whose failpoint marker sees
// fp (a kubelet's identity).
func effectiveGracePeriod(fp context.Context, current int64, pod *corev1.Pod, override *int64) (grace int64, changed bool) {
	grace = current
	d := pod.DeletionGracePeriodSeconds
	// Planted bug "kubelet-uses-spec-grace" (bug zoo): the deletion's grace
	// is ignored and the spec's terminationGracePeriodSeconds used in its
	// place (breaks GP-1).
	failpoint.InjectContext(fp, "useSpecGrace", func() {
		if d != nil && pod.Spec.TerminationGracePeriodSeconds != nil {
			d = pod.Spec.TerminationGracePeriodSeconds
		}
	})
	if d != nil && (grace == 0 || *d < grace) {
		grace = *d
	}
	if override != nil && (grace == 0 || *override < grace) {
		grace = *override
	}
	if grace == 0 && pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	if grace < 1 {
		grace = 1
	}
	return grace, current != 0 && current != grace
}

// RuntimeGracePeriod is GP-2 and GP-3: the time a container gets between TERM
// and KILL once its preStop hook took preStop: the grace period minus the
// hook's time, never less than MinimumGracePeriodSeconds. It is pure.
func RuntimeGracePeriod(grace int64, preStop time.Duration) time.Duration {
	d := time.Duration(grace)*time.Second - preStop
	if d < MinimumGracePeriodSeconds*time.Second {
		d = MinimumGracePeriodSeconds * time.Second
	}
	return d
}

// KillTimeline is the schedule of one container's graceful termination
// (PS-4, LC-11, GP-2, GP-3, GP-R), begun at Start with Grace seconds:
//
//   - the preStop hook, if any and only if Grace > 0, is waited on until the
//     grace deadline Start + Grace and no longer (GP-2): a hook still running
//     then is abandoned;
//   - TERM follows the end of the hook, or its abandonment at the deadline;
//   - KILL follows at max(Start + Grace, TERM + MinimumGracePeriodSeconds),
//     that is TERM + RuntimeGracePeriod(Grace, preStop time).
//
// So TERM comes no later than the deadline and KILL no later than the
// deadline + PreStopExtension, whatever the hook does: LC-11's extension of a
// hanging hook is the 2 s between TERM and KILL, as upstream's killContainer
// has it. Grace may later shrink (Shorten), never grow (PS-3); the deadline
// stays counted from Start, as the API server moves deletionTimestamp back
// by the difference. A KillTimeline holds no clock: callers pass times read
// from theirs. Not safe for concurrent use.
type KillTimeline struct {
	Start time.Time
	Grace int64
	// RunPreStop says the hook is to run (the container has one and the
	// grace period at the start was > 0).
	RunPreStop bool
	// TermAt is when TERM was sent; zero before.
	TermAt time.Time
}

// NewKillTimeline begins a termination at start with grace seconds.
func NewKillTimeline(start time.Time, grace int64, hasPreStop bool) *KillTimeline {
	return &KillTimeline{Start: start, Grace: grace, RunPreStop: hasPreStop && grace > 0}
}

// Deadline is Start + Grace.
func (k *KillTimeline) Deadline() time.Time {
	return k.Start.Add(time.Duration(k.Grace) * time.Second)
}

// Shorten lowers the grace period to grace if that is smaller and reports
// whether it did; a longer grace is ignored (PS-3).
func (k *KillTimeline) Shorten(grace int64) bool {
	if grace < 1 {
		grace = 1
	}
	if grace >= k.Grace {
		return false
	}
	k.Grace = grace
	return true
}

// PreStopDeadline is when a preStop hook still running is abandoned and
// TERM sent: the grace deadline, as it stands after any Shorten (GP-2,
// LC-11). A hook still running when a shorter grace moves the deadline into
// the past is abandoned at once.
func (k *KillTimeline) PreStopDeadline() time.Time { return k.Deadline() }

// PreStopExpired reports whether, at now, a preStop hook still running must
// be abandoned.
func (k *KillTimeline) PreStopExpired(now time.Time) bool {
	return !now.Before(k.PreStopDeadline())
}

// Termed records that TERM was sent at now.
func (k *KillTimeline) Termed(now time.Time) { k.TermAt = now }

// KillAt is when KILL is due: max(Deadline, TermAt + 2 s). It is meaningful
// only after Termed.
func (k *KillTimeline) KillAt() time.Time { return k.killAt(fpctx.For(fpctx.Unnamed)) }

// killAt is KillAt whose failpoint marker sees fp (a kubelet's identity).
func (k *KillTimeline) killAt(fp context.Context) time.Time {
	due := k.TermAt.Add(RuntimeGracePeriod(k.Grace, k.TermAt.Sub(k.Start)))
	// Planted bug "kubelet-kills-early" (bug zoo): KILL half a second after
	// TERM whatever the grace period (breaks PS-4, GP-2).
	failpoint.InjectContext(fp, "killEarly", func() { due = k.TermAt.Add(500 * time.Millisecond) })
	return due
}
