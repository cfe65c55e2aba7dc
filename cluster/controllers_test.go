package cluster_test

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/controller"
	"github.com/podsafe/podsafe/history"
)

// TestPetNotDuplicatedWhilePartitioned: PS-11/PS-12/PS-13 end to end. The
// pet's node is cut off; the node controller marks it down and gracefully
// deletes the pet with a NodeDown condition; the pet controller waits; after
// healing the old kubelet finishes the deletion and only then does the
// replacement start. The ledger shows no overlap at any time, and the pet's
// RWO volume (PS-15) is written by one pod instance after the other, never
// interleaved: the old pet keeps writing through the partition (its node
// still reaches the storage), the replacement only after its volume moved.
func TestPetNotDuplicatedWhilePartitioned(t *testing.T) {
	env := startCtlCluster(t, 2)
	c, cs := env.c, env.cs
	ctx := context.Background()
	set := ctlPetSet("db", 1)
	if _, err := cs.AppsV1().StatefulSets("default").Create(ctx, set, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var old *corev1.Pod
	ctlWait(t, "db-0 running", 30*time.Second, func() bool {
		p, ok := ctlGetPod(cs, "default", "db-0")
		old = p
		return ok && p.Status.Phase == corev1.PodRunning
	})
	if ref := metav1.GetControllerOf(old); ref == nil || ref.Kind != "StatefulSet" || ref.Name != "db" {
		t.Errorf("db-0 controller reference = %+v, want the StatefulSet db", ref)
	}
	// The revision label names the template the pet was made from.
	rev := old.Labels[appsv1.ControllerRevisionHashLabelKey]
	if !strings.HasPrefix(rev, "db-") {
		t.Errorf("db-0 revision label %q, want db-<hash>", rev)
	}
	if diff := cmp.Diff(map[string]string{"app": "db", controller.LabelPetName: "db-0", controller.LabelPetIndex: "0",
		appsv1.ControllerRevisionHashLabelKey: rev}, old.Labels); diff != "" {
		t.Errorf("db-0 labels (-want +got):\n%s", diff)
	}
	const volume = "default.data-db-0"
	ctlWait(t, "db-0 writing its volume", 30*time.Second, func() bool { return len(ctlWrites(env.ledger, volume)) > 0 })
	node := old.Spec.NodeName
	cut := c.Clock().Now()
	ctlPartition(c, node)

	var evicted *corev1.Pod
	ctlWait(t, "db-0 evicted", 30*time.Second, func() bool {
		p, ok := ctlGetPod(cs, "default", "db-0")
		evicted = p
		return ok && p.DeletionTimestamp != nil
	})
	evictedAt := c.Clock().Now()
	if evicted.UID != old.UID {
		t.Fatalf("db-0 was replaced while its node was cut off: uid %s, want %s", evicted.UID, old.UID)
	}
	if !ctlHasCondition(evicted, controller.PodConditionNodeDown) {
		t.Errorf("evicted db-0 lacks condition %s: %+v", controller.PodConditionNodeDown, evicted.Status.Conditions)
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cond := ctlNodeCond(n, corev1.NodeReady); cond == nil || cond.Status != corev1.ConditionUnknown {
		t.Errorf("node %s Ready = %+v, want Unknown", node, cond)
	}
	if !ctlHasTaint(n, controller.TaintUnreachable) {
		t.Errorf("node %s lacks taint %s: %+v", node, controller.TaintUnreachable, n.Spec.Taints)
	}
	graceful := false
	for _, d := range env.audit.all() {
		if d.Identity == apiserver.IdentityNodeController && d.Name == "db-0" && (d.Grace == nil || *d.Grace > 0) {
			graceful = true
		}
	}
	if !graceful {
		t.Error("no graceful delete of db-0 by the node controller was recorded")
	}
	t.Logf("partition -> graceful delete of db-0: %.0f scaled s", evictedAt.Sub(cut).Seconds())

	// The partition lasts well past the pet's grace period: no replacement.
	time.Sleep(c.Clock().WallFor(120 * time.Second))
	if p, ok := ctlGetPod(cs, "default", "db-0"); !ok || p.UID != old.UID {
		t.Fatalf("db-0 was replaced while its node was cut off")
	}
	for pod, ivs := range ctlExecutions(env.ledger) {
		uids := map[string]bool{}
		for _, iv := range ivs {
			uids[iv.uid] = true
		}
		if len(uids) > 1 {
			t.Errorf("%s ran as %d instances during the partition", pod, len(uids))
		}
	}

	duringCut := ctlWrites(env.ledger, volume)
	if got := ctlWritersOf(duringCut); !cmp.Equal(got, []string{string(old.UID)}) {
		t.Errorf("writers of %s during the partition = %v, want only the old pet %s", volume, got, old.UID)
	}
	if last := duringCut[len(duringCut)-1]; !last.Scaled.After(cut.Add(100 * time.Second)) {
		t.Errorf("the partitioned pet stopped writing at %s; its node still reaches the storage", last.Scaled.Sub(cut))
	}

	c.Network().HealAll()
	healed := c.Clock().Now()
	ctlWait(t, "replacement db-0 running", 30*time.Second, func() bool {
		p, ok := ctlGetPod(cs, "default", "db-0")
		return ok && p.UID != old.UID && p.Status.Phase == corev1.PodRunning
	})
	ivs := ctlExecutions(env.ledger)["default/db-0"]
	if ov := ctlOverlaps(ivs); len(ov) > 0 {
		t.Errorf("pet db-0 ran twice at once: %+v", ov)
	}
	ctlWait(t, "replacement writing the volume", 30*time.Second, func() bool {
		return len(ctlWritersOf(ctlWrites(env.ledger, volume))) == 2
	})
	if bad := ctlInterleaved(ctlWrites(env.ledger, volume)); len(bad) > 0 {
		t.Errorf("PS-15: writes to %s interleaved: %v", volume, bad)
	}
	var replacementStart time.Time
	for _, iv := range ivs {
		if iv.uid != string(old.UID) {
			replacementStart = iv.start
		}
	}
	t.Logf("partition -> replacement started: %.0f scaled s (partition lasted %.0f s)",
		replacementStart.Sub(cut).Seconds(), healed.Sub(cut).Seconds())
	ctlWait(t, "node back", 30*time.Second, func() bool {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		return err == nil && !ctlHasTaint(n, controller.TaintUnreachable)
	})
	ctlWait(t, "set status", 30*time.Second, func() bool {
		s, err := cs.AppsV1().StatefulSets("default").Get(ctx, "db", metav1.GetOptions{})
		return err == nil && s.Status.Replicas == 1
	})
	assertNoControllerForceDelete(t, env)
}

// TestReplicaSetOverlapsUnderPartition: PS-7. The same partition makes the
// ReplicaSet controller start a replacement while the old pod still runs on
// the unreachable node: overlap the ledger shows and the contract allows.
func TestReplicaSetOverlapsUnderPartition(t *testing.T) {
	env := startCtlCluster(t, 2)
	c, cs := env.c, env.cs
	ctx := context.Background()
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: ctlSimTemplate("web"),
		},
	}
	if _, err := cs.AppsV1().ReplicaSets("default").Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var old corev1.Pod
	ctlWait(t, "one replica running", 30*time.Second, func() bool {
		pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil || len(pods.Items) != 1 || pods.Items[0].Status.Phase != corev1.PodRunning {
			return false
		}
		old = pods.Items[0]
		return true
	})
	ctlPartition(c, old.Spec.NodeName)
	ctlWait(t, "replacement running beside the old pod", 30*time.Second, func() bool {
		return len(ctlOverlapsOfSet(env.ledger, "web-", string(old.UID))) > 0
	})
	if p, ok := ctlGetPod(cs, "default", old.Name); !ok || p.DeletionTimestamp == nil {
		t.Errorf("old pod %s should be terminating, still in the store", old.Name)
	}
	c.Network().HealAll()
	ctlWait(t, "old pod gone", 30*time.Second, func() bool { _, ok := ctlGetPod(cs, "default", old.Name); return !ok })
	ctlWait(t, "status", 30*time.Second, func() bool {
		s, err := cs.AppsV1().ReplicaSets("default").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && s.Status.Replicas == 1
	})
	assertNoControllerForceDelete(t, env)
}

