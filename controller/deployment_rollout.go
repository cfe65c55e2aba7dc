package controller

// The strategies, as upstream's deployment/rolling.go and recreate.go, and
// the scaling of a Deployment that is paused or resized mid-rollout
// (sync.go's scale, with proportional scaling).

import (
	"context"
	"math"

	appsv1 "k8s.io/api/apps/v1"
)

// rolloutRolling is one step of a RollingUpdate: scale the new set up
// within maxSurge, else scale old sets down within maxUnavailable, else,
// once complete, clean up old revisions; the status either way.
func (r *rollout) rolloutRolling(ctx context.Context) error {
	newRS, old, err := r.newAndOld(ctx, true)
	if err != nil {
		return err
	}
	all := append(append([]*appsv1.ReplicaSet(nil), old...), newRS)
	scaledUp, err := r.reconcileNew(ctx, newRS, old)
	if err != nil {
		return err
	}
	if scaledUp {
		return r.syncRolloutStatus(ctx, r.current(all), r.currentOne(newRS))
	}
	scaledDown, err := r.reconcileOld(ctx, newRS, old)
	if err != nil {
		return err
	}
	if scaledDown {
		return r.syncRolloutStatus(ctx, r.current(all), r.currentOne(newRS))
	}
	st := r.calculateStatus(all, newRS)
	if deploymentComplete(r.d, &st) {
		if err := r.cleanup(ctx, r.current(old)); err != nil {
			return err
		}
	}
	return r.syncRolloutStatus(ctx, r.current(all), r.currentOne(newRS))
}

// current maps sets to their latest copies in r.sets (written this sync).
func (r *rollout) current(sets []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	out := make([]*appsv1.ReplicaSet, 0, len(sets))
	for _, rs := range sets {
		out = append(out, r.currentOne(rs))
	}
	return out
}

// currentOne is rs's latest copy in r.sets.
func (r *rollout) currentOne(rs *appsv1.ReplicaSet) *appsv1.ReplicaSet {
	if rs == nil {
		return nil
	}
	for _, s := range r.sets {
		if s.UID == rs.UID {
			return s
		}
	}
	return rs
}

// reconcileNew scales the new set toward replicas: down at once when
// above, up as far as the surge allows.
func (r *rollout) reconcileNew(ctx context.Context, newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) (bool, error) {
	want := r.replicas()
	switch cur := specReplicas(newRS); {
	case cur == want:
		return false, nil
	case cur > want:
		return r.scaleSet(ctx, newRS, want)
	}
	return r.scaleSet(ctx, newRS, r.newReplicas(newRS, old))
}

// reconcileOld scales old sets down as far as maxUnavailable allows:
// first their unavailable pods (they count against nothing), then
// available ones, oldest set first, never below replicas - maxUnavailable
// available pods together.
func (r *rollout) reconcileOld(ctx context.Context, newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) (bool, error) {
	active := activeSets(old)
	if sumSpec(active) == 0 {
		return false, nil
	}
	all := append(append([]*appsv1.ReplicaSet(nil), old...), newRS)
	minAvailable := r.replicas() - maxUnavailable(r.d)
	newUnavailable := specReplicas(newRS) - r.count(newRS).available
	maxScaledDown := sumSpec(all) - minAvailable - newUnavailable
	if maxScaledDown <= 0 {
		return false, nil
	}
	cleaned, err := r.cleanupUnhealthy(ctx, active, maxScaledDown)
	if err != nil {
		return false, err
	}
	scaled, err := r.scaleDownOld(ctx, r.current(all), r.current(active))
	if err != nil {
		return false, err
	}
	return cleaned+scaled > 0, nil
}

