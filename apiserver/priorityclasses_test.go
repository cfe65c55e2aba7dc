package apiserver

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/podsafe/podsafe/raftstore"
)

// countingStore counts the reads of PriorityClasses and lets a test end
// their watches.
type countingStore struct {
	Store
	reads atomic.Int64

	mu      sync.Mutex
	cancels []context.CancelFunc
}

func (s *countingStore) Get(ctx context.Context, key raftstore.Key) (raftstore.Object, error) {
	if key.Resource == pcResource {
		s.reads.Add(1)
	}
	return s.Store.Get(ctx, key)
}

func (s *countingStore) List(ctx context.Context, resource, namespace string, opts ...raftstore.Narrowing) ([]raftstore.Object, uint64, error) {
	if resource == pcResource {
		s.reads.Add(1)
	}
	return s.Store.List(ctx, resource, namespace, opts...)
}

func (s *countingStore) Watch(ctx context.Context, resource string, fromRV uint64, opts ...raftstore.Narrowing) (<-chan raftstore.Event, error) {
	if resource == pcResource {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		s.mu.Lock()
		s.cancels = append(s.cancels, cancel)
		s.mu.Unlock()
	}
	return s.Store.Watch(ctx, resource, fromRV, opts...)
}

// endWatches ends every PriorityClass watch, as a window overflow or a
// snapshot restore would.
func (s *countingStore) endWatches() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, cancel := range s.cancels {
		cancel()
	}
	s.cancels = nil
}

// classEnv is an API server on a follower of a 3-member store (so the
// cache lags the leader as far as it ever does), reached through a
// counting store, and a second server on the other follower.
type classEnv struct {
	main, other *testEnv
	store       *countingStore
	admin       kubernetes.Interface
}

func newClassEnv(t *testing.T) *classEnv {
	t.Helper()
	c := raftstore.OpenTestCluster(t, 3)
	followers := c.Followers()
	store := &countingStore{Store: followers[0]}
	main := newTestEnvOn(t, followers[0], func(cfg *Config) { cfg.Store = store })
	other := newTestEnvOn(t, followers[1])
	return &classEnv{main: main, other: other, store: store, admin: main.client(IdentityAdmin)}
}

// synced waits until the main server's class cache has listed.
func (e *classEnv) synced(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := e.main.srv.classes.get(""); ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the priority class cache never listed")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func createClass(t *testing.T, c kubernetes.Interface, name string, value int32, def bool) {
	t.Helper()
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value, GlobalDefault: def}
	if _, err := c.SchedulingV1().PriorityClasses().Create(testCtx(t), pc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating class %s: %v", name, err)
	}
}

func deleteClass(t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	if err := c.SchedulingV1().PriorityClasses().Delete(testCtx(t), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting class %s: %v", name, err)
	}
}

// podPriority creates a pod naming class and returns its priority, or -1
// when admission refused it.
func podPriority(t *testing.T, c kubernetes.Interface, name, class string) int32 {
	t.Helper()
	pod := makePod(name).obj()
	pod.Spec.PriorityClassName = class
	got, err := c.CoreV1().Pods("default").Create(testCtx(t), pod, metav1.CreateOptions{})
	if apierrors.IsForbidden(err) {
		return -1
	}
	if err != nil {
		t.Fatalf("creating pod %s: %v", name, err)
	}
	return *got.Spec.Priority
}

