package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/podsafe/podsafe/apiserver"
)

func TestNamespaceConditions(t *testing.T) {
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	r := nsDeletionReport{
		deleteErrs: []error{errors.New("deleting pods x: boom")},
		remaining:  map[schema.GroupVersionResource]int{pods: 2},
		finalizers: map[string]int{"example.com/hold": 1},
	}
	if r.done() {
		t.Error("a report with content left is done")
	}
	var got []string
	for _, c := range r.conditions() {
		got = append(got, string(c.Type)+" "+string(c.Status)+" "+c.Reason+": "+c.Message)
	}
	want := []string{
		"NamespaceDeletionDiscoveryFailure False ResourcesDiscovered: All resources successfully discovered",
		"NamespaceDeletionGroupVersionParsingFailure False ParsedGroupVersions: All legacy kube types successfully parsed",
		"NamespaceDeletionContentFailure True ContentDeletionFailed: Failed to delete all resource types, 1 remaining: deleting pods x: boom",
		"NamespaceContentRemaining True SomeResourcesRemain: Some resources are remaining: pods. has 2 resource instances",
		"NamespaceFinalizersRemaining True SomeFinalizersRemain: Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
	// Merging: a transition time moves only with the status.
	var st corev1.NamespaceStatus
	t0, t1 := metav1.NewTime(time.Unix(100, 0)), metav1.NewTime(time.Unix(200, 0))
	if !updateNamespaceConditions(&st, r.conditions(), t0) {
		t.Fatal("first merge changed nothing")
	}
	if updateNamespaceConditions(&st, r.conditions(), t1) {
		t.Error("merging the same conditions changed something")
	}
	done := nsDeletionReport{}
	if !done.done() || !updateNamespaceConditions(&st, done.conditions(), t1) {
		t.Fatal("an empty report is not done or changed nothing")
	}
	for _, c := range st.Conditions {
		want := t0
		if c.Type == corev1.NamespaceDeletionContentFailure || c.Type == corev1.NamespaceContentRemaining || c.Type == corev1.NamespaceFinalizersRemaining {
			want = t1
		}
		if !c.LastTransitionTime.Equal(&want) || c.Status != corev1.ConditionFalse {
			t.Errorf("%s: %s at %v, want False at %v", c.Type, c.Status, c.LastTransitionTime, want)
		}
	}
}

// TestNamespaceController runs the controller against podsafe's API
// server: a deleted namespace is Terminating while its content goes (a pod
// held by a finalizer keeps it, with the conditions saying so), then it is
// finalized and gone; a new pod in it is refused meanwhile.
func TestNamespaceController(t *testing.T) {
	e := newAPIEnv(t)
	admin := e.client(apiserver.IdentityAdmin)
	ctx := context.Background()
	nc, err := NewNamespace(NamespaceConfig{Client: e.client(apiserver.IdentityNamespaceController),
		Dynamic: e.dynamic(apiserver.IdentityNamespaceController), Logger: testLog(t), Recheck: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	e.run(nc)
	gcFixture(t, admin, "team")
	if err := admin.CoreV1().Namespaces().Delete(ctx, "team", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "content deleted but the held pod", func() bool {
		pods, err := admin.CoreV1().Pods("team").List(ctx, metav1.ListOptions{})
		sets, err2 := admin.AppsV1().ReplicaSets("team").List(ctx, metav1.ListOptions{})
		return err == nil && err2 == nil && len(pods.Items) == 1 && pods.Items[0].DeletionTimestamp != nil && len(sets.Items) == 0
	})
	var ns *corev1.Namespace
	eventually(t, "conditions naming the held pod", func() bool {
		ns, err = admin.CoreV1().Namespaces().Get(ctx, "team", metav1.GetOptions{})
		for _, c := range ns.Status.Conditions {
			if c.Type == corev1.NamespaceFinalizersRemaining && c.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	})
	if ns.Status.Phase != corev1.NamespaceTerminating {
		t.Errorf("phase %q, want Terminating", ns.Status.Phase)
	}
	if _, err := admin.CoreV1().Pods("team").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "late"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:1.36"}}}}, metav1.CreateOptions{}); err == nil {
		t.Error("a pod was created in a terminating namespace")
	}
	release(t, admin, "team", "web-held")
	eventually(t, "namespace gone", func() bool {
		_, err := admin.CoreV1().Namespaces().Get(ctx, "team", metav1.GetOptions{})
		return gone(err)
	})
}
