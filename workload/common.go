package workload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/podsafe/podsafe/history"
)

// Error classes of the pod workloads, besides the register's (exists,
// conflict, notfound, unavailable). Forbidden, invalid and throttled are
// definite refusals (status fail); timeout, internal and transport leave the
// outcome unknown.
const (
	ErrClassForbidden = "forbidden"
	ErrClassInvalid   = "invalid"
	ErrClassThrottled = "throttled"
	ErrClassRejected  = "rejected" // any other 4xx
	ErrClassTimeout   = "timeout"
	ErrClassInternal  = "internal"
	ErrClassTransport = "transport"
)

// Defaults shared by the pod workloads.
const (
	// defaultOpTimeout bounds each operation in wall time.
	defaultOpTimeout = 2 * time.Second
	// defaultInterval is the mean scaled time between two operations of a
	// whole workload (all processes together). At time scale 100 a 60 s run
	// is 6,000 scaled seconds: about 600 operations, of which at most a few
	// hundred create pods.
	defaultInterval = 10 * time.Second
	// defaultMaxDeleteGrace is the longest grace a deletion asks for
	// (seconds, scaled).
	defaultMaxDeleteGrace = 30
	// setupRetry is the wall time between attempts of a setup step.
	setupRetry = 100 * time.Millisecond
)

// Outcome classifies the error of a client call as the status and error
// class recorded for its operation. API refusals (4xx, and 503, which the
// server sends only for requests it did not apply) are definite failures;
// timeouts, other 5xx and transport errors leave the outcome unknown. It is
// pure.
func Outcome(err error) (history.Status, string) {
	if err == nil {
		return history.StatusOK, ""
	}
	var st apierrors.APIStatus
	isAPI := errors.As(err, &st)
	switch {
	case apierrors.IsAlreadyExists(err):
		return history.StatusFail, ErrClassExists
	case apierrors.IsConflict(err):
		return history.StatusFail, ErrClassConflict
	case apierrors.IsNotFound(err):
		return history.StatusFail, ErrClassNotFound
	case apierrors.IsServiceUnavailable(err):
		return history.StatusFail, ErrClassUnavailable
	case apierrors.IsForbidden(err):
		return history.StatusFail, ErrClassForbidden
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return history.StatusFail, ErrClassInvalid
	case apierrors.IsTooManyRequests(err):
		return history.StatusFail, ErrClassThrottled
	case apierrors.IsTimeout(err), apierrors.IsServerTimeout(err):
		return history.StatusUnknown, ErrClassTimeout
	case isAPI && st.Status().Code >= 400 && st.Status().Code < 500:
		return history.StatusFail, ErrClassRejected
	case isAPI && st.Status().Code >= 500:
		return history.StatusUnknown, ErrClassInternal
	case errors.Is(err, context.DeadlineExceeded):
		return history.StatusUnknown, ErrClassTimeout
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return history.StatusUnknown, ErrClassTimeout
	}
	return history.StatusUnknown, ErrClassTransport
}

// proc is one workload process: its clientset, its random stream and the
// process number its operations are recorded under. A process whose
// operation ended unknown takes a fresh number, as in Jepsen, since the old
// operation may still take effect.
type proc struct {
	workload string // the Func prefix
	worker   int    // index among the workload's processes; stable
	workers  int    // how many processes the workload runs
	pid      int
	nextPID  *atomic.Int64
	cs       kubernetes.Interface
	rec      *history.Recorder
	stats    *Stats
	rng      *rand.Rand
	clock    clock.WithTicker
	timeout  time.Duration
	limiter  *Limiter        // shared by the workload's processes; nil: none
	runCtx   context.Context // the run's: a wait for the limiter ends with it
	pids     Processes       // how pid is recorded
}

// call records one operation Func "<workload>:<verb>" on key: an invoke
// line, fn under the operation timeout, then the completion with the
// outcome of fn's error. fn may fill op.Output and op.Found. The error is
// returned for the caller to learn from.
func (p *proc) call(ctx context.Context, verb, key, value string, fn func(ctx context.Context, op *history.Op) error) error {
	if p.runCtx != nil {
		// Once the run is over an operation its caller still makes (a
		// step that completes what it began) starts at once.
		_ = p.limiter.Wait(p.runCtx)
	}
	op := &history.Op{Process: p.pids.of(p.pid), Func: p.workload + ":" + verb, Key: key, Value: value}
	p.rec.Invoke(op)
	octx, cancel := context.WithTimeout(ctx, p.timeout)
	err := fn(octx, op)
	cancel()
	op.Status, op.Error = Outcome(err)
	switch op.Status {
	case history.StatusOK:
		p.stats.OK.Add(1)
	case history.StatusFail:
		p.stats.Fail.Add(1)
	default:
		p.stats.Unknown.Add(1)
	}
	p.rec.Complete(op)
	if op.Status == history.StatusUnknown {
		p.pid = int(p.nextPID.Add(1) - 1)
	}
	return err
}

