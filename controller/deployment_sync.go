package controller

// The steps every rollout shares, as upstream's deployment/sync.go: finding
// or creating the new ReplicaSet with the next revision, scaling, cleaning
// up old revisions, and the status with its Available and Progressing
// conditions.

import (
	"context"
	"fmt"
	"math"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// rollout is one sync of one Deployment: d (a copy, updated as its status
// is written), its ReplicaSets and their pod counts.
type rollout struct {
	dc     *Deployment
	d      *appsv1.Deployment
	sets   []*appsv1.ReplicaSet
	counts map[types.UID]*rsCounts
	now    time.Time
}

// count returns rs's pod counts (zero for a set made in this sync).
func (r *rollout) count(rs *appsv1.ReplicaSet) rsCounts {
	if rs == nil {
		return rsCounts{}
	}
	if c := r.counts[rs.UID]; c != nil {
		return *c
	}
	return rsCounts{}
}

// available is the available pods of sets together.
func (r *rollout) available(sets []*appsv1.ReplicaSet) int32 {
	var n int32
	for _, rs := range sets {
		n += r.count(rs).available
	}
	return n
}

// replicas is d's spec.replicas.
func (r *rollout) replicas() int32 { return ptr.Deref(r.d.Spec.Replicas, 1) }

// newAndOld splits the sets into the new one (nil when none has d's
// template yet, unless create) and the old ones, giving the new one the
// next revision. It is getAllReplicaSetsAndSyncRevision.
func (r *rollout) newAndOld(ctx context.Context, create bool) (*appsv1.ReplicaSet, []*appsv1.ReplicaSet, error) {
	found := findNewReplicaSet(r.d, r.sets)
	var old []*appsv1.ReplicaSet
	for _, rs := range r.sets {
		if found == nil || rs.UID != found.UID {
			old = append(old, rs)
		}
	}
	newRS, err := r.getNewReplicaSet(ctx, found, old, create)
	return newRS, old, err
}

// getNewReplicaSet brings an existing new set's revision and annotations
// up to date, or creates the new set named after d and the template hash.
// A name taken by a set with another template is a hash collision: the
// collision count goes up, so the next sync hashes to another name.
func (r *rollout) getNewReplicaSet(ctx context.Context, existing *appsv1.ReplicaSet, old []*appsv1.ReplicaSet, create bool) (*appsv1.ReplicaSet, error) {
	d := r.d
	newRevision := maxRevision(old) + 1
	if existing != nil {
		rs := existing.DeepCopy()
		changed := setNewReplicaSetAnnotations(d, rs, newRevision, true)
		minReadyChanged := rs.Spec.MinReadySeconds != d.Spec.MinReadySeconds
		if changed || minReadyChanged {
			rs.Spec.MinReadySeconds = d.Spec.MinReadySeconds
			got, err := r.dc.cfg.Client.AppsV1().ReplicaSets(rs.Namespace).Update(ctx, rs, metav1.UpdateOptions{})
			if err != nil {
				return nil, fmt.Errorf("updating revision of replica set %s/%s: %w", rs.Namespace, rs.Name, err)
			}
			r.replace(got)
			rs = got
		}
		if d.Annotations[RevisionAnnotation] != rs.Annotations[RevisionAnnotation] {
			if err := r.setDeploymentRevision(ctx, rs.Annotations[RevisionAnnotation]); err != nil {
				return nil, err
			}
		}
		if condition(&d.Status, appsv1.DeploymentProgressing) == nil && hasProgressDeadline(d) {
			st := d.Status.DeepCopy()
			setCondition(st, newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, reasonFoundNewRS,
				fmt.Sprintf("Found new replica set %q", rs.Name), r.now))
			if err := r.writeStatus(ctx, *st); err != nil {
				return nil, err
			}
		}
		return rs, nil
	}
	if !create {
		return nil, nil
	}
	hash := templateHash(&d.Spec.Template, d.Status.CollisionCount)
	tmpl := replicaSetTemplate(d, hash)
	sel := d.Spec.Selector.DeepCopy()
	if sel.MatchLabels == nil {
		sel.MatchLabels = map[string]string{}
	}
	sel.MatchLabels[PodTemplateHashLabel] = hash
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: d.Name + "-" + hash, Namespace: d.Namespace, Labels: tmpl.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))},
		},
		Spec: appsv1.ReplicaSetSpec{Replicas: new(int32), MinReadySeconds: d.Spec.MinReadySeconds, Selector: sel, Template: tmpl},
	}
	*rs.Spec.Replicas = r.newReplicas(nil, old)
	setNewReplicaSetAnnotations(d, rs, newRevision, false)
	created, err := r.dc.cfg.Client.AppsV1().ReplicaSets(d.Namespace).Create(ctx, rs, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return r.collision(ctx, rs)
	}
	if err != nil {
		return nil, fmt.Errorf("creating replica set %s/%s: %w", rs.Namespace, rs.Name, err)
	}
	r.dc.log.Info("replica set created", "deployment", d.Namespace+"/"+d.Name, "replicaset", created.Name,
		"replicas", *created.Spec.Replicas, "revision", newRevision)
	r.dc.event(d, "ScalingReplicaSet", "Scaled up replica set %s from 0 to %d", created.Name, *created.Spec.Replicas)
	r.sets = append(r.sets, created)
	if err := r.setDeploymentRevision(ctx, created.Annotations[RevisionAnnotation]); err != nil {
		return nil, err
	}
	if hasProgressDeadline(d) {
		st := d.Status.DeepCopy()
		c := newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, reasonNewRSCreated,
			fmt.Sprintf("Created new replica set %q", created.Name), r.now)
		removeCondition(st, appsv1.DeploymentProgressing)
		setCondition(st, c)
		if err := r.writeStatus(ctx, *st); err != nil {
			return nil, err
		}
	}
	return created, nil
}

