package controller

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/raftstore"
)

func TestDecideDependent(t *testing.T) {
	ref := func(uid string, block bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: uid, UID: types.UID(uid), BlockOwnerDeletion: ptr.To(block)}
	}
	for _, tc := range []struct {
		name          string
		owners        []metav1.OwnerReference
		states        []ownerState
		remove, patch bool
		refs          []metav1.OwnerReference
	}{
		{name: "no owners"},
		{name: "solid owner", owners: []metav1.OwnerReference{ref("a", true)}, states: []ownerState{ownerSolid}},
		{name: "all dangling", owners: []metav1.OwnerReference{ref("a", true), ref("b", false)},
			states: []ownerState{ownerDangling, ownerDangling}, remove: true},
		{name: "owner in foreground deletion", owners: []metav1.OwnerReference{ref("a", true)}, states: []ownerState{ownerWaiting}, remove: true},
		{name: "one dangling, one solid", owners: []metav1.OwnerReference{ref("a", true), ref("b", false)},
			states: []ownerState{ownerDangling, ownerSolid}, patch: true, refs: []metav1.OwnerReference{ref("b", false)}},
		{name: "solid and waiting: stop blocking", owners: []metav1.OwnerReference{ref("a", true), ref("b", true)},
			states: []ownerState{ownerWaiting, ownerSolid}, patch: true, refs: []metav1.OwnerReference{ref("a", false), ref("b", true)}},
	} {
		remove, patch, refs := decideDependent(tc.owners, tc.states)
		if remove != tc.remove || patch != tc.patch {
			t.Errorf("%s: remove %v patch %v, want %v %v", tc.name, remove, patch, tc.remove, tc.patch)
		}
		if diff := cmp.Diff(tc.refs, refs); diff != "" {
			t.Errorf("%s: refs (-want +got):\n%s", tc.name, diff)
		}
	}
}

// apiEnv is podsafe's API server over an in-memory store, with clients per
// identity.
type apiEnv struct {
	t   *testing.T
	url string
}

func newAPIEnv(t *testing.T) *apiEnv {
	t.Helper()
	store := raftstore.OpenTestCluster(t, 1, raftstore.WithConfig(func(c *raftstore.Config) { c.Indexes = apiserver.StoreIndexes() })).Stores[0]
	tokens := map[string]string{}
	for _, id := range []string{apiserver.IdentityAdmin, apiserver.IdentityGarbageCollector, apiserver.IdentityNamespaceController} {
		tokens["token-"+id] = id
	}
	srv, err := apiserver.New(apiserver.Config{Store: store, Tokens: tokens, NamespaceLifecycle: true})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	t.Cleanup(func() { _ = srv.Close() })
	return &apiEnv{t: t, url: hs.URL}
}

func (e *apiEnv) config(identity string) *rest.Config {
	return &rest.Config{Host: e.url, BearerToken: "token-" + identity, QPS: -1, Timeout: 30 * time.Second}
}

func (e *apiEnv) client(identity string) kubernetes.Interface {
	e.t.Helper()
	cs, err := kubernetes.NewForConfig(e.config(identity))
	if err != nil {
		e.t.Fatal(err)
	}
	return cs
}

func (e *apiEnv) dynamic(identity string) dynamic.Interface {
	e.t.Helper()
	d, err := dynamic.NewForConfig(e.config(identity))
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

// run starts r until the test ends.
func (e *apiEnv) run(r interface{ Run(context.Context) error }) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	e.t.Cleanup(func() { cancel(); <-done })
}

// eventually polls cond until it holds or 20 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// gcFixture is a namespace with a ReplicaSet and two unscheduled pods it
// owns (blockOwnerDeletion, as the ReplicaSet controller makes them); one
// pod holds a finalizer of its own so its deletion can be held.
func gcFixture(t *testing.T, admin kubernetes.Interface, ns string) *appsv1.ReplicaSet {
	t.Helper()
	ctx := context.Background()
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "web"}
	rs, err := admin.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:1.36"}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"web-a", "web-held"} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:1.36"}}}}
		if name == "web-held" {
			p.Finalizers = []string{"example.com/hold"}
		}
		if _, err := admin.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return rs
}

