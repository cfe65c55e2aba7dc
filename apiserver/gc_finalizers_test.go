package apiserver

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/podsafe/podsafe/raftstore"
)

func TestDeletionFinalizers(t *testing.T) {
	orphan, fg, bg := metav1.DeletePropagationOrphan, metav1.DeletePropagationForeground, metav1.DeletePropagationBackground
	for _, tc := range []struct {
		name    string
		current []string
		policy  *metav1.DeletionPropagation
		changed bool
		want    []string
	}{
		{name: "default is background", current: nil, want: nil},
		{name: "orphan", policy: &orphan, changed: true, want: []string{"orphan"}},
		{name: "foreground keeps others", current: []string{"example.com/x"}, policy: &fg, changed: true,
			want: []string{"example.com/x", "foregroundDeletion"}},
		{name: "background drops both", current: []string{"orphan", "example.com/x"}, policy: &bg, changed: true,
			want: []string{"example.com/x"}},
		{name: "no policy keeps the object's", current: []string{"foregroundDeletion"}, want: []string{"foregroundDeletion"}},
		{name: "orphan switches from foreground", current: []string{"foregroundDeletion"}, policy: &orphan, changed: true,
			want: []string{"orphan"}},
	} {
		changed, got := deletionFinalizers(tc.current, &metav1.DeleteOptions{PropagationPolicy: tc.policy})
		if changed != tc.changed {
			t.Errorf("%s: changed %v, want %v", tc.name, changed, tc.changed)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: finalizers (-want +got):\n%s", tc.name, diff)
		}
	}
}

// testReplicaSet is a minimal valid ReplicaSet in default.
func testReplicaSet(name string) *appsv1.ReplicaSet {
	labels := map[string]string{"app": name}
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:1.36"}}}}},
	}
}

// TestDeletePropagation: a DELETE's propagation policy becomes the
// finalizer the garbage collector acts on, the object is kept marked
// deleted (grace 0) with it, and the patch that removes the last finalizer
// removes the object; background (the default) removes it at once, and an
// unknown policy is upstream's 422.
func TestDeletePropagation(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	admin := e.client(IdentityAdmin)
	sets := admin.AppsV1().ReplicaSets("default")
	for _, tc := range []struct {
		policy metav1.DeletionPropagation
		want   string
	}{{metav1.DeletePropagationForeground, metav1.FinalizerDeleteDependents}, {metav1.DeletePropagationOrphan, metav1.FinalizerOrphanDependents}} {
		name := strings.ToLower(string(tc.policy))
		if _, err := sets.Create(ctx, testReplicaSet(name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := sets.Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &tc.policy}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := sets.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: the set is gone at once: %v", name, err)
		}
		if got.DeletionTimestamp == nil || ptr.Deref(got.DeletionGracePeriodSeconds, -1) != 0 {
			t.Errorf("%s: deletionTimestamp %v, grace %v; want marked deleted with grace 0", name, got.DeletionTimestamp, got.DeletionGracePeriodSeconds)
		}
		if diff := cmp.Diff([]string{tc.want}, got.Finalizers); diff != "" {
			t.Errorf("%s: finalizers (-want +got):\n%s", name, diff)
		}
		if _, err := sets.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
			t.Fatalf("%s: removing the finalizer: %v", name, err)
		}
		if _, err := sets.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: after its last finalizer: %v, want 404", name, err)
		}
	}
	if _, err := sets.Create(ctx, testReplicaSet("plain"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := sets.Delete(ctx, "plain", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := sets.Get(ctx, "plain", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("background deletion: %v, want 404", err)
	}
	bad := metav1.DeletionPropagation("Sideways")
	err := sets.Delete(ctx, "any", metav1.DeleteOptions{PropagationPolicy: &bad})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `propagationPolicy: Unsupported value: "Sideways"`) {
		t.Errorf("unknown policy: %v, want 422", err)
	}
}

// TestPodFinalizersHoldDeletion: a pod deleted at once (unscheduled) that
// keeps a finalizer stays marked deleted with grace 0 and goes with the
// finalizer.
func TestPodFinalizersHoldDeletion(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	admin := e.client(IdentityAdmin)
	p := makePod("held").obj()
	p.Finalizers = []string{"example.com/hold"}
	e.seedPod(p)
	pods := admin.CoreV1().Pods("default")
	if err := pods.Delete(ctx, "held", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := pods.Get(ctx, "held", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the held pod is gone: %v", err)
	}
	if got.DeletionTimestamp == nil || ptr.Deref(got.DeletionGracePeriodSeconds, -1) != 0 {
		t.Errorf("deletionTimestamp %v, grace %v; want marked deleted with grace 0", got.DeletionTimestamp, got.DeletionGracePeriodSeconds)
	}
	if _, err := pods.Patch(ctx, "held", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Get(ctx, "held", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after its finalizer: %v, want 404", err)
	}
}

// conflictOnce is a store whose first Update fails with a conflict, as a
// concurrent writer's would.
type conflictOnce struct {
	Store
	done atomic.Bool
}

func (s *conflictOnce) Update(ctx context.Context, key raftstore.Key, data []byte, p raftstore.Preconditions) (raftstore.Object, error) {
	if s.done.CompareAndSwap(false, true) {
		return raftstore.Object{}, raftstore.ErrConflict
	}
	return s.Store.Update(ctx, key, data, p)
}

// TestDeletePropagationAfterAConflict: a DELETE whose finalizer write lost
// a compare-and-swap tries again and answers the object kept, not a
// handler's panic (the retry once skipped its decision and answered
// nothing).
func TestDeletePropagationAfterAConflict(t *testing.T) {
	cluster := raftstore.OpenTestCluster(t, 1)
	st := &conflictOnce{}
	e := newTestEnvOn(t, cluster.Stores[0], func(c *Config) { st.Store = c.Store; c.Store = st })
	ctx := testCtx(t)
	sets := e.client(IdentityAdmin).AppsV1().ReplicaSets("default")
	if _, err := sets.Create(ctx, testReplicaSet("orphan"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	st.done.Store(false)
	orphan := metav1.DeletePropagationOrphan
	if err := sets.Delete(ctx, "orphan", metav1.DeleteOptions{PropagationPolicy: &orphan}); err != nil {
		t.Fatalf("delete after a conflict: %v", err)
	}
	if !st.done.Load() {
		t.Fatal("no conflict was injected")
	}
	got, err := sets.Get(ctx, "orphan", metav1.GetOptions{})
	if err != nil || got.DeletionTimestamp == nil || !slices.Equal(got.Finalizers, []string{metav1.FinalizerOrphanDependents}) {
		t.Errorf("after the retried delete: %v, %+v; want kept with the orphan finalizer", err, got)
	}
}
