package clientconf

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/go-logr/logr"

	"github.com/podsafe/podsafe/cluster"
)

// convergeLimit bounds how long the caches may take to agree with the
// server once the faults are healed: generous, since agreement is what is
// judged, not speed.
const convergeLimit = 3 * time.Minute

// TestClientsThroughFaults runs client-go's shared informers (pods, nodes,
// StatefulSets, ReplicaSets, Leases, Events; through member 0) and two
// replicas of a controller-runtime manager with leader election on a Lease
// (through members 1 and 2) while a seeded writer creates, updates and
// deletes pods and scales a ReplicaSet and a StatefulSet, and the raft
// leader crashes, a member is cut from its peers, the lease holder is cut
// from the API, components pause and the informers' member crashes. Once
// everything is healed, every informer's cache, the view its handler's
// notifications add up to and each manager's cache must equal a fresh
// linearizable LIST (by UID and resourceVersion); every pod must carry the
// reconciler's hash of its spec; no two incarnations of the manager may
// have led at once, and the lease must have changed hands and have one
// holder at the end.
func TestClientsThroughFaults(t *testing.T) {
	ctrllog.SetLogger(logr.Discard())
	// The cluster's components log through klog, which is global: their
	// warnings as watches break are the faults working, not news.
	klog.SetLogger(logr.Discard())
	e := startEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	// Informers through member 0.
	reqs := newRequestCounts()
	infCfg := e.restConfig("client-informers", 0)
	infCfg.WrapTransport = reqs.wrap
	infDial := &dialTracker{}
	infCfg.Dial = infDial.wrap(infCfg.Dial)
	infCS, err := kubernetes.NewForConfig(infCfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &holders{}
	factory, ws, err := watchAll(infCS, e.check, h)
	if err != nil {
		t.Fatal(err)
	}
	infCtx, stopInformers := context.WithCancel(ctx)
	factory.Start(infCtx.Done())
	defer func() { stopInformers(); factory.Shutdown() }()
	for kind, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("informer %v never synced", kind)
		}
	}

	// A user's informers, through the TLS listener and kubeconfig
	// `podsafe cluster up` serves.
	extCS, err := kubernetes.NewForConfig(e.externalConfig())
	if err != nil {
		t.Fatal(err)
	}
	extFactory, extWs, err := watchAll(extCS, e.check, &holders{}, "pods", "statefulsets")
	if err != nil {
		t.Fatal(err)
	}
	extFactory.Start(infCtx.Done())
	defer func() { stopInformers(); extFactory.Shutdown() }()
	for kind, ok := range extFactory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("external informer %v never synced", kind)
		}
	}

	// Two manager replicas, through members 1 and 2.
	rec := &leadership{}
	seen := &sync.Map{}
	recons := &int64Counter{}
	var replicas []*replica
	for i, name := range []string{"a", "b"} {
		host := "client-manager-" + name
		replicas = append(replicas, &replica{name: name, host: host, cfg: e.restConfig(host, i+1), rec: rec, seen: seen, recons: recons})
	}
	mgrCtx, stopManagers := context.WithCancel(ctx)
	var mgrs sync.WaitGroup
	for _, r := range replicas {
		mgrs.Go(func() { r.run(mgrCtx) })
	}
	defer func() { stopManagers(); mgrs.Wait() }()

	// The writer, through member 1.
	wcs, err := kubernetes.NewForConfig(e.restConfig("client-writer", 1))
	if err != nil {
		t.Fatal(err)
	}
	w := newWriter(wcs, 18)
	if err := w.setUp(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.leaseHolder(ctx, replicas); err != nil {
		t.Fatal(err)
	}
	wctx, stopWriter := context.WithCancel(ctx)
	var writes sync.WaitGroup
	writes.Go(func() { w.run(wctx) })

	faults := []fault{
		{name: "none (steady writes)", hold: 4 * time.Second, inject: func(context.Context) (func(context.Context) error, error) {
			return func(context.Context) error { return nil }, nil
		}},
		e.crashLeader(),
		e.isolateInformersMember(infDial),
		e.cutInformers("client-informers", cluster.ExternalHost),
		e.cutLeaseHolder(replicas),
		e.pauseComponents(replicas),
		e.crashInformersMember(infDial),
		e.crashLeader(),
	}
	faultErr := e.inject(ctx, faults)
	stopWriter()
	writes.Wait()
	e.c.Network().HealAll()
	if faultErr != nil {
		t.Fatal(faultErr)
	}
	if err := e.c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("writer: %s", w.summary())
	if b := w.bugs(); len(b) > 0 {
		t.Errorf("the API server answered the writer with errors no fault excuses:\n  %s", strings.Join(b, "\n  "))
	}
	if w.okWrites() < 50 {
		t.Errorf("the writer got only %d writes through; the faults were not met under load", w.okWrites())
	}

	// Every informer: its cache and its notifications.
	deadline := time.Now().Add(convergeLimit)
	left := func() time.Duration { return max(time.Until(deadline), 10*time.Second) }
	for _, wt := range ws {
		rounds, d, err := converge(ctx, left(), wt.list, storeView(wt.informer.GetStore()))
		if err != nil {
			t.Errorf("informer %s: its cache differs from the server: %v:\n  %s", wt.kind, err, strings.Join(d, "\n  "))
		}
		nrounds, nd, err := converge(ctx, left(), wt.list, wt.notes.snapshot)
		if err != nil {
			t.Errorf("informer %s: its notifications (adds less deletes) differ from the server — a lost event: %v:\n  %s",
				wt.kind, err, strings.Join(nd, "\n  "))
		}
		t.Logf("%s; cache agreed in %d rounds, notifications in %d", wt.notes.summary(), rounds, nrounds)
		// The informers' member crashed: every watch must have been
		// opened again, or the faults tested nothing.
		if n := reqs.watches(wt.kind); n < 2 {
			t.Errorf("informer %s opened %d watches; the crash of its member should have made it watch again", wt.kind, n)
		}
		// client-go delivers tombstones and replacements only when a
		// list finds objects gone: an informer that listed once (at its
		// start) and has them lost a watch event.
		if tomb, repl := wt.notes.relisted(); (tomb > 0 || repl > 0) && reqs.lists(wt.kind) < 2 {
			t.Errorf("informer %s: %d tombstones and %d replacements, but it listed only at its start: its watch lost the deletions", wt.kind, tomb, repl)
		}
		if b := wt.notes.disorder(); len(b) > 0 {
			t.Errorf("informer %s: notifications out of order: %s", wt.kind, strings.Join(b, "; "))
		}
	}
	t.Logf("informer requests: %s", reqs.summary())
	for _, wt := range extWs {
		rounds, d, err := converge(ctx, left(), wt.list, storeView(wt.informer.GetStore()))
		if err != nil {
			t.Errorf("external informer %s: its cache differs from the server: %v:\n  %s", wt.kind, err, strings.Join(d, "\n  "))
		}
		nrounds, nd, err := converge(ctx, left(), wt.list, wt.notes.snapshot)
		if err != nil {
			t.Errorf("external informer %s: its notifications (adds less deletes) differ from the server — a lost event: %v:\n  %s",
				wt.kind, err, strings.Join(nd, "\n  "))
		}
		t.Logf("external %s; cache agreed in %d rounds, notifications in %d", wt.notes.summary(), rounds, nrounds)
		if b := wt.notes.disorder(); len(b) > 0 {
			t.Errorf("external informer %s: notifications out of order: %s", wt.kind, strings.Join(b, "; "))
		}
	}
	listPods := func(ctx context.Context) (view, error) {
		l, err := e.check.CoreV1().Pods(testNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		return viewOf(l.Items)
	}
	// Every manager's cache.
	for _, r := range replicas {
		rounds, d, err := converge(ctx, left(), listPods, r.cacheView)
		if err != nil {
			t.Errorf("manager replica %s: its cache differs from the server: %v:\n  %s", r.name, err, strings.Join(d, "\n  "))
		} else {
			t.Logf("manager replica %s (%s): cache agreed in %d rounds; exits: %v", r.name, r.identity(), rounds, r.exited())
		}
	}
	// The reconciler's work.
	unreconciled := e.waitReconciled(ctx, left(), replicas[0])
	if len(unreconciled) > 0 {
		t.Errorf("pods the manager never reconciled (no or a wrong %s): %s", hashAnnotation, strings.Join(unreconciled, "; "))
	}
	t.Logf("reconciles: %d", recons.get())
	e.checkLeadership(ctx, rec, h)
}

// waitReconciled waits until every pod of the test namespace carries the
// hash of its spec and was seen by a reconciler, and returns those that do
// not when limit passes.
func (e *env) waitReconciled(ctx context.Context, limit time.Duration, r *replica) []string {
	deadline := time.Now().Add(limit)
	for {
		var bad []string
		l, err := e.check.CoreV1().Pods(testNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			bad = []string{"listing pods: " + err.Error()}
		} else {
			for _, p := range l.Items {
				if got, want := p.Annotations[hashAnnotation], specHash(&p.Spec); got != want || !r.seenUID(p.UID) {
					bad = append(bad, describeUnreconciled(&p, got, want, r.seenUID(p.UID)))
				}
			}
		}
		if len(bad) == 0 || time.Now().After(deadline) {
			return bad
		}
		select {
		case <-ctx.Done():
			return append(bad, ctx.Err().Error())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func describeUnreconciled(p *corev1.Pod, got, want string, seen bool) string {
	return p.Name + " (uid " + string(p.UID) + "): hash " + quote(got) + ", want " + want + map[bool]string{true: "", false: ", never reconciled"}[seen]
}

func quote(s string) string {
	if s == "" {
		return "none"
	}
	return `"` + s + `"`
}

// checkLeadership judges the manager's terms: none overlapping, one open
// at the end and named by the Lease, and the lease handed over at least
// once (the lease holder was cut from the API for longer than it lasts).
func (e *env) checkLeadership(ctx context.Context, rec *leadership, h *holders) {
	t := e.t
	terms, overlaps, open := rec.check()
	for _, tm := range terms {
		t.Logf("term: %s from %s to %s", tm.identity, tm.start.Format("15:04:05.000"), endString(tm.end))
	}
	t.Logf("lease holders as the lease informer saw them: %v", h.get())
	if len(overlaps) > 0 {
		t.Errorf("two manager incarnations led at once: %s", strings.Join(overlaps, "; "))
	}
	if len(terms) < 2 {
		t.Errorf("the lease never changed hands (%d terms), though its holder was cut from the API for %s", len(terms), leaseDuration+renewDeadline+4*time.Second)
	}
	if len(open) != 1 {
		t.Errorf("%d incarnations lead at the end (%v); want one", len(open), open)
		return
	}
	l, err := e.check.CoordinationV1().Leases(testNamespace).Get(ctx, leaseName, metav1.GetOptions{})
	if err != nil {
		t.Errorf("reading lease %s: %v", leaseName, err)
		return
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != open[0] {
		t.Errorf("lease %s names holder %v, but %s leads", leaseName, ptrString(l.Spec.HolderIdentity), open[0])
	}
}

func ptrString(s *string) string {
	if s == nil {
		return "none"
	}
	return *s
}
