// Package workload generates seeded, recorded client operations against a
// cluster's API. Every operation is written to the history as an invoke line
// before it starts and a complete line when it ends.
package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/podsafe/podsafe/history"
)

// Error classes written to history.Op.Error. The store checker reads a failed
// op's class to know what the failure says about the key: "exists" (the key was
// present), "conflict" (the key held another version), "notfound" (the key was
// absent) and "unavailable" (the request was never applied). Any other failure is
// recorded with status unknown.
const (
	ErrClassExists      = "exists"
	ErrClassConflict    = "conflict"
	ErrClassNotFound    = "notfound"
	ErrClassUnavailable = "unavailable"
)

// RegisterNamespace is the register workload's default namespace.
const RegisterNamespace = "podsafe-register"

// Register is the raw store workload: processes doing create, get,
// compare-and-swap, delete and list on a small, slowly rotating set of keys.
// Each key is a coordination.k8s.io Lease whose spec.holderIdentity holds the
// value; every write writes a value no other write uses, so a resourceVersion
// and the value read with it name the same write and compare-and-swap on
// resourceVersion is compare-and-swap on the value. The cas is a merge patch
// conditional on the resourceVersion, never a PUT: a PUT of a Lease that is
// gone creates it again (kube-apiserver allows create on update for Leases).
// Reads and writes record
// the resourceVersion they returned (history.Op.RV); a list records its items.
// Watchers (see Watcher) keep watches of the namespace open meanwhile.
type Register struct {
	// Namespace holds the keys (default RegisterNamespace).
	Namespace string
	// Keys is how many keys are live at once (default 5).
	Keys int
	// OpsPerKey is roughly how many operations a key sees before it retires
	// and a fresh one takes its place, which keeps every key's history small
	// enough to check (default 200).
	OpsPerKey int
	// OpTimeout bounds each operation; one that runs out is recorded unknown
	// (default 2 s).
	OpTimeout time.Duration
	// Weights of get, create, cas, delete and list (default 8, 4, 8, 2, 1).
	// Lists are few: each spans every key, and the checkers compare each
	// with the store's committed history.
	Weights [5]int
	// Watchers watch the namespace while the processes run (none: no
	// watches are recorded).
	Watchers []Watcher
	// WatchTimeout is the longest timeoutSeconds a watch request asks for
	// (default 20 s); see Watcher.
	WatchTimeout time.Duration
	// Limiter bounds the operations of all processes per second, the
	// watchers' lists and reads included (nil: no bound; Run takes
	// Env.Limiter). A read a cas needs first counts.
	Limiter *Limiter

	_ struct{}
}

// Stats counts completed operations by outcome; safe for concurrent use.
type Stats struct {
	OK, Fail, Unknown atomic.Int64
}

// String renders the counts for a progress line.
func (s *Stats) String() string {
	return fmt.Sprintf("ok %d fail %d unknown %d", s.OK.Load(), s.Fail.Load(), s.Unknown.Load())
}

func (w *Register) defaults() {
	if w.Namespace == "" {
		w.Namespace = RegisterNamespace
	}
	if w.Keys <= 0 {
		w.Keys = 5
	}
	if w.OpsPerKey <= 0 {
		w.OpsPerKey = 200
	}
	if w.OpTimeout <= 0 {
		w.OpTimeout = 2 * time.Second
	}
	if w.Weights == [5]int{} {
		w.Weights = [5]int{8, 4, 8, 2, 1}
	}
	if w.WatchTimeout <= 0 {
		w.WatchTimeout = defaultWatchTimeout
	}
}

// Run implements Workload: one process per client until ctx ends.
func (w *Register) Run(ctx context.Context, env Env) error {
	if w.Limiter == nil {
		w.Limiter = env.Limiter
	}
	return w.RunClients(ctx, env.Clients, env.Recorder, env.Seed, env.Stats)
}

