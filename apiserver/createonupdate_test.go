package apiserver

import (
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestUpdateCreatesLease: as kube-apiserver v1.37.2 does for Leases
// (AllowCreateOnUpdate), a PUT of a Lease that does not exist creates it,
// even when it carries the resourceVersion of an earlier, deleted Lease;
// while it exists, a stale resourceVersion is a conflict. Pods are not
// created by PUT.
func TestUpdateCreatesLease(t *testing.T) {
	e := newTestEnv(t)
	cs := e.client(IdentityAdmin)
	ctx := testCtx(t)
	leases := cs.CoordinationV1().Leases("default")
	lease := func(holder, rv string) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: "k0", Namespace: "default", ResourceVersion: rv},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder)},
		}
	}
	first, err := leases.Create(ctx, lease("a", ""), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	second, err := leases.Update(ctx, lease("b", first.ResourceVersion), metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leases.Update(ctx, lease("c", first.ResourceVersion), metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("update with a stale resourceVersion of an existing lease: %v, want a conflict", err)
	}
	if err := leases.Delete(ctx, "k0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := leases.Update(ctx, lease("d", second.ResourceVersion), metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update of a deleted lease with its last resourceVersion: %v, want it created", err)
	}
	if *got.Spec.HolderIdentity != "d" || got.UID == first.UID || got.ResourceVersion == second.ResourceVersion {
		t.Fatalf("created lease %+v: want holder d, a new uid and a new resourceVersion", got.ObjectMeta)
	}
	resp := e.rawRequest("PUT", "/apis/coordination.k8s.io/v1/namespaces/default/leases/k1", IdentityAdmin, "application/json",
		[]byte(`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"k1","namespace":"default","resourceVersion":"7"}}`))
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("PUT creating a lease answered %d, want 201 Created", resp.StatusCode)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", ResourceVersion: "5"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
	if _, err := cs.CoreV1().Pods("default").Update(ctx, pod, metav1.UpdateOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("update of a missing pod: %v, want NotFound", err)
	}
}