// release removes the test finalizer of a held pod.
func release(t *testing.T, admin kubernetes.Interface, ns, pod string) {
	t.Helper()
	_, err := admin.CoreV1().Pods(ns).Patch(context.Background(), pod, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

func gone(err error) bool { return apierrors.IsNotFound(err) }

// TestGarbageCollector runs the collector against podsafe's API server:
// background deletion removes the pods of a deleted ReplicaSet; foreground
// keeps the set (with its finalizer) until its blocking pods are gone;
// orphan leaves the pods without their owner reference.
func TestGarbageCollector(t *testing.T) {
	e := newAPIEnv(t)
	admin := e.client(apiserver.IdentityAdmin)
	ctx := context.Background()
	gc, err := NewGarbageCollector(GarbageCollectorConfig{Client: e.client(apiserver.IdentityGarbageCollector),
		Dynamic: e.dynamic(apiserver.IdentityGarbageCollector), Logger: testLog(t)})
	if err != nil {
		t.Fatal(err)
	}
	e.run(gc)
	podGone := func(ns, name string) func() bool {
		return func() bool { _, err := admin.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); return gone(err) }
	}

	t.Run("background", func(t *testing.T) {
		gcFixture(t, admin, "bg")
		if err := admin.AppsV1().ReplicaSets("bg").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "pod web-a deleted", podGone("bg", "web-a"))
		eventually(t, "pod web-held marked deleted", func() bool {
			p, err := admin.CoreV1().Pods("bg").Get(ctx, "web-held", metav1.GetOptions{})
			return err == nil && p.DeletionTimestamp != nil
		})
		release(t, admin, "bg", "web-held")
		eventually(t, "pod web-held deleted", podGone("bg", "web-held"))
	})

	t.Run("foreground", func(t *testing.T) {
		gcFixture(t, admin, "fg")
		fg := metav1.DeletePropagationForeground
		if err := admin.AppsV1().ReplicaSets("fg").Delete(ctx, "web", metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "pod web-a deleted", podGone("fg", "web-a"))
		eventually(t, "pod web-held marked deleted", func() bool {
			p, err := admin.CoreV1().Pods("fg").Get(ctx, "web-held", metav1.GetOptions{})
			return err == nil && p.DeletionTimestamp != nil
		})
		// The held pod blocks its owner.
		time.Sleep(200 * time.Millisecond)
		rs, err := admin.AppsV1().ReplicaSets("fg").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the set went before its blocking pod: %v", err)
		}
		if diff := cmp.Diff([]string{metav1.FinalizerDeleteDependents}, rs.Finalizers); diff != "" {
			t.Errorf("set finalizers (-want +got):\n%s", diff)
		}
		release(t, admin, "fg", "web-held")
		eventually(t, "set deleted after its pods", func() bool {
			_, err := admin.AppsV1().ReplicaSets("fg").Get(ctx, "web", metav1.GetOptions{})
			return gone(err)
		})
	})

	t.Run("orphan", func(t *testing.T) {
		gcFixture(t, admin, "orphan")
		orphan := metav1.DeletePropagationOrphan
		if err := admin.AppsV1().ReplicaSets("orphan").Delete(ctx, "web", metav1.DeleteOptions{PropagationPolicy: &orphan}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "set deleted", func() bool {
			_, err := admin.AppsV1().ReplicaSets("orphan").Get(ctx, "web", metav1.GetOptions{})
			return gone(err)
		})
		for _, name := range []string{"web-a", "web-held"} {
			p, err := admin.CoreV1().Pods("orphan").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("orphaned pod %s: %v", name, err)
			}
			if p.DeletionTimestamp != nil || len(p.OwnerReferences) != 0 {
				t.Errorf("orphaned pod %s: deletionTimestamp %v, ownerReferences %v; want neither", name, p.DeletionTimestamp, p.OwnerReferences)
			}
		}
	})
}

// testLog sends the controller's log to the test log.
func testLog(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
