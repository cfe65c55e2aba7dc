package checker

import (
	"fmt"
	"time"

	"github.com/podsafe/podsafe/history"
)

// The grace checker's upper bound (LC-11, PS-3, GP-5): once the store shows
// a pod terminating with grace g, its kill must send TERM by the deadline and
// KILL at most 2 s later (see CheckGrace).

// firstGraces returns, per pod UID, the store's first version of the pod
// terminating: its deletionGracePeriodSeconds, committed at t (0: force
// deleted, which bounds nothing). Only the first version carrying the field
// of each object (a name between its DELETED events) counts.
func firstGraces(pods *podIndex) map[string]graceChange {
	out := map[string]graceChange{}
	seen := map[string]bool{} // namespace/name → its terminating version was read
	for _, vr := range pods.versions {
		ev := &pods.store[vr.store]
		name := podRef(ev.Namespace, ev.Name)
		p := vr.pod
		switch {
		case ev.Type == history.StoreDeleted:
			delete(seen, name)
			continue
		case seen[name] || p == nil || p.Metadata.UID == "" || p.Metadata.DeletionGracePeriodSeconds == nil ||
			!containsQuoted(ev.Object, "deletionGracePeriodSeconds"):
			continue
		}
		seen[name] = true
		if _, ok := out[p.Metadata.UID]; !ok {
			out[p.Metadata.UID] = graceChange{t: ev.T, to: *p.Metadata.DeletionGracePeriodSeconds, rv: ev.RV, event: name}
		}
	}
	return out
}

// lateKill applies the upper bound of a deletion's grace to kill a (see
// CheckGrace) and returns the evidence of the first grace in the store whose
// deadline its TERM or its end overran.
func lateKill(h *history.History, a killAttempt, facts *graceFacts, first map[string]graceChange, n *upperCounts) (Evidence, bool) {
	pf := facts.pods[a.uid]
	ledger := h.Ledger
	if pf == nil || pf.gone <= ledger[a.start()].T {
		return Evidence{}, false // no store record, or an orphan's kill (LC-13)
	}
	var changes []graceChange
	if f, ok := first[a.uid]; ok && f.to > 0 {
		changes = append(changes, f)
	}
	changes = append(changes, pf.shortened...)
	if len(changes) == 0 {
		return Evidence{}, false
	}
	endAt := a.kill
	if endAt < 0 || (a.end >= 0 && a.end < endAt) {
		endAt = a.end
	}
	start := ledger[a.start()]
	judged, faulted := false, false
	for _, ch := range changes {
		grace := time.Duration(ch.to) * time.Second
		// TERM by D, the end by D + 2 s (see CheckGrace).
		for _, b := range []struct {
			i     int
			extra time.Duration
		}{{a.term, 0}, {endAt, minShutdown}} {
			if b.i < 0 || b.i < a.start() || ch.t >= ledger[b.i].T {
				continue
			}
			e := ledger[b.i]
			if faultDuring(h.Nemesis, ch.t, e.T) {
				faulted = true
				continue
			}
			judged = true
			took := e.Scaled.Sub(start.Scaled)
			if took <= grace+b.extra+GraceTolerance || e.T <= start.T {
				continue
			}
			// The node's clock rate against the recorder's, from the kill
			// itself: no fault skewed it in between. The bound, from the
			// kill's start: max(g, t - start) + slack + extra.
			rate := float64(took) / float64(e.T-start.T)
			learn := time.Duration(float64(ch.t-start.T) * rate)
			bound := max(grace, learn) + time.Duration(float64(GraceReactionSlack)*rate) + b.extra
			if took <= bound+GraceTolerance {
				continue
			}
			what := "TERM"
			switch {
			case b.i == a.kill:
				what = "KILL"
			case b.i != a.term:
				// Without a KILL, the kubelet must be seen alive past the
				// bound: one stopped with the cluster kills nothing more.
				if !kubeletAlive(h.API, a.node, start.T+int64(float64(bound)/rate), e.T) {
					continue
				}
				what = "the container's exit"
			}
			n.judged++
			if faulted {
				n.faulted++
			}
			change := fmt.Sprintf("the store marked the pod terminating with a grace of %d s at t=%s (rv %s)", ch.to, nanos(ch.t), ch.rv)
			if ch.from > 0 {
				change = fmt.Sprintf("the store shortened the pod's grace from %d s to %d s at t=%s (rv %s)", ch.from, ch.to, nanos(ch.t), ch.rv)
			}
			limit := fmt.Sprintf("max(start + %d s, that) + %s of wall time to react", ch.to, seconds(GraceReactionSlack))
			if b.extra > 0 {
				limit += fmt.Sprintf(" + %s (GP-3, LC-11)", seconds(b.extra))
			}
			return Evidence{
				Key: podRef(a.namespace, a.pod),
				Description: fmt.Sprintf("container %q of pod %s (UID %s) on node %s: %s, yet %s at %s came %s after the kill began at %s, later than %s = %s after the start (LC-11, PS-4; PS-3, GP-5); the kubelet stated a grace of %d s",
					a.container, podRef(a.namespace, a.pod), a.uid, a.node, change, what, at(ledger, b.i),
					seconds(took), at(ledger, a.start()), limit, seconds(bound), statedGrace(ledger, a)),
				Ledger: ledgerEntries(ledger, a.preStopStart, a.preStopEnd, a.term, a.kill, a.end),
				API:    apiCalls(h.API, shorteningCalls(h.API, a, ch)...),
			}, true
		}
	}
	if judged {
		n.judged++
	}
	if faulted {
		n.faulted++
	}
	return Evidence{}, false
}
