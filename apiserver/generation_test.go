package apiserver

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// TestGeneration: metadata.generation starts at 1 and counts spec changes,
// whether by update, patch or the scale subresource; status writes and
// metadata-only changes leave it alone (controllers report
// status.observedGeneration against it).
func TestGeneration(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	cs := e.client(IdentityAdmin)
	sets := cs.AppsV1().StatefulSets("default")
	set := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "sim"}}}}}}
	got, err := sets.Create(ctx, set, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := func(step string, g int64) {
		t.Helper()
		if got.Generation != g {
			t.Errorf("%s: generation %d, want %d", step, got.Generation, g)
		}
	}
	want("create", 1)
	got.Labels = map[string]string{"x": "y"}
	if got, err = sets.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want("label change", 1)
	got.Spec.Replicas = ptr.To[int32](2)
	if got, err = sets.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want("spec update", 2)
	got.Status.Replicas = 2
	if got, err = sets.UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want("status update", 2)
	if got, err = sets.Patch(ctx, "db", types.MergePatchType, []byte(`{"spec":{"replicas":3}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	want("spec patch", 3)
	sc, err := sets.GetScale(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sc.Spec.Replicas = 5
	if _, err := sets.UpdateScale(ctx, "db", sc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err = sets.Get(ctx, "db", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	want("scale", 4)
}