// TestPodGCForceDeletesOnlyPodsOfDeletedNodes: PS-10. Once admin deletes a
// node whose kubelet is gone, pod GC force deletes its pods; the pods of
// existing nodes are left alone.
func TestPodGCForceDeletesOnlyPodsOfDeletedNodes(t *testing.T) {
	env := startCtlCluster(t, 2)
	c, cs := env.c, env.cs
	ctx := context.Background()
	for _, node := range []string{"node-0", "node-1"} {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p-" + node, Namespace: "default"},
			Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr.To[int64](5),
				Containers: []corev1.Container{{Name: "app", Image: "sim"}}},
		}
		if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ctlWait(t, "pods running", 30*time.Second, func() bool {
		for _, n := range []string{"p-node-0", "p-node-1"} {
			if p, ok := ctlGetPod(cs, "default", n); !ok || p.Status.Phase != corev1.PodRunning {
				return false
			}
		}
		return true
	})
	if err := c.StopKubelet("node-1"); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Nodes().Delete(ctx, "node-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ctlWait(t, "orphan collected", 30*time.Second, func() bool {
		_, ok := ctlGetPod(cs, "default", "p-node-1")
		return !ok
	})
	time.Sleep(c.Clock().WallFor(60 * time.Second))
	if _, ok := ctlGetPod(cs, "default", "p-node-0"); !ok {
		t.Error("pod GC removed a pod of an existing node")
	}
	got := env.audit.forceDeletes()[apiserver.IdentityPodGC]
	if diff := cmp.Diff([]string{"default/p-node-1"}, ctlDedupe(got)); diff != "" {
		t.Errorf("pod GC force deletes (-want +got):\n%s", diff)
	}
	assertNoControllerForceDelete(t, env, "default/p-node-1")
	if err := env.rec.Close(); err != nil {
		t.Fatal(err)
	}
	h, err := history.Load(env.rec.Path())
	if err != nil {
		t.Fatal(err)
	}
	var gcDeletes int
	for _, call := range h.API {
		if call.Identity == apiserver.IdentityPodGC && call.Verb == "delete" && call.Resource == "pods" {
			gcDeletes++
		}
	}
	if gcDeletes == 0 {
		t.Error("the history recorded no pod GC deletion")
	}
}

