package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// TestFenceposts: surge rounds up, unavailability down, and a rollout that
// would round both to 0 may still lose one pod (ResolveFenceposts).
func TestFenceposts(t *testing.T) {
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	for _, tc := range []struct {
		replicas                   int32
		surge, unavailable         *intstr.IntOrString
		wantSurge, wantUnavailable int32
	}{
		{4, pct("25%"), pct("25%"), 1, 1},
		{10, pct("25%"), pct("25%"), 3, 2},
		{1, pct("25%"), pct("25%"), 1, 0},
		{3, pct("0%"), pct("10%"), 0, 1},
		{5, ptr.To(intstr.FromInt32(2)), ptr.To(intstr.FromInt32(0)), 2, 0},
	} {
		d := makeDeployment(tc.replicas, "nginx", 0, 0)
		d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: tc.surge, MaxUnavailable: tc.unavailable}
		s, u := fenceposts(d)
		if s != tc.wantSurge || u != tc.wantUnavailable {
			t.Errorf("%d replicas, surge %v, unavailable %v: got %d/%d, want %d/%d",
				tc.replicas, tc.surge, tc.unavailable, s, u, tc.wantSurge, tc.wantUnavailable)
		}
	}
}

// TestTemplateHash: the hash ignores nothing of the template, changes with
// the collision count, and is label-safe.
func TestTemplateHash(t *testing.T) {
	a, b := makeDeployment(1, "nginx", 1, 0), makeDeployment(1, "nginx:2", 1, 0)
	ha, hb := templateHash(&a.Spec.Template, nil), templateHash(&b.Spec.Template, nil)
	if ha == hb {
		t.Errorf("two templates hash alike: %s", ha)
	}
	if hc := templateHash(&a.Spec.Template, ptr.To[int32](1)); hc == ha {
		t.Errorf("the collision count does not change the hash %s", ha)
	}
	if ha != templateHash(&a.Spec.Template, nil) {
		t.Error("the hash is not stable")
	}
	if strings.ContainsAny(ha, "aeiou") {
		t.Errorf("hash %s is not SafeEncodeString's alphabet", ha)
	}
}

// TestDeploymentRollingUpdate rolls a Deployment of 4 from one image to another with
// maxSurge 1 and maxUnavailable 1: at no step do more than 5 pods run or
// fewer than 3 stay ready, the new set is <name>-<hash> with the hash label
// and selector, owned by the Deployment, revision 2, and the status ends
// complete.
func TestDeploymentRollingUpdate(t *testing.T) {
	e := newDepEnv(t, makeDeployment(4, "nginx", 1, 1))
	e.mustSync()
	e.replicate()
	e.makeReady()
	e.mustSync()
	if got := e.setSizes(); got != "1=4" {
		t.Fatalf("after the first rollout: sets %q, want 1=4", got)
	}
	e.update(func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "nginx:2" })
	for i := 0; i < 30; i++ {
		e.mustSync()
		e.replicate()
		if active, ready := e.podCounts(); active > 5 || ready < 3 {
			t.Fatalf("step %d: %d active pods (max 5), %d ready (min 3); sets %s", i, active, ready, e.setSizes())
		}
		e.finishTerminations()
		e.makeReady()
		if deploymentComplete(e.deployment(), &e.deployment().Status) && e.setSizes() == "1=0 2=4" {
			break
		}
	}
	e.mustSync()
	if got := e.setSizes(); got != "1=0 2=4" {
		t.Fatalf("after the rollout: sets %q, want 1=0 2=4", got)
	}
	d := e.deployment()
	newRS := e.sets()[1]
	hash := templateHash(&d.Spec.Template, nil)
	if newRS.Name != "web-"+hash || newRS.Labels[PodTemplateHashLabel] != hash ||
		newRS.Spec.Selector.MatchLabels[PodTemplateHashLabel] != hash || !ownedBy(newRS, d.UID) {
		t.Errorf("new set %s: labels %v, selector %v, owners %v; want web-%s labelled, selected and owned",
			newRS.Name, newRS.Labels, newRS.Spec.Selector, newRS.OwnerReferences, hash)
	}
	if newRS.Annotations[DesiredReplicasAnnotation] != "4" || newRS.Annotations[MaxReplicasAnnotation] != "5" {
		t.Errorf("new set annotations %v, want desired-replicas 4 and max-replicas 5", newRS.Annotations)
	}
	if d.Annotations[RevisionAnnotation] != "2" {
		t.Errorf("deployment revision %q, want 2", d.Annotations[RevisionAnnotation])
	}
	want := appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 4, UpdatedReplicas: 4, ReadyReplicas: 4, AvailableReplicas: 4,
		TerminatingReplicas: ptr.To[int32](0)}
	got := d.Status
	got.Conditions = nil
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	checkCondition(t, d, appsv1.DeploymentProgressing, corev1.ConditionTrue, reasonNewRSAvailable)
	checkCondition(t, d, appsv1.DeploymentAvailable, corev1.ConditionTrue, reasonMinimumAvailable)
}