// collision handles a create that met a set of the same name: the set is
// the new one if d controls it and its template is d's (a lagging cache);
// otherwise the hash collided, and the collision count is raised.
func (r *rollout) collision(ctx context.Context, want *appsv1.ReplicaSet) (*appsv1.ReplicaSet, error) {
	got, err := r.dc.cfg.Client.AppsV1().ReplicaSets(want.Namespace).Get(ctx, want.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading replica set %s/%s after a name clash: %w", want.Namespace, want.Name, err)
	}
	if ownedBy(got, r.d.UID) && equalIgnoreHash(&got.Spec.Template, &r.d.Spec.Template) {
		return got, nil
	}
	st := r.d.Status.DeepCopy()
	st.CollisionCount = ptr.To(ptr.Deref(st.CollisionCount, 0) + 1)
	if err := r.writeStatus(ctx, *st); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("replica set %s/%s: hash collision with a set of another template; collision count now %d",
		want.Namespace, want.Name, *st.CollisionCount)
}

// setDeploymentRevision writes the revision annotation on d itself, as
// upstream keeps the Deployment's revision the new set's.
func (r *rollout) setDeploymentRevision(ctx context.Context, rev string) error {
	if rev == "" || r.d.Annotations[RevisionAnnotation] == rev {
		return nil
	}
	d := r.d.DeepCopy()
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	d.Annotations[RevisionAnnotation] = rev
	got, err := r.dc.cfg.Client.AppsV1().Deployments(d.Namespace).Update(ctx, d, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("annotating deployment %s/%s with revision %s: %w", d.Namespace, d.Name, rev, err)
	}
	r.d = got
	return nil
}

// replace swaps a written set into r.sets.
func (r *rollout) replace(rs *appsv1.ReplicaSet) {
	for i := range r.sets {
		if r.sets[i].UID == rs.UID {
			r.sets[i] = rs
			return
		}
	}
	r.sets = append(r.sets, rs)
}

// newReplicas is NewRSNewReplicas: Recreate wants every replica at once;
// RollingUpdate grows the new set only as far as the surge allows.
func (r *rollout) newReplicas(newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) int32 {
	want := r.replicas()
	if !isRolling(r.d) {
		return want
	}
	var cur int32
	if newRS != nil {
		cur = specReplicas(newRS)
	}
	total := sumSpec(old) + cur
	maxTotal := want + maxSurge(r.d)
	if total >= maxTotal {
		return cur
	}
	up := min(maxTotal-total, want-cur)
	return cur + max(up, 0)
}

