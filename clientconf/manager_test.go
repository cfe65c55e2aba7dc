package clientconf

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Leader election of the manager: a Lease in coordination.k8s.io, as
// controller-runtime's default lock, with timings short enough for a
// test and a margin (LeaseDuration - RenewDeadline) that a loaded machine
// keeps: a leader that cannot renew gives up RenewDeadline after its last
// renewal, and a candidate takes over no sooner than LeaseDuration after
// it saw that renewal.
const (
	leaseName     = "clientconf-labeller"
	leaseDuration = 10 * time.Second
	renewDeadline = 5 * time.Second
	retryPeriod   = time.Second
)

// hashAnnotation is where the reconciler keeps the hash of a pod's spec.
const hashAnnotation = "clientconf.podsafe.io/spec-hash"

// specHash is the hash the reconciler writes: the first 16 hex digits of
// the SHA-256 of the spec's JSON.
func specHash(spec *corev1.PodSpec) string {
	b, err := json.Marshal(spec)
	if err != nil {
		panic(err) // a PodSpec always marshals
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// term is one manager incarnation's leadership, as the manager saw it: from
// the start of its leader-elected runnables to their end.
type term struct {
	identity   string
	start, end time.Time // end zero: still leading
}

// leadership records every term of every replica.
type leadership struct {
	mu    sync.Mutex
	terms []term
}

func (l *leadership) begin(identity string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.terms = append(l.terms, term{identity: identity, start: time.Now()})
	return len(l.terms) - 1
}

func (l *leadership) finish(i int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.terms[i].end = time.Now()
}

// overlaps lists pairs of terms that were held at once, and open lists the
// identities still leading.
func (l *leadership) check() (all []term, overlaps []string, open []string) {
	l.mu.Lock()
	all = slices.Clone(l.terms)
	l.mu.Unlock()
	slices.SortFunc(all, func(a, b term) int { return a.start.Compare(b.start) })
	for i, t := range all {
		if t.end.IsZero() {
			open = append(open, t.identity)
		}
		for _, u := range all[i+1:] {
			if t.end.IsZero() || u.start.Before(t.end) {
				overlaps = append(overlaps, fmt.Sprintf("%s led from %s to %s while %s took over at %s",
					t.identity, t.start.Format("15:04:05.000"), endString(t.end), u.identity, u.start.Format("15:04:05.000")))
			}
		}
	}
	return all, overlaps, open
}

func endString(t time.Time) string {
	if t.IsZero() {
		return "now"
	}
	return t.Format("15:04:05.000")
}

// leaderProbe is a leader-elected runnable that records its manager's
// terms.
type leaderProbe struct {
	rec      *leadership
	identity string
}

func (p leaderProbe) NeedLeaderElection() bool { return true }

func (p leaderProbe) Start(ctx context.Context) error {
	i := p.rec.begin(p.identity)
	<-ctx.Done()
	p.rec.finish(i)
	return nil
}

// labeller reconciles pods of the test namespace: each carries the hash of
// its spec in hashAnnotation.
type labeller struct {
	client client.Client
	seen   *sync.Map // pod UID -> true, shared by every incarnation
	count  *int64Counter
}

func (r *labeller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var pod corev1.Pod
	if err := r.client.Get(ctx, req.NamespacedName, &pod); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	r.count.add(1)
	h := specHash(&pod.Spec)
	if pod.Annotations[hashAnnotation] == h {
		r.seen.Store(pod.UID, true)
		return reconcile.Result{}, nil
	}
	patch := client.MergeFrom(pod.DeepCopy())
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[hashAnnotation] = h
	if err := r.client.Patch(ctx, &pod, patch); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	r.seen.Store(pod.UID, true)
	return reconcile.Result{}, nil
}

type int64Counter struct {
	mu sync.Mutex
	n  int64
}

func (c *int64Counter) add(d int64) { c.mu.Lock(); c.n += d; c.mu.Unlock() }
func (c *int64Counter) get() int64  { c.mu.Lock(); defer c.mu.Unlock(); return c.n }

// replica is one replica of the manager, as a Deployment of two would run
// it: its own network host and first member, restarted (a new incarnation,
// with a new identity) whenever its manager exits, as a container that
// loses its lease is.
type replica struct {
	name   string
	host   string // its network host
	cfg    *rest.Config
	rec    *leadership
	seen   *sync.Map
	recons *int64Counter

	mu          sync.Mutex
	cur         manager.Manager
	incarnation int
	exits       []string
}

// identity is the current incarnation's holder identity.
func (r *replica) identity() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprintf("%s-%d", r.name, r.incarnation)
}

// exited lists how each earlier incarnation ended.
func (r *replica) exited() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.exits)
}