// ensure repeats a recorded setup step until it succeeds or finds its object
// already there; it gives up only when ctx ends.
func (p *proc) ensure(ctx context.Context, verb, key string, fn func(ctx context.Context, op *history.Op) error) error {
	for {
		err := p.call(context.WithoutCancel(ctx), verb, key, "", fn)
		if err == nil || apierrors.IsAlreadyExists(err) {
			return nil
		}
		t := time.NewTimer(setupRetry)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// ensureNamespace creates namespace ns unless it exists.
func (p *proc) ensureNamespace(ctx context.Context, ns string) error {
	return p.ensure(ctx, "create-namespace", ns, func(ctx context.Context, _ *history.Op) error {
		_, err := p.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		return err
	})
}

// think waits before the process's next operation: a uniform draw with mean
// interval × workers of scaled time, so that the workload as a whole does
// about one operation per interval. It returns false when ctx ended.
func (p *proc) think(ctx context.Context, interval time.Duration) bool {
	d := thinkTime(p.rng, interval, p.workers)
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := p.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// thinkTime draws a process's pause: uniform in [0, 2 × interval × workers).
// It is pure given rng.
func thinkTime(rng *rand.Rand, interval time.Duration, workers int) time.Duration {
	span := 2 * int64(interval) * int64(max(workers, 1))
	if span <= 0 {
		return 0
	}
	return time.Duration(rng.Int64N(span))
}

// pickGrace draws the grace period of a deletion: nil (the pod's own) one
// time in four, otherwise 1..maxSec seconds, or 0..maxSec when force is
// allowed. It is pure given rng.
func pickGrace(rng *rand.Rand, maxSec int64, force bool) *int64 {
	if maxSec < 1 {
		maxSec = 1
	}
	if rng.IntN(4) == 0 {
		return nil
	}
	var g int64
	if force {
		g = rng.Int64N(maxSec + 1)
	} else {
		g = 1 + rng.Int64N(maxSec)
	}
	return &g
}

// graceValue renders a deletion's grace for an op's Value.
func graceValue(g *int64) string {
	if g == nil {
		return "grace=default"
	}
	return "grace=" + strconv.FormatInt(*g, 10)
}

// pickWeighted returns an index of weights drawn in proportion to the
// weights; zero weights are never drawn. It is pure given rng; all-zero
// weights give 0.
func pickWeighted(rng *rand.Rand, weights []int) int {
	total := 0
	for _, w := range weights {
		total += max(w, 0)
	}
	if total == 0 {
		return 0
	}
	r := rng.IntN(total)
	for i, w := range weights {
		w = max(w, 0)
		if r < w {
			return i
		}
		r -= w
	}
	return len(weights) - 1
}

// runProcs runs one process per client: worker 0 first runs setup (the
// others wait for it), then every process runs loop until ctx ends.
// Operations in flight when ctx ends complete on their own time, as in
// Jepsen: cutting them short would only turn known outcomes into unknown.
func runProcs(ctx context.Context, env Env, name string, timeout time.Duration,
	setup func(ctx context.Context, p *proc) error, loop func(ctx context.Context, p *proc)) error {
	if len(env.Clients) == 0 {
		return fmt.Errorf("%s workload: no clients", name)
	}
	if env.Recorder == nil {
		return fmt.Errorf("%s workload: no recorder", name)
	}
	stats := env.Stats
	if stats == nil {
		stats = &Stats{}
	}
	clk := env.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	if timeout <= 0 {
		timeout = defaultOpTimeout
	}
	nextPID := &atomic.Int64{}
	nextPID.Store(int64(len(env.Clients)))
	procs := make([]*proc, len(env.Clients))
	for i, cs := range env.Clients {
		procs[i] = &proc{
			workload: name, worker: i, workers: len(env.Clients), pid: i, nextPID: nextPID,
			cs: cs, rec: env.Recorder, stats: stats, clock: clk, timeout: timeout,
			limiter: env.Limiter, runCtx: ctx, pids: env.Processes,
			rng: rand.New(rand.NewPCG(env.Seed, uint64(i)+1)),
		}
	}
	if setup != nil {
		if err := setup(ctx, procs[0]); err != nil {
			if ctx.Err() != nil {
				return nil // the run ended during setup
			}
			return fmt.Errorf("%s workload setup: %w", name, err)
		}
	}
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(func() { loop(ctx, p) })
	}
	wg.Wait()
	return nil
}

// ErrInvalidWorkload: a workload's configuration is unusable.
var ErrInvalidWorkload = errors.New("invalid workload configuration")

// validWeights reports negative or all-zero operation weights.
func validWeights(name string, weights []int) error {
	total := 0
	for _, w := range weights {
		if w < 0 {
			return fmt.Errorf("%w: %s: operation weights must not be negative, got %v", ErrInvalidWorkload, name, weights)
		}
		total += w
	}
	if total == 0 {
		return fmt.Errorf("%w: %s: at least one operation weight must be positive", ErrInvalidWorkload, name)
	}
	return nil
}