// checkCondition fails unless d has condition ct with status and reason.
func checkCondition(t *testing.T, d *appsv1.Deployment, ct appsv1.DeploymentConditionType, s corev1.ConditionStatus, reason string) {
	t.Helper()
	c := condition(&d.Status, ct)
	if c == nil || c.Status != s || c.Reason != reason {
		t.Errorf("condition %s = %+v, want %s/%s", ct, c, s, reason)
	}
}

// TestProportionalScaling scales a Deployment from 4 to 8 mid-rollout (old
// set 3, new set 2 not ready): the 4 added replicas go to both sets in
// proportion (old 3→5, new 2→4), the total staying replicas + maxSurge.
func TestProportionalScaling(t *testing.T) {
	e := newDepEnv(t, makeDeployment(4, "nginx", 1, 1))
	e.mustSync()
	e.replicate()
	e.makeReady()
	e.mustSync()
	e.update(func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "nginx:2" })
	for range 4 {
		e.mustSync()
		e.replicate()
		e.finishTerminations()
	}
	if got := e.setSizes(); got != "1=3 2=2" {
		t.Fatalf("stalled rollout: sets %q, want 1=3 2=2", got)
	}
	e.update(func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](8) })
	e.mustSync()
	if got := e.setSizes(); got != "1=5 2=4" {
		t.Errorf("after scaling to 8: sets %q, want 1=5 2=4", got)
	}
	for _, rs := range e.sets() {
		if rs.Annotations[DesiredReplicasAnnotation] != "8" || rs.Annotations[MaxReplicasAnnotation] != "9" {
			t.Errorf("set %s annotations %v, want desired 8 and max 9 (8 + a surge of 1)", rs.Name, rs.Annotations)
		}
	}
}

// TestDeploymentRecreate: old pods all go first, and the new set is made only once
// none of them may still run, terminating ones included.
func TestDeploymentRecreate(t *testing.T) {
	d := makeDeployment(2, "nginx", 0, 0)
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	e := newDepEnv(t, d)
	e.mustSync()
	e.replicate()
	e.makeReady()
	e.mustSync()
	e.update(func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "nginx:2" })
	e.mustSync()
	if got := e.setSizes(); got != "1=0" {
		t.Fatalf("after the template change: sets %q, want 1=0", got)
	}
	e.replicate()
	e.mustSync()
	if got := e.setSizes(); got != "1=0" {
		t.Fatalf("with old pods terminating: sets %q, want 1=0 and no new set", got)
	}
	if st := e.deployment().Status; ptr.Deref(st.TerminatingReplicas, -1) != 2 || st.Replicas != 0 {
		t.Errorf("with old pods terminating: terminatingReplicas %v, replicas %d; want 2 and 0", st.TerminatingReplicas, st.Replicas)
	}
	e.finishTerminations()
	e.mustSync()
	if got := e.setSizes(); got != "1=0 2=2" {
		t.Fatalf("with the old pods gone: sets %q, want 1=0 2=2", got)
	}
}