// run keeps an incarnation of the manager running until ctx ends.
func (r *replica) run(ctx context.Context) {
	for ctx.Err() == nil {
		r.mu.Lock()
		r.incarnation++
		r.mu.Unlock()
		mgr, err := r.build()
		if err == nil {
			r.mu.Lock()
			r.cur = mgr
			r.mu.Unlock()
			err = mgr.Start(ctx)
		}
		if ctx.Err() != nil {
			return
		}
		r.mu.Lock()
		r.exits = append(r.exits, fmt.Sprintf("%s-%d: %v", r.name, r.incarnation, err))
		r.cur = nil
		r.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (r *replica) build() (manager.Manager, error) {
	id := r.identity()
	// The lock's clients as controller-runtime builds its default one: a
	// request timeout of half the renew deadline, so that one hung request
	// does not cost the lease.
	lcfg := rest.CopyConfig(r.cfg)
	lcfg.Timeout = max(renewDeadline/2, time.Second)
	lcfg = rest.AddUserAgent(lcfg, "leader-election")
	core, err := corev1client.NewForConfig(lcfg)
	if err != nil {
		return nil, fmt.Errorf("lock client of %s: %w", id, err)
	}
	coord, err := coordinationv1client.NewForConfig(lcfg)
	if err != nil {
		return nil, fmt.Errorf("lock client of %s: %w", id, err)
	}
	// The default lock with a readable identity, so that the Lease's
	// holder names the incarnation.
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, testNamespace, leaseName, core, coord,
		resourcelock.ResourceLockConfig{Identity: id})
	if err != nil {
		return nil, fmt.Errorf("lock of %s: %w", id, err)
	}
	mgr, err := manager.New(r.cfg, manager.Options{
		Scheme:                              clientgoscheme.Scheme,
		Logger:                              logr.Discard(),
		Metrics:                             metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:              "0",
		LeaderElection:                      true,
		LeaderElectionID:                    leaseName,
		LeaderElectionNamespace:             testNamespace,
		LeaderElectionResourceLockInterface: lock,
		LeaseDuration:                       ptr.To(leaseDuration),
		RenewDeadline:                       ptr.To(renewDeadline),
		RetryPeriod:                         ptr.To(retryPeriod),
		Cache:                               cache.Options{DefaultNamespaces: map[string]cache.Config{testNamespace: {}}},
		// Every incarnation registers the same controller in one process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, fmt.Errorf("manager %s: %w", id, err)
	}
	if err := mgr.Add(leaderProbe{rec: r.rec, identity: id}); err != nil {
		return nil, fmt.Errorf("manager %s: %w", id, err)
	}
	err = ctrl.NewControllerManagedBy(mgr).Named("labeller").For(&corev1.Pod{}).
		Complete(&labeller{client: mgr.GetClient(), seen: r.seen, count: r.recons})
	if err != nil {
		return nil, fmt.Errorf("manager %s: %w", id, err)
	}
	return mgr, nil
}

// cacheView is the view of the pods in the current incarnation's cache
// (an error while it has none or has not synced).
func (r *replica) cacheView(ctx context.Context) (view, error) {
	r.mu.Lock()
	mgr := r.cur
	r.mu.Unlock()
	if mgr == nil {
		return nil, fmt.Errorf("replica %s has no running manager", r.name)
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if !mgr.GetCache().WaitForCacheSync(sctx) {
		return nil, fmt.Errorf("replica %s: cache not synced", r.name)
	}
	var pods corev1.PodList
	if err := mgr.GetCache().List(ctx, &pods, client.InNamespace(testNamespace)); err != nil {
		return nil, fmt.Errorf("replica %s: listing its cache: %w", r.name, err)
	}
	return viewOf(pods.Items)
}

// seenUID reports whether some incarnation reconciled the pod.
func (r *replica) seenUID(uid types.UID) bool {
	_, ok := r.seen.Load(uid)
	return ok
}
