package apiserver

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/podsafe/podsafe/raftstore"
)

// recorder collects informer notifications.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(kind string, obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, kind+" "+pod.Name)
}

func (r *recorder) has(want string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if e == want {
			return true
		}
	}
	return false
}

// startPodInformer starts a pod informer with client-go's defaults (the
// protobuf content type and the WatchListClient feature gate as shipped)
// and waits for it to sync.
func startPodInformer(ctx context.Context, t *testing.T, c kubernetes.Interface) (cache.SharedIndexInformer, *recorder) {
	t.Helper()
	factory := informers.NewSharedInformerFactory(c, 0)
	inf := factory.Core().V1().Pods().Informer()
	rec := &recorder{}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { rec.add("add", obj) },
		UpdateFunc: func(_, obj any) { rec.add("update", obj) },
		DeleteFunc: func(obj any) { rec.add("delete", obj) },
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() {
		close(stop)
		factory.Shutdown()
	})
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	return inf, rec
}

// cacheState returns name → resourceVersion of the informer's cache.
func cacheState(inf cache.SharedIndexInformer) map[string]string {
	out := map[string]string{}
	for _, obj := range inf.GetStore().List() {
		p := obj.(*corev1.Pod)
		out[p.Namespace+"/"+p.Name] = p.ResourceVersion
	}
	return out
}

// listState returns name → resourceVersion of a fresh list.
func listState(ctx context.Context, c kubernetes.Interface) (map[string]string, error) {
	list, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, p := range list.Items {
		out[p.Namespace+"/"+p.Name] = p.ResourceVersion
	}
	return out, nil
}