// TestRevisionHistoryAndRollback: old sets beyond revisionHistoryLimit are
// deleted, and going back to an old template makes its set the new one
// with the next revision, its old revision in revision-history.
func TestRevisionHistoryAndRollback(t *testing.T) {
	d := makeDeployment(1, "nginx", 1, 0)
	d.Spec.RevisionHistoryLimit = ptr.To[int32](1)
	e := newDepEnv(t, d)
	rollout := func(image string) {
		if image != "" {
			e.update(func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = image })
		}
		for range 6 {
			e.mustSync()
			e.replicate()
			e.finishTerminations()
			e.makeReady()
		}
		e.mustSync()
	}
	rollout("")
	rollout("nginx:2")
	if got := e.setSizes(); got != "1=0 2=1" {
		t.Fatalf("after revision 2: sets %q, want 1=0 2=1", got)
	}
	rollout("nginx")
	if got := e.setSizes(); got != "3=1 2=0" {
		t.Fatalf("after rolling back: sets %q, want 3=1 2=0 (revision 1 is revision 3 now)", got)
	}
	if h := e.sets()[0].Annotations[RevisionHistoryAnnotation]; h != "1" {
		t.Errorf("revision-history %q, want 1", h)
	}
	rollout("nginx:3")
	if got := e.setSizes(); got != "3=0 4=1" {
		t.Errorf("after revision 4 with a history of 1: sets %q, want 3=0 4=1 (revision 2 deleted)", got)
	}
}

// TestDeploymentPaused: a paused Deployment's template change makes no new set, and
// Progressing says DeploymentPaused, then DeploymentResumed.
func TestDeploymentPaused(t *testing.T) {
	e := newDepEnv(t, makeDeployment(2, "nginx", 1, 0))
	e.mustSync()
	e.replicate()
	e.makeReady()
	e.mustSync()
	e.update(func(d *appsv1.Deployment) {
		d.Spec.Paused = true
		d.Spec.Template.Spec.Containers[0].Image = "nginx:2"
	})
	e.mustSync()
	if got := e.setSizes(); got != "1=2" {
		t.Errorf("paused: sets %q, want 1=2", got)
	}
	checkCondition(t, e.deployment(), appsv1.DeploymentProgressing, corev1.ConditionUnknown, reasonPaused)
	e.update(func(d *appsv1.Deployment) { d.Spec.Paused = false })
	e.mustSync()
	if got := e.setSizes(); got != "1=2 2=1" {
		t.Errorf("resumed: sets %q, want 1=2 2=1", got)
	}
	c := condition(&e.deployment().Status, appsv1.DeploymentProgressing)
	if c == nil || c.Reason == reasonPaused {
		t.Errorf("resumed: Progressing %+v, want it no longer paused", c)
	}
}

// TestProgressDeadline: a rollout whose new pods never become ready is
// reported ProgressDeadlineExceeded once the deadline passes on the
// controller's clock, and not before.
func TestProgressDeadline(t *testing.T) {
	d := makeDeployment(2, "nginx", 1, 0)
	d.Spec.ProgressDeadlineSeconds = ptr.To[int32](60)
	e := newDepEnv(t, d)
	e.mustSync()
	e.replicate()
	e.makeReady()
	e.mustSync()
	e.update(func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "nginx:bad" })
	e.mustSync()
	e.replicate()
	e.mustSync()
	e.clk.Step(30 * time.Second)
	e.mustSync()
	checkCondition(t, e.deployment(), appsv1.DeploymentProgressing, corev1.ConditionTrue, reasonRSUpdated)
	e.clk.Step(31 * time.Second)
	e.mustSync()
	checkCondition(t, e.deployment(), appsv1.DeploymentProgressing, corev1.ConditionFalse, reasonTimedOut)
}

// TestMinReadySeconds: a Ready pod counts as available only after
// minReadySeconds.
func TestMinReadySeconds(t *testing.T) {
	d := makeDeployment(1, "nginx", 1, 0)
	d.Spec.MinReadySeconds = 10
	e := newDepEnv(t, d)
	e.mustSync()
	e.replicate()
	e.makeReady()
	e.mustSync()
	if st := e.deployment().Status; st.ReadyReplicas != 1 || st.AvailableReplicas != 0 {
		t.Errorf("just ready: ready %d available %d, want 1 and 0", st.ReadyReplicas, st.AvailableReplicas)
	}
	e.clk.Step(11 * time.Second)
	e.mustSync()
	if st := e.deployment().Status; st.AvailableReplicas != 1 {
		t.Errorf("ready for 11 s: available %d, want 1", st.AvailableReplicas)
	}
}

