package controller

// Pure helpers of the deployment controller, as upstream's
// pkg/controller/deployment/util: template hashes, revisions and their
// annotations, the surge and unavailability fenceposts, conditions and the
// tests of a rollout's state. None of them touches the API.

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/dump"
	"k8s.io/utils/ptr"
)

// Annotations and the label the deployment controller keeps, as upstream
// names them.
const (
	// RevisionAnnotation is the revision of a ReplicaSet's template, and of
	// the Deployment it last rolled out.
	RevisionAnnotation = "deployment.kubernetes.io/revision"
	// RevisionHistoryAnnotation lists the earlier revisions a ReplicaSet
	// was, when a rollback made it the new one again.
	RevisionHistoryAnnotation = "deployment.kubernetes.io/revision-history"
	// DesiredReplicasAnnotation is the Deployment's replicas when the
	// ReplicaSet was last scaled, so a scaling event is recognised.
	DesiredReplicasAnnotation = "deployment.kubernetes.io/desired-replicas"
	// MaxReplicasAnnotation is replicas plus maxSurge at that time, the
	// base of proportional scaling.
	MaxReplicasAnnotation = "deployment.kubernetes.io/max-replicas"
	// PodTemplateHashLabel tells a Deployment's ReplicaSets (and their
	// pods) apart: the hash of the template each was made from.
	PodTemplateHashLabel = appsv1.DefaultDeploymentUniqueLabelKey
	// lastAppliedAnnotation is kubectl apply's, never copied to a
	// ReplicaSet.
	lastAppliedAnnotation = corev1.LastAppliedConfigAnnotation
	// rollbackToAnnotation is the extensions/v1beta1 rollback request,
	// never copied either.
	rollbackToAnnotation = "deprecated.deployment.rollback.to"
)

// Condition reasons of a Deployment, as upstream's.
const (
	reasonNewRSAvailable        = "NewReplicaSetAvailable"
	reasonRSUpdated             = "ReplicaSetUpdated"
	reasonTimedOut              = "ProgressDeadlineExceeded"
	reasonNewRSCreated          = "NewReplicaSetCreated"
	reasonFoundNewRS            = "FoundNewReplicaSet"
	reasonPaused                = "DeploymentPaused"
	reasonResumed               = "DeploymentResumed"
	reasonMinimumAvailable      = "MinimumReplicasAvailable"
	reasonMinimumUnavailable    = "MinimumReplicasUnavailable"
	revisionHistoryLimitInChars = 2000
)