// scaleSet sets rs's replicas to n and its replicas annotations to d's,
// when either differs, and reports whether it wrote.
func (r *rollout) scaleSet(ctx context.Context, rs *appsv1.ReplicaSet, n int32) (bool, error) {
	cp := rs.DeepCopy()
	annotated := setReplicasAnnotations(cp, r.replicas(), r.replicas()+maxSurge(r.d))
	from := specReplicas(rs)
	if from == n && !annotated {
		return false, nil
	}
	cp.Spec.Replicas = ptr.To(n)
	got, err := r.dc.cfg.Client.AppsV1().ReplicaSets(cp.Namespace).Update(ctx, cp, metav1.UpdateOptions{})
	if err != nil {
		return false, fmt.Errorf("scaling replica set %s/%s to %d: %w", cp.Namespace, cp.Name, n, err)
	}
	r.replace(got)
	if from != n {
		dir := "up"
		if n < from {
			dir = "down"
		}
		r.dc.log.Info("replica set scaled", "deployment", r.d.Namespace+"/"+r.d.Name, "replicaset", rs.Name, "from", from, "to", n)
		r.dc.event(r.d, "ScalingReplicaSet", "Scaled %s replica set %s from %d to %d", dir, rs.Name, from, n)
	}
	return true, nil
}

// cleanup deletes the oldest old sets beyond revisionHistoryLimit that are
// scaled to zero, have no pods and whose status is current.
func (r *rollout) cleanup(ctx context.Context, old []*appsv1.ReplicaSet) error {
	limit := r.d.Spec.RevisionHistoryLimit
	if limit == nil {
		return nil
	}
	var alive []*appsv1.ReplicaSet
	for _, rs := range old {
		if rs.DeletionTimestamp == nil {
			alive = append(alive, rs)
		}
	}
	diff := len(alive) - int(*limit)
	if diff <= 0 {
		return nil
	}
	sortByRevision(alive)
	for _, rs := range alive[:diff] {
		if rs.Status.Replicas != 0 || specReplicas(rs) != 0 || r.count(rs).existing != 0 || rs.Generation > rs.Status.ObservedGeneration {
			continue
		}
		err := r.dc.cfg.Client.AppsV1().ReplicaSets(rs.Namespace).Delete(ctx, rs.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &rs.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting old replica set %s/%s: %w", rs.Namespace, rs.Name, err)
		}
		r.dc.log.Info("old replica set deleted", "deployment", r.d.Namespace+"/"+r.d.Name, "replicaset", rs.Name)
	}
	return nil
}

// sortByRevision sorts sets by revision, oldest first (creation breaks ties).
func sortByRevision(sets []*appsv1.ReplicaSet) {
	byCreation(sets)
	for i := 1; i < len(sets); i++ {
		for j := i; j > 0 && revisionOf(sets[j]) < revisionOf(sets[j-1]); j-- {
			sets[j], sets[j-1] = sets[j-1], sets[j]
		}
	}
}

// calculateStatus is the status d's sets give it, with Available as
// upstream judges it (at least replicas - maxUnavailable available).
// Counts come from the pods, so minReadySeconds is honoured whatever the
// ReplicaSets' status says.
func (r *rollout) calculateStatus(all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) appsv1.DeploymentStatus {
	st := appsv1.DeploymentStatus{
		ObservedGeneration: r.d.Generation,
		CollisionCount:     r.d.Status.CollisionCount,
		Conditions:         append([]appsv1.DeploymentCondition(nil), r.d.Status.Conditions...),
	}
	var terminating int32
	for _, rs := range all {
		c := r.count(rs)
		st.Replicas += c.replicas
		st.ReadyReplicas += c.ready
		st.AvailableReplicas += c.available
		terminating += c.existing - c.replicas
	}
	// As with DeploymentReplicaSetTerminatingReplicas (on by default since
	// 1.35): pods that began terminating and have not stopped.
	st.TerminatingReplicas = ptr.To(terminating)
	st.UpdatedReplicas = r.count(newRS).replicas
	st.UnavailableReplicas = max(sumSpec(all)-st.AvailableReplicas, 0)
	if st.AvailableReplicas >= r.replicas()-maxUnavailable(r.d) {
		setCondition(&st, newCondition(appsv1.DeploymentAvailable, corev1.ConditionTrue, reasonMinimumAvailable,
			"Deployment has minimum availability.", r.now))
	} else {
		setCondition(&st, newCondition(appsv1.DeploymentAvailable, corev1.ConditionFalse, reasonMinimumUnavailable,
			"Deployment does not have minimum availability.", r.now))
	}
	return st
}

