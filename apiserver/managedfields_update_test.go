package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/podsafe/podsafe/raftstore"
)

// sorted is ss sorted.
func sorted(ss []string) []string {
	out := slices.Clone(ss)
	slices.Sort(out)
	return out
}

// clientAs is a clientset of identity sending userAgent.
func (e *testEnv) clientAs(identity, userAgent string) kubernetes.Interface {
	e.t.Helper()
	cfg := e.restConfig(identity)
	cfg.UserAgent = userAgent
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		e.t.Fatalf("clientset: %v", err)
	}
	return cs
}

// Creates, updates, patches and status writes record their manager as
// Update entries: the fieldManager parameter, or else the User-Agent's
// first part; the status subresource's entry names it.
func TestManagedFieldsUpdates(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	kubectl := e.clientAs(IdentityAdmin, "kubectl-create/v1.37.2 (linux/amd64) kubernetes/abcdef").CoreV1().Pods("default")
	created, err := kubectl.Create(ctx, makePod("p").label("app", "a").obj(), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"kubectl-create Update"}, entries(created.ManagedFields)); diff != "" {
		t.Errorf("after create (-want +got):\n%s", diff)
	}
	if owned := ownedBy(created.ManagedFields, "kubectl-create", metav1.ManagedFieldsOperationUpdate); !strings.Contains(owned, `"f:app"`) {
		t.Errorf("the creator does not own its label: %s", owned)
	}

	edit := e.clientAs(IdentityAdmin, "kubectl-edit/v1.37.2").CoreV1().Pods("default")
	patched, err := edit.Patch(ctx, "p", types.MergePatchType, []byte(`{"metadata":{"labels":{"app":"b"}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"kubectl-create Update", "kubectl-edit Update"}, entries(patched.ManagedFields)); diff != "" {
		t.Errorf("after the patch (-want +got):\n%s", diff)
	}
	// The changed label moved to its new writer.
	if owned := ownedBy(patched.ManagedFields, "kubectl-create", metav1.ManagedFieldsOperationUpdate); strings.Contains(owned, `"f:app"`) {
		t.Errorf("the creator still owns the label another manager changed: %s", owned)
	}

	// fieldManager wins over the User-Agent; a PUT records it too.
	upd := patched.DeepCopy()
	upd.Annotations = map[string]string{"note": "x"}
	updated, err := edit.Update(ctx, upd, metav1.UpdateOptions{FieldManager: "tool"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"kubectl-create Update", "kubectl-edit Update", "tool Update"}, entries(updated.ManagedFields)); diff != "" {
		t.Errorf("after the update (-want +got):\n%s", diff)
	}

	// A kubelet's status writes are one entry of subresource status, its
	// time moving, however many there are.
	kubelet := e.clientAs(IdentityAdmin, "kubelet/v1.37.2").CoreV1().Pods("default")
	var last *corev1.Pod
	for i := range 5 {
		cur := getPod(t, kubelet, "p")
		cur.Status.Message = fmt.Sprintf("beat %d", i)
		if last, err = kubelet.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"kubectl-create Update", "kubectl-edit Update", "kubelet Update status", "tool Update"}
	if diff := cmp.Diff(want, sorted(entries(last.ManagedFields))); diff != "" {
		t.Errorf("after five status writes (-want +got):\n%s", diff)
	}
	if owned := ownedBy(last.ManagedFields, "kubelet", metav1.ManagedFieldsOperationUpdate); !strings.Contains(owned, `"f:message"`) || strings.Contains(owned, "f:spec") {
		t.Errorf("the kubelet owns %s, want the status message and no spec", owned)
	}

	// An invalid fieldManager is upstream's 422.
	_, err = edit.Patch(ctx, "p", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{FieldManager: strings.Repeat("m", 129)})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "fieldManager: Too long") {
		t.Errorf("a 129-character fieldManager: %v, want 422", err)
	}
}

// An apply meeting a field an Update wrote conflicts with that manager,
// named with its apiVersion and time, as kubectl prints it.
func TestApplyConflictsWithUpdate(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	pods := e.client(IdentityAdmin).CoreV1().Pods("default")
	if _, err := pods.Create(ctx, makePod("p").label("app", "a").obj(), metav1.CreateOptions{FieldManager: "creator"}); err != nil {
		t.Fatal(err)
	}
	_, err := pods.Apply(ctx, corev1ac.Pod("p", "default").WithLabels(map[string]string{"app": "b"}), metav1.ApplyOptions{FieldManager: "kubectl"})
	if !apierrors.IsConflict(err) {
		t.Fatalf("apply over an Update's field: %v, want 409", err)
	}
	causes := err.(apierrors.APIStatus).Status().Details.Causes
	if len(causes) != 1 || causes[0].Field != ".metadata.labels.app" || causes[0].Message != `conflict with "creator" using v1` {
		t.Errorf("causes %+v", causes)
	}
}

// Update entries are capped at ten, as upstream caps them: the oldest
// merge into one "ancient-changes" entry; Apply entries are not capped.
func TestManagedFieldsCap(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	pods := e.client(IdentityAdmin).CoreV1().Pods("default")
	if _, err := pods.Apply(ctx, corev1ac.Pod("p", "default").WithLabels(map[string]string{"applied": "yes"}).
		WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().WithName("c").WithImage("busybox"))),
		metav1.ApplyOptions{FieldManager: "applier"}); err != nil {
		t.Fatal(err)
	}
	var last *corev1.Pod
	for i := range 14 {
		patch := fmt.Sprintf(`{"metadata":{"labels":{"writer-%d":"x"}}}`, i)
		var err error
		if last, err = pods.Patch(ctx, "p", types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: fmt.Sprintf("writer-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	updates, ancient, applies := 0, false, 0
	for _, m := range last.ManagedFields {
		switch {
		case m.Operation == metav1.ManagedFieldsOperationApply:
			applies++
		case m.Manager == "ancient-changes":
			ancient = true
			updates++
		default:
			updates++
		}
	}
	if updates != 10 || !ancient || applies != 1 {
		t.Errorf("entries %v: want 10 Update entries, one of them ancient-changes, and the Apply", entries(last.ManagedFields))
	}
	if owned := ownedBy(last.ManagedFields, "ancient-changes", metav1.ManagedFieldsOperationUpdate); !strings.Contains(owned, `"f:writer-0"`) {
		t.Errorf("ancient-changes owns %s, want the oldest writer's label", owned)
	}
}

// A pod's stored size is bounded by its managers, not by its writes: a
// kubelet's status writes every few seconds keep one entry; a no-op update
// writes nothing.
func TestManagedFieldsBounded(t *testing.T) {
	e := newTestEnv(t)
	ctx := context.Background()
	pods := e.clientAs(IdentityAdmin, "kubelet/v1.37.2").CoreV1().Pods("default")
	e.seedPod(makePod("p").obj())
	size := func() int {
		obj, err := e.store.Get(ctx, raftstore.Key{Resource: "pods", Namespace: "default", Name: "p"})
		if err != nil {
			t.Fatal(err)
		}
		return len(obj.Data)
	}
	var sizes []int
	for i := range 20 {
		cur := getPod(t, pods, "p")
		cur.Status.Message = fmt.Sprintf("beat %03d", i)
		if _, err := pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, size())
	}
	if sizes[19] > sizes[1]+8 {
		t.Errorf("stored size grew with status writes: %v", sizes)
	}
	stored := getPod(t, pods, "p")
	entriesOnly, err := json.Marshal(stored.ManagedFields)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stored pod: %d bytes, %d of them the managed fields of the creator and the kubelet", sizes[19], len(entriesOnly))
	// A no-op update writes nothing.
	cur := getPod(t, pods, "p")
	again, err := pods.Update(ctx, cur, metav1.UpdateOptions{})
	if err != nil || again.ResourceVersion != cur.ResourceVersion {
		t.Errorf("no-op update: %v, resourceVersion %s -> %s", err, cur.ResourceVersion, again.ResourceVersion)
	}
}
