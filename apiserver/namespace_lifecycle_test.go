package apiserver

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNamespaceLifecycle: a namespace is created Active with the
// kubernetes finalizer, a DELETE marks it Terminating and keeps it (a
// second DELETE too), an update cannot drop spec.finalizers, and the
// namespace goes when the finalize subresource empties them.
func TestNamespaceLifecycle(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	admin := e.client(IdentityAdmin)
	ns, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]corev1.FinalizerName{corev1.FinalizerKubernetes}, ns.Spec.Finalizers); diff != "" {
		t.Errorf("spec.finalizers (-want +got):\n%s", diff)
	}
	if ns.Status.Phase != corev1.NamespaceActive {
		t.Errorf("phase %q, want Active", ns.Status.Phase)
	}
	// A plain update cannot remove the finalizer: only finalize can.
	ns.Spec.Finalizers = nil
	if ns, err = admin.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(ns.Spec.Finalizers) != 1 {
		t.Errorf("update changed spec.finalizers to %v", ns.Spec.Finalizers)
	}
	for i := range 2 {
		if err := admin.CoreV1().Namespaces().Delete(ctx, "team", metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete %d: %v", i, err)
		}
		got, err := admin.CoreV1().Namespaces().Get(ctx, "team", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("after delete %d the namespace is gone: %v", i, err)
		}
		if got.Status.Phase != corev1.NamespaceTerminating || got.DeletionTimestamp == nil {
			t.Fatalf("after delete %d: phase %q, deletionTimestamp %v; want Terminating with one", i, got.Status.Phase, got.DeletionTimestamp)
		}
		ns = got
	}
	// Not a finalizer name: 422.
	bad := ns.DeepCopy()
	bad.Spec.Finalizers = []corev1.FinalizerName{"not-qualified"}
	if _, err := admin.CoreV1().Namespaces().Finalize(ctx, bad, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), "neither a standard finalizer name nor is it fully qualified") {
		t.Errorf("finalize with a bad name: %v, want 422", err)
	}
	ns.Spec.Finalizers = nil
	if _, err := admin.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("finalize: %v", err)
	}
	if _, err := admin.CoreV1().Namespaces().Get(ctx, "team", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("finalized namespace: %v, want 404", err)
	}
}

// TestNamespaceFinalizeDiscovery: namespaces/finalize is listed with the
// one verb it serves, and answers nothing but PUT.
func TestNamespaceFinalizeDiscovery(t *testing.T) {
	e := newTestEnv(t)
	list, err := e.client(IdentityAdmin).Discovery().ServerResourcesForGroupVersion("v1")
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == "namespaces/finalize" })
	if i < 0 {
		t.Fatal("namespaces/finalize is not in discovery")
	}
	if diff := cmp.Diff(metav1.Verbs{VerbUpdate}, list.APIResources[i].Verbs); diff != "" {
		t.Errorf("verbs (-want +got):\n%s", diff)
	}
	resp := e.rawRequest(http.MethodGet, "/api/v1/namespaces/default/finalize", IdentityAdmin, "", nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET finalize: %d, want 405", resp.StatusCode)
	}
}

// TestNamespaceLifecycleAdmission: with the admission on, a namespaced
// object in a namespace that does not exist is upstream's 404, in a
// terminating one upstream's 403 with the NamespaceTerminating cause; a
// namespace created just before is found; with it off anything goes.
func TestNamespaceLifecycleAdmission(t *testing.T) {
	e := newTestEnv(t, func(c *Config) { c.NamespaceLifecycle = true })
	ctx := testCtx(t)
	admin := e.client(IdentityAdmin)
	_, err := admin.CoreV1().Pods("nowhere").Create(ctx, podIn("nowhere", "p"), metav1.CreateOptions{})
	if !apierrors.IsNotFound(err) || err.Error() != `namespaces "nowhere" not found` {
		t.Fatalf("pod in a missing namespace: %v, want 404 namespaces \"nowhere\" not found", err)
	}
	for _, name := range []string{"default", "team"} {
		if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Created just before: the cache may not hold it yet; the store does.
	if _, err := admin.CoreV1().Pods("team").Create(ctx, podIn("team", "p"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("pod in a new namespace: %v", err)
	}
	if err := admin.CoreV1().Namespaces().Delete(ctx, "team", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = admin.CoreV1().Pods("team").Create(ctx, podIn("team", "q"), metav1.CreateOptions{})
	var status *apierrors.StatusError
	if !apierrors.IsForbidden(err) || err.Error() != `pods "q" is forbidden: unable to create new content in namespace team because it is being terminated` {
		t.Fatalf("pod in a terminating namespace: %v, want upstream's 403", err)
	}
	if !errors.As(err, &status) || len(status.ErrStatus.Details.Causes) == 0 ||
		status.ErrStatus.Details.Causes[0].Type != corev1.NamespaceTerminatingCause {
		t.Errorf("403 without the NamespaceTerminating cause: %#v", status)
	}
	// Deleting content and writing it stay allowed.
	if err := admin.CoreV1().Pods("team").Delete(ctx, "p", metav1.DeleteOptions{}); err != nil {
		t.Errorf("deleting content of a terminating namespace: %v", err)
	}

	off := newTestEnv(t)
	if _, err := off.client(IdentityAdmin).CoreV1().Pods("nowhere").Create(ctx, podIn("nowhere", "p"), metav1.CreateOptions{}); err != nil {
		t.Errorf("admission off: %v", err)
	}
}

// podIn is a test pod in namespace ns.
func podIn(ns, name string) *corev1.Pod {
	p := makePod(name).obj()
	p.Namespace = ns
	return p
}
