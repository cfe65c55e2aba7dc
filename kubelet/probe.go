package kubelet

import (
	"context"
	"time"

	"github.com/pingcap/failpoint"
	corev1 "k8s.io/api/core/v1"
)

// Probe defaults of the Kubernetes API (LC-9).
const (
	defaultProbePeriod    = 10 * time.Second
	defaultProbeFailures  = 3
	defaultProbeSuccesses = 1
)

// probeState is one running container's probe progress (LC-9): the startup
// probe holds the others off until it succeeds; liveness and startup
// failures kill; readiness decides ready, which is false before the
// readiness probe's initial delay.
type probeState struct {
	started    bool
	ready      bool
	fails      map[ProbeKind]int
	successes  int
	next       map[ProbeKind]time.Time
	configured bool
}

func newProbeState(c *corev1.Container, now time.Time) probeState {
	ps := probeState{started: c.StartupProbe == nil, ready: c.ReadinessProbe == nil,
		fails: map[ProbeKind]int{}, next: map[ProbeKind]time.Time{}, configured: true}
	for kind, p := range containerProbes(c) {
		ps.next[kind] = now.Add(time.Duration(p.InitialDelaySeconds) * time.Second)
	}
	return ps
}

func containerProbes(c *corev1.Container) map[ProbeKind]*corev1.Probe {
	m := map[ProbeKind]*corev1.Probe{}
	if c.StartupProbe != nil {
		m[ProbeStartup] = c.StartupProbe
	}
	if c.LivenessProbe != nil {
		m[ProbeLiveness] = c.LivenessProbe
	}
	if c.ReadinessProbe != nil {
		m[ProbeReadiness] = c.ReadinessProbe
	}
	return m
}

func probePeriod(p *corev1.Probe) time.Duration {
	if p.PeriodSeconds > 0 {
		return time.Duration(p.PeriodSeconds) * time.Second
	}
	return defaultProbePeriod
}

func probeThreshold(n int32, def int) int {
	if n > 0 {
		return int(n)
	}
	return def
}

// runProbes runs every probe that is due on the running app containers and
// returns when the next one is due.
func (w *podWorker) runProbes(ctx context.Context, now time.Time) time.Time {
	var next time.Time
	// Planted bug "kubelet-probes-before-startup" (bug zoo): liveness and
	// readiness probes run while the startup probe has not yet succeeded
	// (breaks LC-9).
	ignoreStartup := false
	failpoint.InjectContext(w.k.failpoints(), "probesIgnoreStartup", func() { ignoreStartup = true })
	for _, s := range w.ctrs {
		if s.init || s.cur == nil || s.cur.exited() || s.killing() || !s.probes.configured {
			continue
		}
		for kind, p := range containerProbes(s.spec) {
			if kind != ProbeStartup && !s.probes.started && !ignoreStartup {
				continue // LC-9: the startup probe disables the others
			}
			if kind == ProbeStartup && s.probes.started {
				continue
			}
			due := s.probes.next[kind]
			if now.Before(due) {
				if next.IsZero() || due.Before(next) {
					next = due
				}
				continue
			}
			rctx, cancel := context.WithTimeout(ctx, w.k.cfg.RequestTimeout)
			res, err := w.k.rt.Probe(rctx, s.cur.id, kind)
			cancel()
			if err != nil {
				res = ProbeUnknown
			}
			w.probeResult(ctx, s, kind, p, res)
			due = now.Add(probePeriod(p))
			s.probes.next[kind] = due
			if s.killing() {
				break
			}
			if next.IsZero() || due.Before(next) {
				next = due
			}
		}
	}
	return next
}

func (w *podWorker) probeResult(ctx context.Context, s *ctrState, kind ProbeKind, p *corev1.Probe, res ProbeResult) {
	ps := &s.probes
	if res == ProbeUnknown {
		return // neither success nor failure: keep the last verdict
	}
	if res == ProbeSuccess {
		ps.fails[kind] = 0
		switch kind {
		case ProbeStartup:
			ps.started = true
			// The other probes begin after their delays from now.
		case ProbeReadiness:
			ps.successes++
			if ps.successes >= probeThreshold(p.SuccessThreshold, defaultProbeSuccesses) {
				ps.ready = true
			}
		}
		return
	}
	ps.fails[kind]++
	w.unhealthyEvent(s, kind)
	if kind == ProbeReadiness {
		ps.successes = 0
	}
	if ps.fails[kind] < probeThreshold(p.FailureThreshold, defaultProbeFailures) {
		return
	}
	switch kind {
	case ProbeReadiness:
		ps.ready = false
	case ProbeStartup:
		w.killForProbe(ctx, s, ReasonStartupProbe)
	case ProbeLiveness:
		w.killForProbe(ctx, s, ReasonLiveness)
	}
}