// RunClients drives one process per clientset, and the watchers of
// w.Watchers, until ctx ends. seed makes each process's choices
// reproducible. Operations and watches are recorded in rec.
func (w *Register) RunClients(ctx context.Context, clients []kubernetes.Interface, rec *history.Recorder, seed uint64, stats *Stats) error {
	w.defaults()
	if len(clients) == 0 {
		return errors.New("register workload: no clients")
	}
	// The registers' namespace must exist where the API enforces it (a
	// real kube-apiserver does); creating it is not one of the operations
	// the registers are judged on.
	if err := ensureNamespace(ctx, clients[0], w.Namespace); err != nil {
		return fmt.Errorf("register workload: %w", err)
	}
	var (
		wg      sync.WaitGroup
		counter atomic.Int64
		nextPID atomic.Int64
	)
	nextPID.Store(int64(len(clients)))
	for i, wt := range w.Watchers {
		if wt.Client == nil {
			return fmt.Errorf("register workload: watcher %d has no client", i)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.runWatcher(ctx, i, wt, rec, seed, stats, &nextPID)
		}()
	}
	for i, cs := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := &registerProc{
				w: w, cs: cs, rec: rec, stats: stats, pid: i, nextPID: &nextPID,
				rng: rand.New(rand.NewPCG(seed, uint64(i)+1)), counter: &counter,
				seen: map[string]seenValue{},
			}
			p.loop(ctx)
		}()
	}
	wg.Wait()
	return nil
}

type seenValue struct {
	value string
	rv    string
}

type registerProc struct {
	w       *Register
	cs      kubernetes.Interface
	rec     *history.Recorder
	stats   *Stats
	rng     *rand.Rand
	counter *atomic.Int64
	nextPID *atomic.Int64
	pid     int
	writes  int
	seen    map[string]seenValue
}

func (p *registerProc) loop(runCtx context.Context) {
	// An operation in flight when the run ends completes on its own time, as
	// in Jepsen: cutting it short would only turn known outcomes into unknown.
	ctx := context.WithoutCancel(runCtx)
	for runCtx.Err() == nil {
		if p.w.Limiter.Wait(runCtx) != nil {
			return // the run ended while waiting: no operation starts
		}
		n := p.counter.Add(1)
		base := n / int64(p.w.OpsPerKey)
		key := "k" + strconv.FormatInt(base+int64(p.rng.IntN(p.w.Keys)), 10)
		switch p.pick() {
		case 0:
			p.get(ctx, key)
		case 1:
			p.create(ctx, key)
		case 2:
			sv, ok := p.seen[key]
			if !ok {
				p.get(ctx, key) // cas needs a version: read first
				continue
			}
			p.cas(ctx, key, sv)
		case 3:
			p.delete(ctx, key)
		case 4:
			p.list(ctx)
		}
	}
}

func (p *registerProc) pick() int {
	total := 0
	for _, w := range p.w.Weights {
		total += w
	}
	r := p.rng.IntN(total)
	for i, w := range p.w.Weights {
		if r < w {
			return i
		}
		r -= w
	}
	return 0
}

func (p *registerProc) value() string {
	p.writes++
	return fmt.Sprintf("p%d-%d", p.pid, p.writes)
}

func (p *registerProc) begin(f, key string) *history.Op {
	op := &history.Op{Process: p.pid, Func: f, Key: key}
	return op
}

// finish records the outcome of op from err and counts it. A process whose op
// ended unknown takes a new process number, as in Jepsen: the old one may still
// be running.
func (p *registerProc) finish(op *history.Op, err error) {
	switch {
	case err == nil:
		op.Status = history.StatusOK
		p.stats.OK.Add(1)
	default:
		class := Classify(err)
		op.Error = class
		if class == "" {
			op.Status = history.StatusUnknown
			op.Error = err.Error()
			p.stats.Unknown.Add(1)
		} else {
			op.Status = history.StatusFail
			p.stats.Fail.Add(1)
		}
	}
	p.rec.Complete(op)
	if op.Status == history.StatusUnknown {
		p.pid = int(p.nextPID.Add(1) - 1)
		clear(p.seen)
	}
}

