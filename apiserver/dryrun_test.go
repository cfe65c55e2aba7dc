package apiserver

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// A dry run answers as the write would, refusals included, and writes
// nothing: the store's revision does not move.
func TestDryRun(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	existing := e.seedPod(makePod("existing").node("node-1").grace(30).obj())
	dry := []string{metav1.DryRunAll}
	pods := e.client(IdentityWorkload).CoreV1().Pods("default")
	revision := func() uint64 {
		_, rev, err := e.store.List(ctx, "pods", "")
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	before, snap := revision(), e.podSnapshot()
	unchanged := func(what string) {
		t.Helper()
		if rev := revision(); rev != before {
			t.Errorf("%s: the store moved from revision %d to %d", what, before, rev)
		}
		if diff := cmp.Diff(snap, e.podSnapshot()); diff != "" {
			t.Errorf("%s changed the pods (-before +after):\n%s", what, diff)
		}
	}

	created, err := pods.Create(ctx, makePod("new").obj(), metav1.CreateOptions{DryRun: dry})
	if err != nil || created.Name != "new" || created.UID == "" || created.Spec.TerminationGracePeriodSeconds == nil {
		t.Errorf("dry create: %v, %+v", err, created)
	}
	unchanged("a dry create")
	if _, err := pods.Create(ctx, makePod("existing").obj(), metav1.CreateOptions{DryRun: dry}); !apierrors.IsAlreadyExists(err) {
		t.Errorf("dry create of an existing name: %v, want 409", err)
	}

	upd := existing.DeepCopy()
	upd.Labels = map[string]string{"dry": "run"}
	got, err := pods.Update(ctx, upd, metav1.UpdateOptions{DryRun: dry})
	if err != nil || got.Labels["dry"] != "run" {
		t.Errorf("dry update: %v, %v", err, got.Labels)
	}
	stale := upd.DeepCopy()
	stale.ResourceVersion = "1"
	if _, err := pods.Update(ctx, stale, metav1.UpdateOptions{DryRun: dry}); !apierrors.IsConflict(err) {
		t.Errorf("dry update at a stale resourceVersion: %v, want 409", err)
	}
	got, err = pods.Patch(ctx, "existing", types.MergePatchType, []byte(`{"metadata":{"labels":{"patched":"yes"}}}`), metav1.PatchOptions{DryRun: dry})
	if err != nil || got.Labels["patched"] != "yes" {
		t.Errorf("dry patch: %v, %v", err, got)
	}
	unchanged("a dry update and patch")

	// A graceful deletion answers the pod as it would be terminating.
	if err := pods.Delete(ctx, "existing", metav1.DeleteOptions{DryRun: dry}); err != nil {
		t.Errorf("dry delete: %v", err)
	}
	// The authority rules still refuse: the workload may not force delete
	// a running pod (PS-9).
	if err := pods.Delete(ctx, "existing", metav1.DeleteOptions{DryRun: dry, GracePeriodSeconds: ptr.To[int64](0)}); !apierrors.IsForbidden(err) {
		t.Errorf("dry force delete by the workload: %v, want 403", err)
	}
	if err := pods.DeleteCollection(ctx, metav1.DeleteOptions{DryRun: dry}, metav1.ListOptions{}); err != nil {
		t.Errorf("dry delete collection: %v", err)
	}
	unchanged("dry deletions")

	// A Service's dry create shows a cluster IP and takes none.
	svcs := e.client(IdentityAdmin).CoreV1().Services("default")
	svc, err := svcs.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{DryRun: dry})
	if err != nil || svc.Spec.ClusterIP == "" {
		t.Errorf("dry service: %v, %+v", err, svc)
	}
	if ips, _, err := e.store.List(ctx, storeIPAddresses, ""); err != nil || len(ips) != 0 {
		t.Errorf("a dry service took %d addresses (%v)", len(ips), err)
	}
	if _, err := svcs.Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the dry service exists: %v", err)
	}
	if _, err := pods.Create(ctx, makePod("x").obj(), metav1.CreateOptions{DryRun: []string{"Some"}}); !apierrors.IsBadRequest(err) {
		t.Errorf("dryRun=Some: %v, want 400", err)
	}
}