// templateHash is upstream's ComputeHash: FNV-32a of the template's deep
// dump, with the collision count mixed in once there was a collision, as a
// label-safe string.
func templateHash(tmpl *corev1.PodTemplateSpec, collisionCount *int32) string {
	h := fnv.New32a()
	fmt.Fprintf(h, "%v", dump.ForHash(*tmpl))
	if collisionCount != nil {
		b := make([]byte, 8)
		binary.LittleEndian.PutUint32(b, uint32(*collisionCount))
		h.Write(b)
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// equalIgnoreHash reports whether two templates are equal but for their
// pod-template-hash label.
func equalIgnoreHash(a, b *corev1.PodTemplateSpec) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	delete(a.Labels, PodTemplateHashLabel)
	delete(b.Labels, PodTemplateHashLabel)
	if len(a.Labels) == 0 {
		a.Labels = nil
	}
	if len(b.Labels) == 0 {
		b.Labels = nil
	}
	return apiequality.Semantic.DeepEqual(a, b)
}

// revisionOf reads a ReplicaSet's revision (0 when it has none or a bad one).
func revisionOf(obj metav1.Object) int64 {
	v, err := strconv.ParseInt(obj.GetAnnotations()[RevisionAnnotation], 10, 64)
	if err != nil {
		return 0
	}
	return v
}

// maxRevision is the highest revision among sets.
func maxRevision(sets []*appsv1.ReplicaSet) int64 {
	var m int64
	for _, rs := range sets {
		m = max(m, revisionOf(rs))
	}
	return m
}

// skipCopyAnnotation: the annotations a Deployment does not hand to its
// ReplicaSets (the controller's own and kubectl apply's).
func skipCopyAnnotation(key string) bool {
	switch key {
	case lastAppliedAnnotation, RevisionAnnotation, RevisionHistoryAnnotation,
		DesiredReplicasAnnotation, MaxReplicasAnnotation, rollbackToAnnotation:
		return true
	}
	return false
}

// copyDeploymentAnnotations copies d's annotations onto rs, reporting
// whether any changed.
func copyDeploymentAnnotations(d *appsv1.Deployment, rs *appsv1.ReplicaSet) bool {
	changed := false
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	for k, v := range d.Annotations {
		if skipCopyAnnotation(k) {
			continue
		}
		if cur, ok := rs.Annotations[k]; !ok || cur != v {
			rs.Annotations[k] = v
			changed = true
		}
	}
	return changed
}

// setNewReplicaSetAnnotations is upstream's SetNewReplicaSetAnnotations:
// d's annotations, the new revision (the set's old one joining its
// revision history), and for a set being created the replicas
// annotations. It reports whether rs changed.
func setNewReplicaSetAnnotations(d *appsv1.Deployment, rs *appsv1.ReplicaSet, newRevision int64, exists bool) bool {
	changed := copyDeploymentAnnotations(d, rs)
	old := rs.Annotations[RevisionAnnotation]
	oldN, err := strconv.ParseInt(old, 10, 64)
	if old != "" && err != nil {
		oldN = 0
	}
	if old == "" || oldN < newRevision {
		rs.Annotations[RevisionAnnotation] = strconv.FormatInt(newRevision, 10)
		changed = true
	}
	if old != "" && oldN < newRevision && exists {
		history := rs.Annotations[RevisionHistoryAnnotation]
		var list []string
		if history != "" {
			list = strings.Split(history, ",")
		}
		list = append(list, old)
		joined := strings.Join(list, ",")
		for len(joined) > revisionHistoryLimitInChars && len(list) > 1 {
			list = list[1:]
			joined = strings.Join(list, ",")
		}
		rs.Annotations[RevisionHistoryAnnotation] = joined
	}
	if !exists && setReplicasAnnotations(rs, *d.Spec.Replicas, *d.Spec.Replicas+maxSurge(d)) {
		changed = true
	}
	return changed
}

// setReplicasAnnotations writes the desired and max replicas annotations,
// reporting whether they changed.
func setReplicasAnnotations(rs *appsv1.ReplicaSet, desired, maxReplicas int32) bool {
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	d, m := strconv.Itoa(int(desired)), strconv.Itoa(int(maxReplicas))
	if rs.Annotations[DesiredReplicasAnnotation] == d && rs.Annotations[MaxReplicasAnnotation] == m {
		return false
	}
	rs.Annotations[DesiredReplicasAnnotation], rs.Annotations[MaxReplicasAnnotation] = d, m
	return true
}

// replicasAnnotation reads an integer annotation of rs.
func replicasAnnotation(rs *appsv1.ReplicaSet, key string) (int32, bool) {
	v, err := strconv.ParseInt(rs.Annotations[key], 10, 32)
	if err != nil {
		return 0, false
	}
	return int32(v), true
}

// scaledValue is GetScaledValueFromIntOrPercent for a valid value.
func scaledValue(v *intstr.IntOrString, total int, roundUp bool) int {
	if v == nil {
		return 0
	}
	if v.Type == intstr.Int {
		return v.IntValue()
	}
	p, err := strconv.Atoi(strings.TrimSuffix(v.StrVal, "%"))
	if err != nil {
		return 0
	}
	if roundUp {
		return int(math.Ceil(float64(p) * float64(total) / 100))
	}
	return int(math.Floor(float64(p) * float64(total) / 100))
}

// fenceposts is ResolveFenceposts: surge rounded up, unavailability down,
// and unavailability 1 when both come to 0 (validation forbids both 0,
// but a small replica count can round them there).
func fenceposts(d *appsv1.Deployment) (surge, unavailable int32) {
	ru := d.Spec.Strategy.RollingUpdate
	if ru == nil {
		return 0, 0
	}
	desired := int(ptr.Deref(d.Spec.Replicas, 1))
	surge = int32(scaledValue(ru.MaxSurge, desired, true))
	unavailable = int32(scaledValue(ru.MaxUnavailable, desired, false))
	if surge == 0 && unavailable == 0 {
		unavailable = 1
	}
	return surge, unavailable
}

// isRolling reports whether d rolls out with the RollingUpdate strategy.
func isRolling(d *appsv1.Deployment) bool {
	return d.Spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType
}

// maxSurge is how many pods above replicas a rollout may run.
func maxSurge(d *appsv1.Deployment) int32 {
	if !isRolling(d) {
		return 0
	}
	s, _ := fenceposts(d)
	return s
}

// maxUnavailable is how many of replicas a rollout may leave unavailable,
// never more than replicas.
func maxUnavailable(d *appsv1.Deployment) int32 {
	replicas := ptr.Deref(d.Spec.Replicas, 1)
	if !isRolling(d) || replicas == 0 {
		return 0
	}
	_, u := fenceposts(d)
	return min(u, replicas)
}

// specReplicas is a ReplicaSet's spec.replicas.
func specReplicas(rs *appsv1.ReplicaSet) int32 { return ptr.Deref(rs.Spec.Replicas, 1) }

// sumSpec is the replicas the sets ask for together.
func sumSpec(sets []*appsv1.ReplicaSet) int32 {
	var n int32
	for _, rs := range sets {
		if rs != nil {
			n += specReplicas(rs)
		}
	}
	return n
}

// activeSets drops nil and scaled-to-zero sets.
func activeSets(sets []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	for _, rs := range sets {
		if rs != nil && specReplicas(rs) > 0 {
			out = append(out, rs)
		}
	}
	return out
}

// byCreation sorts sets oldest first (name breaks ties).
func byCreation(sets []*appsv1.ReplicaSet) {
	sort.SliceStable(sets, func(i, j int) bool {
		a, b := sets[i], sets[j]
		if a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.Name < b.Name
		}
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	})
}