// syncRolloutStatus writes the status of a rollout in progress: Progressing
// says NewReplicaSetAvailable once complete, ReplicaSetUpdated while it
// moves, ProgressDeadlineExceeded once it stood still past the deadline;
// a rollout not yet complete is looked at again when its deadline passes.
func (r *rollout) syncRolloutStatus(ctx context.Context, all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) error {
	d := r.d
	st := r.calculateStatus(all, newRS)
	if !hasProgressDeadline(d) {
		removeCondition(&st, appsv1.DeploymentProgressing)
	}
	cur := condition(&d.Status, appsv1.DeploymentProgressing)
	complete := st.Replicas == st.UpdatedReplicas && cur != nil && cur.Reason == reasonNewRSAvailable
	if hasProgressDeadline(d) && !complete {
		name := ""
		if newRS != nil {
			name = newRS.Name
		}
		switch {
		case deploymentComplete(d, &st):
			setCondition(&st, newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, reasonNewRSAvailable,
				fmt.Sprintf("ReplicaSet %q has successfully progressed.", name), r.now))
		case deploymentProgressing(d, &st):
			c := newCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, reasonRSUpdated,
				fmt.Sprintf("ReplicaSet %q is progressing.", name), r.now)
			if cur != nil {
				if cur.Status == corev1.ConditionTrue {
					c.LastTransitionTime = cur.LastTransitionTime
				}
				removeCondition(&st, appsv1.DeploymentProgressing)
			}
			setCondition(&st, c)
		case deploymentTimedOut(d, &st, r.now):
			setCondition(&st, newCondition(appsv1.DeploymentProgressing, corev1.ConditionFalse, reasonTimedOut,
				fmt.Sprintf("ReplicaSet %q has timed out progressing.", name), r.now))
		}
	}
	if apiequality.Semantic.DeepEqual(d.Status, st) {
		r.requeueStuck(&st)
		return nil
	}
	return r.writeStatus(ctx, st)
}

// requeueStuck queues d again when its progress deadline passes, so a
// rollout that stops moving is reported as ProgressDeadlineExceeded.
func (r *rollout) requeueStuck(st *appsv1.DeploymentStatus) {
	d := r.d
	c := condition(st, appsv1.DeploymentProgressing)
	if !hasProgressDeadline(d) || c == nil || deploymentComplete(d, st) || c.Reason == reasonTimedOut {
		return
	}
	key := d.Namespace + "/" + d.Name
	if deploymentTimedOut(d, st, r.now) {
		r.dc.queue.add(key)
		return
	}
	after := c.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second).Sub(r.now)
	if after < time.Second {
		after = time.Second
	}
	r.dc.queue.addAfter(key, min(after, time.Duration(math.MaxInt32)*time.Second))
}

// syncStatus writes the status the sets give d when it changed.
func (r *rollout) syncStatus(ctx context.Context, all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) error {
	st := r.calculateStatus(all, newRS)
	if apiequality.Semantic.DeepEqual(r.d.Status, st) {
		return nil
	}
	return r.writeStatus(ctx, st)
}

// syncStatusOnly is the sync of a Deployment being deleted: its status,
// nothing scaled.
func (r *rollout) syncStatusOnly(ctx context.Context) error {
	newRS, old, err := r.newAndOld(ctx, false)
	if err != nil {
		return err
	}
	return r.syncStatus(ctx, append(old, newRS), newRS)
}

// writeStatus writes st as d's status.
func (r *rollout) writeStatus(ctx context.Context, st appsv1.DeploymentStatus) error {
	d := r.d.DeepCopy()
	d.Status = st
	got, err := r.dc.cfg.Client.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("updating status of deployment %s/%s: %w", d.Namespace, d.Name, err)
	}
	r.d = got
	return nil
}

// checkPausedConditions sets Progressing to Unknown with DeploymentPaused
// when d is paused and DeploymentResumed when it resumes, unless it already
// timed out.
func (r *rollout) checkPausedConditions(ctx context.Context) error {
	d := r.d
	if !hasProgressDeadline(d) {
		return nil
	}
	c := condition(&d.Status, appsv1.DeploymentProgressing)
	if c != nil && c.Reason == reasonTimedOut {
		return nil
	}
	paused := c != nil && c.Reason == reasonPaused
	st := d.Status.DeepCopy()
	switch {
	case d.Spec.Paused && !paused:
		setCondition(st, newCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, reasonPaused, "Deployment is paused", r.now))
	case !d.Spec.Paused && paused:
		setCondition(st, newCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, reasonResumed, "Deployment is resumed", r.now))
	default:
		return nil
	}
	return r.writeStatus(ctx, *st)
}