// TestControllerRestart: a crashed controller comes back and picks up work
// it missed.
func TestControllerRestart(t *testing.T) {
	env := startCtlCluster(t, 1)
	c, cs := env.c, env.cs
	ctx := context.Background()
	if err := c.StopController(cluster.ControllerPet); err != nil {
		t.Fatal(err)
	}
	if err := c.StopController(cluster.ControllerPet); err == nil {
		t.Error("stopping a stopped controller succeeded")
	}
	set := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "kv", Namespace: "default"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](3), ServiceName: "kv",
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "kv"}},
			Template: ctlSimTemplate("kv"),
		},
	}
	if _, err := cs.AppsV1().StatefulSets("default").Create(ctx, set, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(c.Clock().WallFor(20 * time.Second))
	if _, ok := ctlGetPod(cs, "default", "kv-0"); ok {
		t.Fatal("a stopped pet controller created a pet")
	}
	if err := c.StartController(cluster.ControllerPet); err != nil {
		t.Fatal(err)
	}
	names := func() []string {
		pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=kv"})
		if err != nil {
			return nil
		}
		var out []string
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				out = append(out, p.Name)
			}
		}
		sort.Strings(out)
		return out
	}
	ctlWait(t, "three pets", 30*time.Second, func() bool { return cmp.Equal(names(), []string{"kv-0", "kv-1", "kv-2"}) })
	ctlWait(t, "scale to 1 accepted", 30*time.Second, func() bool {
		s, err := cs.AppsV1().StatefulSets("default").Get(ctx, "kv", metav1.GetOptions{})
		if err != nil {
			return false
		}
		s.Spec.Replicas = ptr.To[int32](1)
		_, err = cs.AppsV1().StatefulSets("default").Update(ctx, s, metav1.UpdateOptions{})
		return err == nil
	})
	ctlWait(t, "scaled down to kv-0", 30*time.Second, func() bool {
		_, ok1 := ctlGetPod(cs, "default", "kv-1")
		_, ok2 := ctlGetPod(cs, "default", "kv-2")
		return !ok1 && !ok2
	})
	if _, ok := ctlGetPod(cs, "default", "kv-0"); !ok {
		t.Error("scale down removed kv-0")
	}
	assertNoControllerForceDelete(t, env)
}

// TestReplicaSetScale: scale up and down, counting only active pods.
func TestReplicaSetScale(t *testing.T) {
	env := startCtlCluster(t, 2)
	cs := env.cs
	ctx := context.Background()
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: "default"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}},
			Template: ctlSimTemplate("api"),
		},
	}
	if _, err := cs.AppsV1().ReplicaSets("default").Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	active := func() int {
		pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=api"})
		if err != nil {
			return -1
		}
		n := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				n++
			}
		}
		return n
	}
	status := func(want int32) func() bool {
		return func() bool {
			s, err := cs.AppsV1().ReplicaSets("default").Get(ctx, "api", metav1.GetOptions{})
			return err == nil && s.Status.Replicas == want && s.Status.ReadyReplicas <= want
		}
	}
	ctlWait(t, "three replicas", 30*time.Second, func() bool { return active() == 3 && status(3)() })
	ctlWait(t, "scale to 1 accepted", 30*time.Second, func() bool {
		s, err := cs.AppsV1().ReplicaSets("default").Get(ctx, "api", metav1.GetOptions{})
		if err != nil {
			return false
		}
		s.Spec.Replicas = ptr.To[int32](1)
		_, err = cs.AppsV1().ReplicaSets("default").Update(ctx, s, metav1.UpdateOptions{})
		return err == nil
	})
	ctlWait(t, "one replica", 30*time.Second, func() bool { return active() == 1 && status(1)() })
	time.Sleep(env.c.Clock().WallFor(30 * time.Second))
	if n := active(); n != 1 {
		t.Errorf("active replicas = %d after settling, want 1", n)
	}
	assertNoControllerForceDelete(t, env)
}
