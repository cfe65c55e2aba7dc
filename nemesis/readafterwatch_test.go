package nemesis_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/nemesis"
)

var readAfterWatchObjects = flag.Int("read-after-watch.objects", 0,
	"objects created by TestReadAfterWatch (default 10,000; 2,000 under the race detector, where `make test` runs it a second time without)")

// TestReadAfterWatch is the program that found the stale read behind
// "binding pod ...: not found": a client watches objects on one connection
// and, for every ADDED event, reads the object over three other connections
// (one per member). A read that begins after the watch delivered an object
// must find it, whichever member serves the watch and whichever member
// leads, while leaders are cut off, followers isolated and the leader's
// state machine slowed.
func TestReadAfterWatch(t *testing.T) {
	const ns = "read-after-watch"
	objects := *readAfterWatchObjects
	if objects <= 0 {
		objects = 10000
		if raceDetector {
			objects = 2000
		}
	}
	c := cluster.StartForTest(t, cluster.Config{Topology: cluster.DefaultTopology(3, 0, 1), TimeScale: 1})
	client := func(i int) kubernetes.Interface {
		cs, err := c.Clientset(apiserver.IdentityAdmin, cluster.ClientOptions{
			Host: fmt.Sprintf("raw-client-%d", i), Member: i % c.Members(), Timeout: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	// The namespace first: objects in a namespace that does not exist are
	// refused (NamespaceLifecycle).
	if _, err := client(0).CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", ns, err)
	}
	watcher := client(1) // a follower's API server at first: it applies before the leader
	readers := []kubernetes.Interface{client(3), client(4), client(5)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The nemesis: leader isolations (leader changes) and follower
	// isolations, one after the other, until the writers are done, while
	// the leader's state machine is slowed in every other round: the
	// followers then apply, and stream, each change before the leader does.
	partitions, err := nemesis.Lookup("isolate-leader,isolate-one")
	if err != nil {
		t.Fatal(err)
	}
	slow, err := nemesis.Lookup("slow-leader")
	if err != nil {
		t.Fatal(err)
	}
	var nemWG sync.WaitGroup
	nemCtx, stopNemesis := context.WithCancel(ctx)
	injected := map[string]int{}
	nemWG.Add(1)
	go func() {
		defer nemWG.Done()
		rng := rand.New(rand.NewPCG(5, 5))
		for round := 0; nemCtx.Err() == nil; round++ {
			var heals []nemesis.Injection
			fs := []nemesis.Fault{partitions[rng.IntN(len(partitions))]}
			if round%2 == 0 {
				fs = append(slow, fs...)
			}
			for _, f := range fs {
				inj, err := f.Inject(nemCtx, cluster.AsTarget(c), rng)
				if err != nil {
					t.Logf("injecting %s: %v", f.Name(), err)
					continue
				}
				injected[f.Name()]++
				heals = append(heals, inj)
				sleepCtx(nemCtx, 300*time.Millisecond)
			}
			for _, inj := range heals {
				if err := inj.Heal(); err != nil {
					t.Errorf("healing %s: %v", inj.Description, err)
				}
			}
			sleepCtx(nemCtx, 200*time.Millisecond)
		}
	}()

	// The watcher: resumes from the last resourceVersion it saw, as a
	// reflector does, and hands every ADDED object to the readers.
	added := make(chan string, 1024)
	var watchWG sync.WaitGroup
	watchWG.Add(1)
	go func() {
		defer watchWG.Done()
		defer close(added)
		watchFrom(ctx, t, watcher, ns, objects, added)
	}()

	// The readers: each ADDED object is read through every reader.
	var (
		readWG   sync.WaitGroup
		reads    atomic.Int64
		notFound atomic.Int64
	)
	for range 4 {
		readWG.Add(1)
		go func() {
			defer readWG.Done()
			for name := range added {
				for _, r := range readers {
					if err := readUntilAnswered(ctx, r, ns, name); err != nil {
						if apierrors.IsNotFound(err) {
							notFound.Add(1)
							t.Errorf("GET %s/%s answered 404 after its ADDED event was delivered", ns, name)
						} else {
							t.Errorf("GET %s/%s: %v", ns, name, err)
						}
					}
					reads.Add(1)
				}
			}
		}()
	}

	// The writers.
	var (
		writeWG sync.WaitGroup
		next    atomic.Int64
	)
	for w := range 8 {
		writeWG.Add(1)
		go func() {
			defer writeWG.Done()
			cs := client(8 + w)
			for {
				i := next.Add(1) - 1
				if i >= int64(objects) {
					return
				}
				name := fmt.Sprintf("o%05d", i)
				l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
				for {
					_, err := cs.CoordinationV1().Leases(ns).Create(ctx, l, metav1.CreateOptions{})
					if err == nil || apierrors.IsAlreadyExists(err) || ctx.Err() != nil {
						break
					}
					if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
						t.Errorf("creating %s: %v", name, err) // no fault makes these go away
						cancel()
						return
					}
					// Unavailable or unknown during a fault: try again (a
					// create that did happen answers AlreadyExists).
				}
			}
		}()
	}
	writeWG.Wait()
	stopNemesis()
	nemWG.Wait()
	watchWG.Wait()
	readWG.Wait()
	t.Logf("%d objects watched, %d reads, %d not found; faults injected: %v", objects, reads.Load(), notFound.Load(), injected)
	if injected["isolate-leader"] == 0 || injected["slow-leader"] == 0 {
		t.Errorf("the nemesis injected %v: want leader isolations and slow leaders", injected)
	}
}

// watchFrom watches the leases of ns until it has seen want ADDED objects,
// resuming after every error from the last resourceVersion it received and
// relisting after 410 Gone.
func watchFrom(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string, want int, added chan<- string) {
	seen := map[string]bool{}
	rv := ""
	for len(seen) < want && ctx.Err() == nil {
		if rv == "" {
			list, err := cs.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			for _, l := range list.Items {
				if !seen[l.Name] {
					seen[l.Name] = true
					added <- l.Name
				}
			}
			rv = list.ResourceVersion
		}
		w, err := cs.CoordinationV1().Leases(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			if apierrors.IsGone(err) || apierrors.IsResourceExpired(err) {
				rv = ""
			}
			time.Sleep(20 * time.Millisecond)
			continue
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				if st := apierrors.FromObject(ev.Object); apierrors.IsGone(st) || apierrors.IsResourceExpired(st) {
					rv = ""
				}
				break
			}
			l, ok := ev.Object.(*coordinationv1.Lease)
			if !ok {
				continue
			}
			rv = l.ResourceVersion
			if ev.Type == watch.Added && !seen[l.Name] {
				seen[l.Name] = true
				added <- l.Name
			}
			if len(seen) >= want {
				break
			}
		}
		w.Stop()
	}
	if len(seen) < want {
		t.Errorf("the watch delivered %d of %d objects", len(seen), want)
	}
}

// readUntilAnswered reads a lease until the API gives a definite answer:
// found (nil) or not found; unavailability during a fault is retried.
func readUntilAnswered(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
	for {
		_, err := cs.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil || apierrors.IsNotFound(err) {
			return err
		}
		if ctx.Err() != nil {
			return errors.Join(err, ctx.Err())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