// TestPriorityClassCacheReadYourWrites: every class change through a server
// is seen by the next pod admitted through it, default classes included,
// while the server admits pods from its cache, without reading the store.
func TestPriorityClassCacheReadYourWrites(t *testing.T) {
	e := newClassEnv(t)
	if got := podPriority(t, e.admin, "first", ""); got != 0 {
		t.Fatalf("no classes: priority %d, want 0", got)
	}
	e.synced(t)
	for i := range 10 {
		def, named := fmt.Sprintf("default-%d", i), fmt.Sprintf("named-%d", i)
		createClass(t, e.admin, def, int32(7+i), true)
		if got := podPriority(t, e.admin, fmt.Sprintf("defaulted-%d", i), ""); got != int32(7+i) {
			t.Errorf("round %d: pod created right after the global default: priority %d, want %d", i, got, 7+i)
		}
		deleteClass(t, e.admin, def)
		if got := podPriority(t, e.admin, fmt.Sprintf("undefaulted-%d", i), ""); got != 0 {
			t.Errorf("round %d: pod created right after the global default was deleted: priority %d, want 0", i, got)
		}
		createClass(t, e.admin, named, 1000, false)
		if got := podPriority(t, e.admin, fmt.Sprintf("named-%d", i), named); got != 1000 {
			t.Errorf("round %d: pod naming a class just created: priority %d, want 1000", i, got)
		}
		deleteClass(t, e.admin, named)
		if got := podPriority(t, e.admin, fmt.Sprintf("refused-%d", i), named); got != -1 {
			t.Errorf("round %d: pod naming a class just deleted: priority %d, want it refused", i, got)
		}
	}
	createClass(t, e.admin, "kept", 3, false)
	createClass(t, e.admin, "kept-default", 2, true)
	before := e.store.reads.Load()
	for i := range 10 {
		if got := podPriority(t, e.admin, fmt.Sprintf("cached-%d", i), "kept"); got != 3 {
			t.Errorf("pod naming a kept class: priority %d, want 3", got)
		}
		if got := podPriority(t, e.admin, fmt.Sprintf("cached-default-%d", i), ""); got != 2 {
			t.Errorf("pod without a class: priority %d, want the default's 2", got)
		}
	}
	if reads := e.store.reads.Load() - before; reads != 0 {
		t.Errorf("admitting 20 pods read PriorityClasses from the store %d times, want none", reads)
	}
}

// TestPriorityClassCacheOtherServer: a class created through another server
// is found by a pod that names it at once (the store is read when the cache
// does not hold it yet), and a global default set there reaches this
// server's admission.
func TestPriorityClassCacheOtherServer(t *testing.T) {
	e := newClassEnv(t)
	other := e.other.client(IdentityAdmin)
	podPriority(t, e.admin, "first", "")
	e.synced(t)
	for i := range 10 {
		name := fmt.Sprintf("elsewhere-%d", i)
		createClass(t, other, name, int32(100+i), false)
		if got := podPriority(t, e.admin, name, name); got != int32(100+i) {
			t.Errorf("pod naming a class just created through another server: priority %d, want %d", got, 100+i)
		}
	}
	createClass(t, other, "everyone", 5, true)
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		if podPriority(t, e.admin, fmt.Sprintf("later-%d", i), "") == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a global default created through another server never reached this server's admission")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPriorityClassCacheRelists: when the cache's watch ends it lists again,
// admitting from the store meanwhile, and misses nothing written in between.
func TestPriorityClassCacheRelists(t *testing.T) {
	e := newClassEnv(t)
	podPriority(t, e.admin, "first", "")
	e.synced(t)
	for i := range 5 {
		e.store.endWatches()
		createClass(t, e.other.client(IdentityAdmin), fmt.Sprintf("between-%d", i), int32(10+i), false)
		e.synced(t)
		deadline := time.Now().Add(10 * time.Second)
		for {
			if pc, _ := e.main.srv.classes.get(fmt.Sprintf("between-%d", i)); pc != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the cache never held the class written while its watch was down", i)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if got := podPriority(t, e.admin, "last", "between-4"); got != 14 {
		t.Errorf("priority %d, want 14", got)
	}
}

// TestPriorityClassCacheDefaultTie: among global defaults of equal value
// (which only concurrent creates can make) the first by name wins, on the
// cache and the store path alike.
func TestPriorityClassCacheDefaultTie(t *testing.T) {
	c := newPriorityClassCache(nil, testLogger(t))
	c.classes = map[string]*schedulingv1.PriorityClass{}
	for _, name := range []string{"c", "a", "b"} {
		c.classes[name] = &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: 3, GlobalDefault: true}
	}
	c.classes["low"] = &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "low"}, Value: 1}
	c.synced = true
	c.updateDefaultLocked()
	if def, _ := c.globalDefault(); def == nil || def.Name != "a" {
		t.Errorf("default %v, want a", def)
	}
}
