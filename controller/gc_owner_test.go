package controller

import (
	"context"
	"log/slog"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
)

// TestOwnerStateReadFromTheAPI: an owner the graph does not hold yet is read
// from the API, and only one being deleted in the foreground (a deletion
// timestamp and the foregroundDeletion finalizer) waits for its dependents.
// One being deleted otherwise (orphaned, or held by another finalizer) is
// still there: its dependents are left alone, as upstream's collector
// leaves them until the owner is gone or orphans them.
func TestOwnerStateReadFromTheAPI(t *testing.T) {
	rsGVR := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}
	owner := func(name string, uid types.UID, deleting bool, finalizers ...string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("apps/v1")
		u.SetKind("ReplicaSet")
		u.SetNamespace("default")
		u.SetName(name)
		u.SetUID(uid)
		u.SetFinalizers(finalizers)
		if deleting {
			now := metav1.Now()
			u.SetDeletionTimestamp(&now)
		}
		return u
	}
	objs := []runtime.Object{
		owner("solid", "u-solid", false),
		owner("foreground", "u-fg", true, metav1.FinalizerDeleteDependents),
		owner("orphaning", "u-orphan", true, metav1.FinalizerOrphanDependents),
		owner("held", "u-held", true, "podsafe.io/hold"),
		owner("foreground-not-deleting", "u-fg-live", false, metav1.FinalizerDeleteDependents),
	}
	scheme := runtime.NewScheme()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme,
		map[schema.GroupVersionResource]string{rsGVR: "ReplicaSetList"}, objs...)
	gc := &GarbageCollector{
		cfg:   GarbageCollectorConfig{Dynamic: dyn},
		log:   slog.New(slog.DiscardHandler),
		graph: newGCGraph(),
		kinds: map[schema.GroupKind]gcResource{{Group: "apps", Kind: "ReplicaSet"}: {gvr: rsGVR, namespaced: true}},
	}
	pod := &gcNode{gvr: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, namespaced: true, namespace: "default", name: "web-a", uid: "u-pod"}
	for _, tt := range []struct {
		name string
		uid  types.UID
		want ownerState
	}{
		{"solid", "u-solid", ownerSolid},
		{"foreground", "u-fg", ownerWaiting},
		{"orphaning", "u-orphan", ownerSolid},
		{"held", "u-held", ownerSolid},
		{"foreground-not-deleting", "u-fg-live", ownerSolid},
		{"gone", "u-gone", ownerDangling},
		{"solid", "u-other", ownerDangling}, // the name now belongs to another object
	} {
		ref := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: tt.name, UID: tt.uid}
		got, err := gc.ownerState(context.Background(), pod, ref)
		if err != nil {
			t.Errorf("%s (%s): %v", tt.name, tt.uid, err)
			continue
		}
		if got != tt.want {
			t.Errorf("owner %s (%s): state %v, want %v", tt.name, tt.uid, got, tt.want)
		}
	}
}