// cleanupUnhealthy scales old sets down by their unavailable pods, oldest
// set first, at most maxCleanup in all.
func (r *rollout) cleanupUnhealthy(ctx context.Context, old []*appsv1.ReplicaSet, maxCleanup int32) (int32, error) {
	sorted := append([]*appsv1.ReplicaSet(nil), old...)
	byCreation(sorted)
	var total int32
	for _, rs := range sorted {
		if total >= maxCleanup {
			break
		}
		spec, avail := specReplicas(rs), r.count(rs).available
		if spec == 0 || spec <= avail {
			continue
		}
		down := min(maxCleanup-total, spec-avail)
		if _, err := r.scaleSet(ctx, rs, spec-down); err != nil {
			return total, err
		}
		total += down
	}
	return total, nil
}

// scaleDownOld scales old sets down by as many available pods as the
// Deployment may lose, oldest set first.
func (r *rollout) scaleDownOld(ctx context.Context, all, old []*appsv1.ReplicaSet) (int32, error) {
	minAvailable := r.replicas() - maxUnavailable(r.d)
	available := r.available(all)
	if available <= minAvailable {
		return 0, nil
	}
	sorted := append([]*appsv1.ReplicaSet(nil), old...)
	byCreation(sorted)
	want := available - minAvailable
	var total int32
	for _, rs := range sorted {
		if total >= want {
			break
		}
		spec := specReplicas(rs)
		if spec == 0 {
			continue
		}
		down := min(spec, want-total)
		if _, err := r.scaleSet(ctx, rs, spec-down); err != nil {
			return total, err
		}
		total += down
	}
	return total, nil
}

// rolloutRecreate scales every old set to zero, waits until none of their
// pods may still run (terminating ones included), and only then creates or
// scales the new set: old and new never run together.
func (r *rollout) rolloutRecreate(ctx context.Context) error {
	newRS, old, err := r.newAndOld(ctx, false)
	if err != nil {
		return err
	}
	all := func() []*appsv1.ReplicaSet {
		return r.current(append(append([]*appsv1.ReplicaSet(nil), old...), newRS))
	}
	scaledDown := false
	for _, rs := range activeSets(old) {
		wrote, err := r.scaleSet(ctx, rs, 0)
		if err != nil {
			return err
		}
		scaledDown = scaledDown || wrote
	}
	if scaledDown {
		return r.syncRolloutStatus(ctx, all(), r.currentOne(newRS))
	}
	for _, rs := range old {
		if r.count(rs).existing > 0 {
			return r.syncRolloutStatus(ctx, all(), r.currentOne(newRS))
		}
	}
	if newRS == nil {
		if newRS, old, err = r.newAndOld(ctx, true); err != nil {
			return err
		}
	}
	if _, err := r.scaleSet(ctx, r.currentOne(newRS), r.replicas()); err != nil {
		return err
	}
	st := r.calculateStatus(all(), r.currentOne(newRS))
	if deploymentComplete(r.d, &st) {
		if err := r.cleanup(ctx, r.current(old)); err != nil {
			return err
		}
	}
	return r.syncRolloutStatus(ctx, all(), r.currentOne(newRS))
}

// isScalingEvent reports whether replicas changed since d's active sets
// were last scaled (their desired-replicas annotation says otherwise).
func (r *rollout) isScalingEvent() bool {
	for _, rs := range activeSets(r.sets) {
		if desired, ok := replicasAnnotation(rs, DesiredReplicasAnnotation); ok && desired != r.replicas() {
			return true
		}
	}
	return false
}

// syncScale is upstream's sync for a paused Deployment or a scaling event:
// the sets scaled to the new size (proportionally mid-rollout), old
// revisions cleaned up while paused, the status.
func (r *rollout) syncScale(ctx context.Context) error {
	newRS, old, err := r.newAndOld(ctx, false)
	if err != nil {
		return err
	}
	if err := r.scale(ctx, newRS, old); err != nil {
		return err
	}
	if r.d.Spec.Paused {
		if err := r.cleanup(ctx, r.current(old)); err != nil {
			return err
		}
	}
	all := r.current(append(append([]*appsv1.ReplicaSet(nil), old...), newRS))
	return r.syncStatus(ctx, all, r.currentOne(newRS))
}