// Classify maps an API error to the error class recorded for a failed op, or
// "" when the error leaves the outcome unknown.
func Classify(err error) string {
	switch {
	case apierrors.IsAlreadyExists(err):
		return ErrClassExists
	case apierrors.IsConflict(err):
		return ErrClassConflict
	case apierrors.IsNotFound(err):
		return ErrClassNotFound
	case apierrors.IsServiceUnavailable(err):
		return ErrClassUnavailable
	}
	return ""
}

func (p *registerProc) get(ctx context.Context, key string) {
	op := p.begin("get", key)
	p.rec.Invoke(op)
	octx, cancel := context.WithTimeout(ctx, p.w.OpTimeout)
	l, err := p.cs.CoordinationV1().Leases(p.w.Namespace).Get(octx, key, metav1.GetOptions{})
	cancel()
	if apierrors.IsNotFound(err) {
		op.Found = false
		delete(p.seen, key)
		p.finish(op, nil)
		return
	}
	if err == nil {
		op.Found = true
		op.Output, op.RV = holder(l), l.ResourceVersion
		p.seen[key] = seenValue{value: op.Output, rv: l.ResourceVersion}
	}
	p.finish(op, err)
}

func (p *registerProc) create(ctx context.Context, key string) {
	op := p.begin("create", key)
	op.Value = p.value()
	p.rec.Invoke(op)
	octx, cancel := context.WithTimeout(ctx, p.w.OpTimeout)
	l, err := p.cs.CoordinationV1().Leases(p.w.Namespace).Create(octx, lease(p.w.Namespace, key, op.Value, ""), metav1.CreateOptions{})
	cancel()
	if err == nil {
		op.RV = l.ResourceVersion
		p.seen[key] = seenValue{value: op.Value, rv: l.ResourceVersion}
	}
	p.finish(op, err)
}

func (p *registerProc) cas(ctx context.Context, key string, sv seenValue) {
	op := p.begin("cas", key)
	op.Value = p.value()
	op.Expect = sv.value
	p.rec.Invoke(op)
	octx, cancel := context.WithTimeout(ctx, p.w.OpTimeout)
	// A merge patch carrying the expected resourceVersion: the API applies
	// it only over that version and never creates the key. A PUT would not
	// do: kube-apiserver creates a Lease that a PUT finds absent, whatever
	// resourceVersion it carries (AllowCreateOnUpdate).
	l, err := p.cs.CoordinationV1().Leases(p.w.Namespace).Patch(octx, key, types.MergePatchType, casPatch(op.Value, sv.rv), metav1.PatchOptions{})
	cancel()
	delete(p.seen, key)
	if err == nil {
		op.RV = l.ResourceVersion
		p.seen[key] = seenValue{value: op.Value, rv: l.ResourceVersion}
	}
	p.finish(op, err)
}

func (p *registerProc) delete(ctx context.Context, key string) {
	op := p.begin("delete", key)
	p.rec.Invoke(op)
	octx, cancel := context.WithTimeout(ctx, p.w.OpTimeout)
	err := p.cs.CoordinationV1().Leases(p.w.Namespace).Delete(octx, key, metav1.DeleteOptions{})
	cancel()
	delete(p.seen, key)
	p.finish(op, err)
}

func lease(ns, name, value, rv string) *coordinationv1.Lease {
	v := value
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: rv},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &v},
	}
}

// casPatch is the merge patch of a cas: the new holder, on condition of
// resourceVersion rv.
func casPatch(value, rv string) []byte {
	b, _ := json.Marshal(map[string]any{
		"metadata": map[string]string{"resourceVersion": rv},
		"spec":     map[string]string{"holderIdentity": value},
	})
	return b
}

func holder(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// ensureNamespace creates namespace ns unless it exists, retrying while
// ctx lasts (a fault may be cutting the client off).
func ensureNamespace(ctx context.Context, cs kubernetes.Interface, ns string) error {
	for {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := cs.CoreV1().Namespaces().Create(rctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		cancel()
		if err == nil || apierrors.IsAlreadyExists(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("creating namespace %s: %w", ns, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