// bySize sorts sets largest first, ties broken newer first (newer true:
// ReplicaSetsBySizeNewer) or older first (ReplicaSetsBySizeOlder).
func bySize(sets []*appsv1.ReplicaSet, newer bool) {
	sort.SliceStable(sets, func(i, j int) bool {
		a, b := sets[i], sets[j]
		if specReplicas(a) != specReplicas(b) {
			return specReplicas(a) > specReplicas(b)
		}
		if a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.Name > b.Name == newer
		}
		return b.CreationTimestamp.Before(&a.CreationTimestamp) == newer
	})
}

// findNewReplicaSet is the oldest set whose template is d's, or nil.
func findNewReplicaSet(d *appsv1.Deployment, sets []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	sorted := append([]*appsv1.ReplicaSet(nil), sets...)
	byCreation(sorted)
	for _, rs := range sorted {
		if equalIgnoreHash(&rs.Spec.Template, &d.Spec.Template) {
			return rs
		}
	}
	return nil
}

// condition returns the condition of type t in st, or nil.
func condition(st *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

// newCondition builds a condition with both times now.
func newCondition(t appsv1.DeploymentConditionType, s corev1.ConditionStatus, reason, msg string, now time.Time) appsv1.DeploymentCondition {
	n := metav1.NewTime(now)
	return appsv1.DeploymentCondition{Type: t, Status: s, Reason: reason, Message: msg, LastUpdateTime: n, LastTransitionTime: n}
}

// setCondition is SetDeploymentCondition: an unchanged status and reason
// keep the condition as it is; a change of reason alone keeps its
// transition time.
func setCondition(st *appsv1.DeploymentStatus, c appsv1.DeploymentCondition) {
	cur := condition(st, c.Type)
	if cur != nil && cur.Status == c.Status && cur.Reason == c.Reason {
		return
	}
	if cur != nil && cur.Status == c.Status {
		c.LastTransitionTime = cur.LastTransitionTime
	}
	removeCondition(st, c.Type)
	st.Conditions = append(st.Conditions, c)
}

// removeCondition drops the condition of type t.
func removeCondition(st *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) {
	var out []appsv1.DeploymentCondition
	for _, c := range st.Conditions {
		if c.Type != t {
			out = append(out, c)
		}
	}
	st.Conditions = out
}

// hasProgressDeadline: MaxInt32 means none, as upstream reads it.
func hasProgressDeadline(d *appsv1.Deployment) bool {
	return d.Spec.ProgressDeadlineSeconds != nil && *d.Spec.ProgressDeadlineSeconds != math.MaxInt32
}

// deploymentComplete: every replica is updated and available, and the
// status is of the current generation.
func deploymentComplete(d *appsv1.Deployment, st *appsv1.DeploymentStatus) bool {
	r := ptr.Deref(d.Spec.Replicas, 1)
	return st.UpdatedReplicas == r && st.Replicas == r && st.AvailableReplicas == r && st.ObservedGeneration >= d.Generation
}

// deploymentProgressing: more updated, fewer old, or more ready or
// available replicas than d's status says.
func deploymentProgressing(d *appsv1.Deployment, st *appsv1.DeploymentStatus) bool {
	old := d.Status
	return st.UpdatedReplicas > old.UpdatedReplicas ||
		st.Replicas-st.UpdatedReplicas < old.Replicas-old.UpdatedReplicas ||
		st.ReadyReplicas > old.ReadyReplicas || st.AvailableReplicas > old.AvailableReplicas
}

// deploymentTimedOut: Progressing was last updated longer than the
// progress deadline ago, or already says so.
func deploymentTimedOut(d *appsv1.Deployment, st *appsv1.DeploymentStatus, now time.Time) bool {
	if !hasProgressDeadline(d) {
		return false
	}
	c := condition(st, appsv1.DeploymentProgressing)
	switch {
	case c == nil, c.Reason == reasonNewRSAvailable:
		return false
	case c.Reason == reasonTimedOut:
		return true
	}
	deadline := time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second
	return c.LastUpdateTime.Add(deadline).Before(now)
}

// replicaSetTemplate is d's template labelled with hash.
func replicaSetTemplate(d *appsv1.Deployment, hash string) corev1.PodTemplateSpec {
	t := *d.Spec.Template.DeepCopy()
	t.Labels = maps.Clone(t.Labels)
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	t.Labels[PodTemplateHashLabel] = hash
	return t
}