// waitConverged waits until the informer's cache equals a fresh list.
func waitConverged(ctx context.Context, t *testing.T, inf cache.SharedIndexInformer, c kubernetes.Interface) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var diff string
	for time.Now().Before(deadline) {
		want, err := listState(ctx, c)
		if err == nil {
			if diff = cmp.Diff(want, cacheState(inf)); diff == "" {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("informer cache did not converge to the list (-list +cache):\n%s", diff)
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// TestInformer checks that a default SharedInformerFactory informer syncs
// and sees adds, updates and deletes.
func TestInformer(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	c := e.client(IdentityAdmin)
	e.seedPod(makePod("a").obj())
	e.seedPod(makePod("b").node("node-1").obj())
	inf, rec := startPodInformer(ctx, t, c)
	e.seedPod(makePod("c").obj())
	if _, err := c.CoreV1().Pods("default").Patch(ctx, "a", types.MergePatchType, []byte(`{"metadata":{"labels":{"v":"2"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.CoreV1().Pods("default").Delete(ctx, "b", metav1.DeleteOptions{GracePeriodSeconds: int64p(0)}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"add a", "add b", "add c", "update a", "delete b"} {
		waitFor(t, want, func() bool { return rec.has(want) })
	}
	waitConverged(ctx, t, inf, c)

	// The informer synced through the watch-list protocol, without a LIST.
	var watchLists, lists int
	for _, r := range e.requestLog() {
		switch {
		case strings.HasPrefix(r, "GET /api/v1/pods?") && strings.Contains(r, "sendInitialEvents=true"):
			watchLists++
		case strings.HasPrefix(r, "GET /api/v1/pods?") && !strings.Contains(r, "watch=true"):
			lists++
		}
	}
	if watchLists != 1 || lists != 0 {
		t.Errorf("informer made %d watch-list and %d list requests, want 1 and 0:\n%s", watchLists, lists, strings.Join(e.requestLog(), "\n"))
	}
}

// listThenWatch is a ListerWatcher that tells the reflector it cannot do
// watch-list, so it falls back to LIST then WATCH, as it does with the
// WatchListClient gate off.
type listThenWatch struct{ *cache.ListWatch }

// IsWatchListSemanticsUnSupported makes the reflector use LIST then WATCH.
func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }

// TestInformerListThenWatch checks the LIST then WATCH path of the
// reflector, the one client-go takes without watch-list.
func TestInformerListThenWatch(t *testing.T) {
	e := newTestEnv(t)
	ctx := testCtx(t)
	c := e.client(IdentityAdmin)
	e.seedPod(makePod("a").obj())
	lw := listThenWatch{cache.NewListWatchFromClient(c.CoreV1().RESTClient(), "pods", metav1.NamespaceAll, fields.Everything())}
	inf := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{})
	stop := make(chan struct{})
	go inf.Run(stop)
	t.Cleanup(func() { close(stop) })
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	e.seedPod(makePod("b").obj())
	if err := c.CoreV1().Pods("default").Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitConverged(ctx, t, inf, c)
	var lists int
	for _, r := range e.requestLog() {
		if strings.HasPrefix(r, "GET /api/v1/pods?") && !strings.Contains(r, "watch=true") {
			lists++
		}
	}
	if lists != 1 {
		t.Errorf("informer made %d list requests, want 1:\n%s", lists, strings.Join(e.requestLog(), "\n"))
	}
}

// retryWrite retries a write through a leader change: 503 (not applied) and
// 504 (outcome unknown) are retried, and a create whose earlier attempt
// landed counts as done.
func retryWrite(t *testing.T, what string, write func() error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := write()
		switch {
		case err == nil, apierrors.IsAlreadyExists(err) && what == "create", apierrors.IsNotFound(err) && what == "delete":
			return
		case time.Now().After(deadline):
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestInformerAcrossLeaderChange runs a 3-member store with one API server
// per member. The client reaches a follower's server; the leader member is
// killed, a new one is elected, and the informer must follow every write.
func TestInformerAcrossLeaderChange(t *testing.T) {
	cluster := raftstore.OpenTestCluster(t, 3)
	envs := make([]*testEnv, 3)
	for i := range envs {
		envs[i] = newTestEnvOn(t, cluster.Stores[i])
	}
	leader := cluster.Index(cluster.Leader().ID())
	via := (leader + 1) % 3
	ctx := testCtx(t)
	c := envs[via].client(IdentityAdmin)
	for i := range 5 {
		envs[via].seedPod(makePod(fmt.Sprintf("before-%d", i)).obj())
	}
	inf, _ := startPodInformer(ctx, t, c)
	waitConverged(ctx, t, inf, c)

	_ = envs[leader].srv.Close()
	cluster.Kill(leader)
	newLeader := cluster.Index(cluster.Leader().ID())
	if newLeader == leader {
		t.Fatalf("member %d still leads after being killed", leader)
	}
	t.Logf("leader moved from member %d to %d; the client talks to member %d", leader, newLeader, via)

	pods := c.CoreV1().Pods("default")
	for i := range 5 {
		name := fmt.Sprintf("after-%d", i)
		retryWrite(t, "create", func() error {
			_, err := pods.Create(ctx, makePod(name).obj(), metav1.CreateOptions{})
			return err
		})
	}
	retryWrite(t, "patch", func() error {
		_, err := pods.Patch(ctx, "before-0", types.MergePatchType, []byte(`{"metadata":{"labels":{"moved":"yes"}}}`), metav1.PatchOptions{})
		return err
	})
	retryWrite(t, "delete", func() error { return pods.Delete(ctx, "before-1", metav1.DeleteOptions{}) })
	waitConverged(ctx, t, inf, c)

	got := cacheState(inf)
	var names []string
	for k := range got {
		names = append(names, k)
	}
	sort.Strings(names)
	want := []string{"default/after-0", "default/after-1", "default/after-2", "default/after-3", "default/after-4",
		"default/before-0", "default/before-2", "default/before-3", "default/before-4"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("cached pods (-want +got):\n%s", diff)
	}
	obj, ok, err := inf.GetStore().GetByKey("default/before-0")
	if err != nil || !ok || obj.(*corev1.Pod).Labels["moved"] != "yes" {
		t.Errorf("before-0 in the cache lacks the patch made after the leader change: %v %v", obj, err)
	}
}