// scale resizes d's sets to replicas. With one active set (or none) that
// set takes every replica; once the new set is saturated the old ones go
// to zero; mid-rollout the replicas added or removed are shared among the
// active sets in proportion to their size (largest first, leftovers to
// the largest), keeping the total within replicas + maxSurge.
func (r *rollout) scale(ctx context.Context, newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) error {
	want := r.replicas()
	if one := r.activeOrLatest(newRS, old); one != nil {
		if specReplicas(one) == want {
			return nil
		}
		_, err := r.scaleSet(ctx, one, want)
		return err
	}
	if r.saturated(newRS) {
		for _, rs := range activeSets(old) {
			if _, err := r.scaleSet(ctx, rs, 0); err != nil {
				return err
			}
		}
		return nil
	}
	if !isRolling(r.d) {
		return nil
	}
	active := activeSets(append(append([]*appsv1.ReplicaSet(nil), old...), newRS))
	allowed := want
	if want > 0 {
		allowed += maxSurge(r.d)
	}
	toAdd := allowed - sumSpec(active)
	bySize(active, toAdd > 0)
	sizes := make(map[string]int32, len(active))
	var added int32
	for _, rs := range active {
		p := r.proportion(rs, toAdd, added)
		sizes[rs.Name] = specReplicas(rs) + p
		added += p
	}
	for i, rs := range active {
		size := sizes[rs.Name]
		if i == 0 && toAdd != added {
			size = max(size+toAdd-added, 0)
		}
		if _, err := r.scaleSet(ctx, rs, size); err != nil {
			return err
		}
	}
	return nil
}

// activeOrLatest is FindActiveOrLatest: the one active set, or when none
// is active the new set (else the newest old one); nil with several.
func (r *rollout) activeOrLatest(newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	if newRS == nil && len(old) == 0 {
		return nil
	}
	active := activeSets(append(append([]*appsv1.ReplicaSet(nil), old...), newRS))
	switch len(active) {
	case 0:
		if newRS != nil {
			return newRS
		}
		sorted := append([]*appsv1.ReplicaSet(nil), old...)
		byCreation(sorted)
		return sorted[len(sorted)-1]
	case 1:
		return active[0]
	}
	return nil
}

// saturated: the new set runs every replica, available, and was sized for
// the current replicas.
func (r *rollout) saturated(newRS *appsv1.ReplicaSet) bool {
	if newRS == nil {
		return false
	}
	desired, ok := replicasAnnotation(newRS, DesiredReplicasAnnotation)
	want := r.replicas()
	return ok && desired == want && specReplicas(newRS) == want && r.count(newRS).available == want
}

// proportion is GetProportion: rs's share of toAdd, bounded by what is
// left to add (or remove).
func (r *rollout) proportion(rs *appsv1.ReplicaSet, toAdd, added int32) int32 {
	if rs == nil || specReplicas(rs) == 0 || toAdd == 0 || toAdd == added {
		return 0
	}
	fraction := r.fraction(rs)
	left := toAdd - added
	if toAdd > 0 {
		return min(fraction, left)
	}
	return max(fraction, left)
}

// fraction is getReplicaSetFraction: how rs would change if every set
// scaled by the ratio of the new to the old replicas + maxSurge, the old
// taken from rs's max-replicas annotation.
func (r *rollout) fraction(rs *appsv1.ReplicaSet) int32 {
	want := r.replicas()
	if want == 0 {
		return -specReplicas(rs)
	}
	total := want + maxSurge(r.d)
	annotated, ok := replicasAnnotation(rs, MaxReplicasAnnotation)
	if !ok || annotated == 0 {
		annotated = r.d.Status.Replicas
	}
	if annotated == 0 {
		return 0
	}
	size := float64(specReplicas(rs)*total) / float64(annotated)
	return int32(math.Round(size)) - specReplicas(rs)
}