// TestHashCollision: a set of another template holding the new set's name
// raises the collision count, and the next sync picks another name.
func TestHashCollision(t *testing.T) {
	d := makeDeployment(1, "nginx", 1, 0)
	hash := templateHash(&d.Spec.Template, nil)
	squatter := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-" + hash, Namespace: "default", UID: "squatter"},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "other"}}}}}
	e := newDepEnv(t, d, squatter)
	if err := e.sync(); err == nil || !strings.Contains(err.Error(), "collision") {
		t.Fatalf("sync: err %v, want a hash collision", err)
	}
	if cc := e.deployment().Status.CollisionCount; cc == nil || *cc != 1 {
		t.Fatalf("collisionCount %v, want 1", cc)
	}
	e.mustSync()
	want := "web-" + templateHash(&d.Spec.Template, ptr.To[int32](1))
	var names []string
	for _, rs := range e.sets() {
		names = append(names, rs.Name)
	}
	if !strings.Contains(strings.Join(names, " "), want) {
		t.Errorf("sets %v, want %s among them", names, want)
	}
}

// TestRollingUpdateScalesDownUnavailableOldPods: with the new set at its
// surge, an old set whose pods are not available is scaled down by them
// first, within what maxUnavailable allows (cleanupUnhealthy).
func TestRollingUpdateScalesDownUnavailableOldPods(t *testing.T) {
	e := newDepEnv(t, makeDeployment(4, "nginx", 1, 1))
	e.mustSync()
	e.replicate() // four pods, none ready
	e.update(func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "nginx:2" })
	// The new set is made at its surge, 1; 5 - (4 - 1) - 1 unavailable new
	// pod leaves room for one unavailable old pod to go.
	e.mustSync()
	if got := e.setSizes(); got != "1=3 2=1" {
		t.Errorf("after one sync: sets %q, want 1=3 2=1", got)
	}
}

// TestRollingUpdateScaleDownSyncDefersCleanup: a sync that scales an old set
// down ends with the status; deleting the set beyond revisionHistoryLimit
// waits for a later sync that sees it at zero.
func TestRollingUpdateScaleDownSyncDefersCleanup(t *testing.T) {
	d := makeDeployment(2, "nginx", 1, 0)
	d.Spec.RevisionHistoryLimit = ptr.To[int32](0)
	e := newDepEnv(t, d)
	e.mustSync()
	e.replicate()
	e.makeReady()
	e.update(func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "nginx:2" })
	for range 3 {
		e.mustSync()
		e.replicate()
		e.finishTerminations()
		e.makeReady()
	}
	if got := e.setSizes(); got != "1=1 2=2" {
		t.Fatalf("mid-rollout: sets %q, want 1=1 2=2", got)
	}
	old := e.sets()[0]
	for _, p := range e.pods() {
		if ownedBy(p, old.UID) {
			if err := e.cs.CoreV1().Pods("default").Delete(e.ctx, p.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.mustSync()
	if got := e.setSizes(); got != "1=0 2=2" {
		t.Errorf("after the scale-down sync: sets %q, want 1=0 2=2", got)
	}
	e.mustSync()
	if got := e.setSizes(); got != "2=2" {
		t.Errorf("after the next sync: sets %q, want 2=2", got)
	}
}

// TestScalingCompletedRolloutIgnoresEmptyOldSets: a set scaled to zero is
// not active, so resizing a finished rollout gives every replica to the new
// set, without the surge of a proportional split.
func TestScalingCompletedRolloutIgnoresEmptyOldSets(t *testing.T) {
	e := newDepEnv(t, makeDeployment(2, "nginx", 1, 0))
	e.mustSync()
	e.replicate()
	e.makeReady()
	e.update(func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "nginx:2" })
	for i := 0; i < 10 && e.setSizes() != "1=0 2=2"; i++ {
		e.mustSync()
		e.replicate()
		e.finishTerminations()
		e.makeReady()
	}
	if got := e.setSizes(); got != "1=0 2=2" {
		t.Fatalf("after the rollout: sets %q, want 1=0 2=2", got)
	}
	e.update(func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](4) })
	e.mustSync()
	if got := e.setSizes(); got != "1=0 2=4" {
		t.Errorf("after scaling to 4: sets %q, want 1=0 2=4", got)
	}
}
