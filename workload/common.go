package workload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/podsafe/podsafe/history"
	"github.com/podsafe/podsafe/kubelet"
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

// simContainer is a container of the simulated runtime; the image is never
// pulled.
func simContainer(name string) corev1.Container {
	return corev1.Container{Name: name, Image: "podsafe.io/sim:1"}
}

// setScript scripts container c of a pod (or template) with annotations a.
func setScript(a map[string]string, c, script string) {
	if script != "" {
		a[kubelet.ScriptAnnotationPrefix+c] = script
	}
}

// podSummary renders what a list of pods shows, for an op's Output.
func podSummary(pods []corev1.Pod) string {
	phases := map[corev1.PodPhase]int{}
	terminating := 0
	for i := range pods {
		phases[pods[i].Status.Phase]++
		if pods[i].DeletionTimestamp != nil {
			terminating++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "pods=%d", len(pods))
	for _, ph := range []corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed, corev1.PodUnknown} {
		if n := phases[ph]; n > 0 {
			fmt.Fprintf(&b, " %s=%d", strings.ToLower(string(ph)), n)
		}
	}
	if terminating > 0 {
		fmt.Fprintf(&b, " terminating=%d", terminating)
	}
	return b.String()
}

// podState renders one pod for an op's Output.
func podState(p *corev1.Pod) string {
	s := fmt.Sprintf("uid=%s phase=%s", p.UID, p.Status.Phase)
	if p.Spec.NodeName != "" {
		s += " node=" + p.Spec.NodeName
	}
	if p.DeletionTimestamp != nil {
		s += " terminating"
	}
	return s
}

// podTerminal reports whether a pod's phase is Succeeded or Failed.
func podTerminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// setVerb is an operation on a controller-managed set (StatefulSet or
// ReplicaSet).
type setVerb int

// The set operations.
const (
	setCreate    setVerb = iota // create the set (fails "exists" when it is there)
	setScale                    // set spec.replicas through the scale subresource
	setDeletePod                // delete one of the set's pods with a random grace
	setGet                      // read the set
	setList                     // list the namespace's pods
	setVerbs
)

var setVerbNames = [setVerbs]string{"create", "scale", "delete-pod", "get", "list"}

// String is the verb as operations record it.
func (v setVerb) String() string { return setVerbNames[v] }

// setAction is one chosen set operation.
type setAction struct {
	verb     setVerb
	set      int
	replicas int32  // setCreate, setScale
	ord      int    // setDeletePod: pet ordinal
	pick     uint64 // setDeletePod: which pod, when the set names none
	grace    *int64 // setDeletePod
	// regrace is a follow-up of setDeletePod: after regraceAfter of scaled
	// time, delete the same pod again, while it terminates, with grace
	// regraceGrace (shorter or longer than grace).
	regrace      bool
	regraceAfter time.Duration
	regraceGrace int64
}

// String renders the action for tests and logs.
func (a setAction) String() string {
	switch a.verb {
	case setCreate, setScale:
		return fmt.Sprintf("%s %d replicas=%d", a.verb, a.set, a.replicas)
	case setDeletePod:
		s := fmt.Sprintf("%s %d ord=%d pick=%d %s", a.verb, a.set, a.ord, a.pick, graceValue(a.grace))
		if a.regrace {
			s += fmt.Sprintf(" then after %s grace=%d", a.regraceAfter, a.regraceGrace)
		}
		return s
	}
	return fmt.Sprintf("%s %d", a.verb, a.set)
}

// setKnowledge is what a process knows of one set.
type setKnowledge int

const (
	setUnseen setKnowledge = iota // not looked at yet: read it first
	setAbsent                     // found missing: create it
	setExists                     // seen to exist
)

// setPlanner chooses a process's operations on a fixed family of sets. It
// knows only what the process saw: a set it has not looked at is read
// first, one found missing is created. Not safe for concurrent use; each
// process has its own.
type setPlanner struct {
	rng         *rand.Rand
	sets        int
	maxReplicas int
	maxGrace    int64
	force       bool
	weights     [setVerbs]int
	// regrace is the percentage of pod deletions followed by a second
	// deletion of the terminating pod (SetKnobs.Regrace); 0 draws nothing
	// more from rng, so the operations of a seed stay as they were.
	regrace  int
	state    []setKnowledge
	replicas []int // the last spec.replicas seen or written, -1 unknown
}

func newSetPlanner(rng *rand.Rand, sets, maxReplicas int, maxGrace int64, force bool, weights [setVerbs]int) *setPlanner {
	pl := &setPlanner{rng: rng, sets: sets, maxReplicas: maxReplicas, maxGrace: maxGrace, force: force,
		weights: weights, state: make([]setKnowledge, sets), replicas: make([]int, sets)}
	for i := range pl.replicas {
		pl.replicas[i] = -1
	}
	return pl
}

// next chooses the next operation. It is a pure function of the seed and
// the outcomes observed so far.
func (pl *setPlanner) next() setAction {
	a := setAction{set: pl.rng.IntN(pl.sets)}
	switch pl.state[a.set] {
	case setUnseen:
		a.verb = setGet
	case setAbsent:
		a.verb = setCreate
	default:
		a.verb = setVerb(pickWeighted(pl.rng, pl.weights[:]))
	}
	switch a.verb {
	case setCreate, setScale:
		a.replicas = int32(pl.rng.IntN(pl.maxReplicas + 1))
	case setDeletePod:
		// A pet beyond the replicas the process last saw is most likely
		// gone; aim at the ones that should exist.
		n := pl.replicas[a.set]
		if n < 0 {
			n = pl.maxReplicas
		}
		a.ord = pl.rng.IntN(max(n, 1))
		a.pick = pl.rng.Uint64()
		a.grace = pickGrace(pl.rng, pl.maxGrace, pl.force)
		if pl.regrace > 0 && pl.rng.IntN(100) < pl.regrace {
			a.regrace = true
			a.regraceAfter, a.regraceGrace = pickRegrace(pl.rng, a.grace, pl.maxGrace)
		}
	}
	return a
}

// pickRegrace draws the second deletion of a pod deleted with grace first
// (nil: the pod's own): with probability first/maxSec a much shorter grace,
// uniform in 1..max(first/3, 1), otherwise a longer one, uniform in
// first+1..maxSec (uniform in 1..maxSec when first is nil), so that long
// graces are mostly shortened and short ones mostly lengthened; and a delay
// uniform in [0, first/4) of scaled time (at most 1 s when first is nil or
// tiny), so that the pod is still terminating and a kubelet keeping the
// first deadline overruns the second by far. It is pure given rng.
func pickRegrace(rng *rand.Rand, first *int64, maxSec int64) (time.Duration, int64) {
	maxSec = max(maxSec, 2)
	var g int64
	switch {
	case first == nil:
		g = 1 + rng.Int64N(maxSec)
	case *first > 1 && (*first >= maxSec || rng.Int64N(maxSec) < *first):
		g = 1 + rng.Int64N(max(min(*first, maxSec)/3, 1))
	default:
		g = *first + 1 + rng.Int64N(maxSec-*first)
	}
	span := 4 * time.Second
	if first != nil && *first > 4 {
		span = time.Duration(*first) * time.Second
	}
	return time.Duration(rng.Int64N(int64(span / 4))), g
}

// observe learns from the outcome of a whether the set exists and, when a
// wrote it or a get read it (replicas, -1 when not known), its replicas.
func (pl *setPlanner) observe(a setAction, replicas int, err error) {
	switch {
	case a.verb == setCreate && err == nil, a.verb == setScale && err == nil:
		pl.state[a.set], pl.replicas[a.set] = setExists, int(a.replicas)
	case a.verb == setCreate && apierrors.IsAlreadyExists(err):
		pl.state[a.set] = setExists
	case a.verb == setGet && err == nil:
		pl.state[a.set] = setExists
		if replicas >= 0 {
			pl.replicas[a.set] = replicas
		}
	case (a.verb == setScale || a.verb == setGet) && apierrors.IsNotFound(err):
		pl.state[a.set], pl.replicas[a.set] = setAbsent, -1
	}
}

// slotVerb is an operation on a bare pod slot.
type slotVerb int

// The slot operations.
const (
	slotCreate slotVerb = iota // create the slot's pod
	slotGet                    // read the slot's pod
	slotList                   // list the namespace's pods
	slotExtra                  // the workload's own extra operation
	slotDelete                 // delete the slot's pod with a random grace
	slotVerbs
)

var slotVerbNames = [slotVerbs]string{"create", "get", "list", "extra", "delete"}

// String is the verb as operations record it.
func (v slotVerb) String() string { return slotVerbNames[v] }

// slotAction is one chosen slot operation.
type slotAction struct {
	verb slotVerb
	slot int // -1 for list and extra
	// variant seeds the workload's choice of pod (slotCreate) or of its
	// extra operation (slotExtra).
	variant uint64
	// lifetime is how long a created pod lives before it is deleted.
	lifetime time.Duration
	grace    *int64 // slotDelete
}

// String renders the action for tests and logs.
func (a slotAction) String() string {
	switch a.verb {
	case slotCreate:
		return fmt.Sprintf("create %d variant=%d life=%s", a.slot, a.variant, a.lifetime)
	case slotDelete:
		return fmt.Sprintf("delete %d %s", a.slot, graceValue(a.grace))
	case slotExtra:
		return fmt.Sprintf("extra variant=%d", a.variant)
	}
	return fmt.Sprintf("%s %d", a.verb, a.slot)
}

// slotKnowledge is what a process knows of one slot it owns.
type slotKnowledge int

const (
	slotAbsent slotKnowledge = iota // no pod, as far as the process knows
	slotLive                        // a pod the process created, deleted when due
	slotUnsure                      // an outcome was unknown: read it before acting
)

// slotPlanner chooses a process's operations on the bare-pod slots it owns:
// slot j belongs to worker j mod workers, so no two processes manage the same
// pod. A created pod is deleted once its lifetime is over; a slot whose state
// is unsure is read first. Not safe for concurrent use.
type slotPlanner struct {
	rng      *rand.Rand
	owned    []int
	state    map[int]slotKnowledge
	due      map[int]time.Time
	lifetime time.Duration
	maxGrace int64
	force    bool
	// weights of create, get, list and extra when nothing is due.
	weights [4]int
}

func newSlotPlanner(rng *rand.Rand, slots, worker, workers int, lifetime time.Duration, maxGrace int64, force bool, weights [4]int) *slotPlanner {
	pl := &slotPlanner{rng: rng, owned: ownedSlots(slots, worker, workers), state: map[int]slotKnowledge{},
		due: map[int]time.Time{}, lifetime: lifetime, maxGrace: maxGrace, force: force, weights: weights}
	return pl
}

// ownedSlots lists the slots of worker: j in [0, slots) with j mod workers
// == worker. It is pure.
func ownedSlots(slots, worker, workers int) []int {
	var out []int
	for j := worker; j < slots; j += max(workers, 1) {
		out = append(out, j)
	}
	return out
}

// next chooses the next operation at scaled time now. It is a pure function
// of the seed, now and the outcomes observed so far.
func (pl *slotPlanner) next(now time.Time) slotAction {
	for _, j := range pl.owned {
		if pl.state[j] == slotLive && !now.Before(pl.due[j]) {
			return slotAction{verb: slotDelete, slot: j, grace: pickGrace(pl.rng, pl.maxGrace, pl.force)}
		}
	}
	for _, j := range pl.owned {
		if pl.state[j] == slotUnsure {
			return slotAction{verb: slotGet, slot: j}
		}
	}
	a := slotAction{verb: slotVerb(pickWeighted(pl.rng, pl.weights[:])), slot: -1}
	switch a.verb {
	case slotCreate:
		var absent []int
		for _, j := range pl.owned {
			if pl.state[j] == slotAbsent {
				absent = append(absent, j)
			}
		}
		if len(absent) == 0 {
			a.verb = slotGet
			break
		}
		a.slot = absent[pl.rng.IntN(len(absent))]
		a.variant = pl.rng.Uint64()
		a.lifetime = pl.lifetime/2 + time.Duration(pl.rng.Int64N(int64(max(pl.lifetime, 1))))
	case slotExtra:
		a.variant = pl.rng.Uint64()
	}
	if a.verb == slotGet {
		if len(pl.owned) == 0 {
			a.verb = slotList
		} else {
			a.slot = pl.owned[pl.rng.IntN(len(pl.owned))]
		}
	}
	return a
}

// observe learns from the outcome of a at scaled time now; pod is what a get
// read (nil otherwise or when absent).
func (pl *slotPlanner) observe(a slotAction, now time.Time, pod *corev1.Pod, err error) {
	if a.slot < 0 {
		return
	}
	status, _ := Outcome(err)
	j := a.slot
	switch a.verb {
	case slotCreate:
		switch {
		case err == nil:
			pl.state[j], pl.due[j] = slotLive, now.Add(a.lifetime)
		case apierrors.IsAlreadyExists(err), status == history.StatusUnknown:
			pl.state[j] = slotUnsure
		default:
			pl.state[j] = slotAbsent
		}
	case slotDelete:
		switch {
		case err == nil, apierrors.IsNotFound(err):
			pl.state[j] = slotAbsent
		case status == history.StatusUnknown:
			pl.state[j] = slotUnsure
		}
		// Any other refusal keeps the pod live and due: it is tried again.
	case slotGet:
		switch {
		case err == nil && pod != nil:
			pl.learn(j, now, pod)
		case err == nil, apierrors.IsNotFound(err):
			pl.state[j] = slotAbsent
		}
	}
}

// learn updates a slot from a pod read: a pod on its way out counts as
// absent (creating again fails "exists" until it is gone, which the process
// then reads again), a finished one is due for deletion now, a live one not
// yet known gets a fresh lifetime.
func (pl *slotPlanner) learn(j int, now time.Time, pod *corev1.Pod) {
	switch {
	case pod.DeletionTimestamp != nil:
		pl.state[j] = slotAbsent
	case podTerminal(pod):
		pl.state[j], pl.due[j] = slotLive, now
	case pl.state[j] != slotLive:
		pl.state[j], pl.due[j] = slotLive, now.Add(pl.lifetime)
	}
}

// setFamily is a workload's fixed family of sets: StatefulSets (pets) or
// ReplicaSets named prefix0, prefix1, … in one namespace, built by template.
type setFamily struct {
	ns     string
	prefix string
	// pets: StatefulSets, whose pods are named <set>-<ordinal>; otherwise
	// ReplicaSets, whose pods have generated names.
	pets bool
	// statefulSet / replicaSet build set i with the given replicas.
	statefulSet func(i int, replicas int32) *appsv1.StatefulSet
	replicaSet  func(i int, replicas int32) *appsv1.ReplicaSet
}

func (f *setFamily) name(i int) string { return f.prefix + strconv.Itoa(i) }

func (f *setFamily) key(name string) string { return f.ns + "/" + name }

// run performs a and teaches the planner its outcome.
func (f *setFamily) run(ctx context.Context, p *proc, pl *setPlanner, a setAction) {
	replicas := -1
	err := f.do(ctx, p, a, &replicas)
	pl.observe(a, replicas, err)
}

// do performs a on the family as process p, recording every call, and
// returns the error the planner learns from (a get that found nothing
// returns NotFound although it is recorded as a successful read); a get
// stores the spec.replicas it read in replicas.
func (f *setFamily) do(ctx context.Context, p *proc, a setAction, replicas *int) error {
	name := f.name(a.set)
	switch a.verb {
	case setCreate:
		return p.call(ctx, "create", f.key(name), fmt.Sprintf("replicas=%d", a.replicas), func(ctx context.Context, _ *history.Op) error {
			var err error
			if f.pets {
				_, err = p.cs.AppsV1().StatefulSets(f.ns).Create(ctx, f.statefulSet(a.set, a.replicas), metav1.CreateOptions{})
			} else {
				_, err = p.cs.AppsV1().ReplicaSets(f.ns).Create(ctx, f.replicaSet(a.set, a.replicas), metav1.CreateOptions{})
			}
			return err
		})
	case setScale:
		return p.call(ctx, "scale", f.key(name), fmt.Sprintf("replicas=%d", a.replicas), func(ctx context.Context, op *history.Op) error {
			sc := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
				Spec: autoscalingv1.ScaleSpec{Replicas: a.replicas}}
			var err error
			if f.pets {
				sc, err = p.cs.AppsV1().StatefulSets(f.ns).UpdateScale(ctx, name, sc, metav1.UpdateOptions{})
			} else {
				sc, err = p.cs.AppsV1().ReplicaSets(f.ns).UpdateScale(ctx, name, sc, metav1.UpdateOptions{})
			}
			if err == nil {
				op.Output = fmt.Sprintf("replicas=%d current=%d", sc.Spec.Replicas, sc.Status.Replicas)
			}
			return err
		})
	case setDeletePod:
		pod, err := name+"-"+strconv.Itoa(a.ord), error(nil)
		if f.pets {
			err = deletePod(ctx, p, f.ns, pod, a.grace)
		} else {
			pod, err = f.deleteReplica(ctx, p, name, a)
		}
		if err == nil && pod != "" && a.regrace {
			regracePod(ctx, p, f.ns, pod, a.regraceAfter, a.regraceGrace)
		}
		return err
	case setGet:
		var found error
		err := p.call(ctx, "get", f.key(name), "", func(ctx context.Context, op *history.Op) error {
			var spec *int32
			var st string
			var err error
			if f.pets {
				var s *appsv1.StatefulSet
				if s, err = p.cs.AppsV1().StatefulSets(f.ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
					spec, st = s.Spec.Replicas, fmt.Sprintf("current=%d ready=%d", s.Status.Replicas, s.Status.ReadyReplicas)
				}
			} else {
				var s *appsv1.ReplicaSet
				if s, err = p.cs.AppsV1().ReplicaSets(f.ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
					spec, st = s.Spec.Replicas, fmt.Sprintf("current=%d ready=%d", s.Status.Replicas, s.Status.ReadyReplicas)
				}
			}
			found = err
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err == nil {
				op.Found = true
				*replicas = int(ptr.Deref(spec, 1))
				op.Output = fmt.Sprintf("replicas=%d %s", *replicas, st)
			}
			return err
		})
		if err == nil {
			return found
		}
		return err
	case setList:
		_, err := listPods(ctx, p, f.ns, "")
		return err
	}
	return nil
}

// deleteReplica lists the pods of a ReplicaSet and deletes the one a.pick
// names among those not yet terminating, sorted by name; it returns that
// pod's name ("" when there was none).
func (f *setFamily) deleteReplica(ctx context.Context, p *proc, set string, a setAction) (string, error) {
	pods, err := listPods(ctx, p, f.ns, set)
	if err != nil {
		return "", err
	}
	var names []string
	for i := range pods {
		if pods[i].DeletionTimestamp == nil {
			names = append(names, pods[i].Name)
		}
	}
	if len(names) == 0 {
		return "", nil
	}
	sort.Strings(names)
	name := names[a.pick%uint64(len(names))]
	return name, deletePod(ctx, p, f.ns, name, a.grace)
}

// listPods lists the pods of namespace ns, all of them (app "") or those
// labelled app=<app>, as a recorded operation "list" (key ns) or
// "list-pods" (key ns/app).
func listPods(ctx context.Context, p *proc, ns, app string) ([]corev1.Pod, error) {
	verb, key, opts := "list", ns, metav1.ListOptions{}
	if app != "" {
		verb, key, opts.LabelSelector = "list-pods", ns+"/"+app, labelApp+"="+app
	}
	var pods []corev1.Pod
	err := p.call(ctx, verb, key, "", func(ctx context.Context, op *history.Op) error {
		l, err := p.cs.CoreV1().Pods(ns).List(ctx, opts)
		if err == nil {
			pods = l.Items
			op.Found = len(pods) > 0
			op.Output = podSummary(pods)
		}
		return err
	})
	return pods, err
}

// deletePod deletes pod ns/name with grace (nil: the pod's own) as a
// recorded operation "delete-pod".
func deletePod(ctx context.Context, p *proc, ns, name string, grace *int64) error {
	return p.call(ctx, "delete-pod", ns+"/"+name, graceValue(grace), func(ctx context.Context, _ *history.Op) error {
		return p.cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: grace})
	})
}

// regracePod waits after of scaled time, reads pod ns/name and, if it is
// still terminating, deletes it again with grace seconds, preconditioned on
// its UID so that a replacement of the same name is never hit: the
// recorded operation "regrace" (Value grace=N uid=U). A shorter grace must
// shorten the termination under way, a longer one must change nothing
// (PS-3, GP-5). Its outcome teaches the planner nothing.
func regracePod(ctx context.Context, p *proc, ns, name string, after time.Duration, grace int64) {
	if after > 0 {
		t := p.clock.NewTimer(after)
		select {
		case <-ctx.Done():
		case <-t.C():
		}
		t.Stop()
	}
	pod, err := getPod(ctx, p, ns, name)
	if err != nil || pod == nil || pod.DeletionTimestamp == nil {
		return
	}
	uid := pod.UID
	_ = p.call(ctx, "regrace", ns+"/"+name, fmt.Sprintf("grace=%d uid=%s", grace, uid), func(ctx context.Context, _ *history.Op) error {
		return p.cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(grace),
			Preconditions: &metav1.Preconditions{UID: &uid}})
	})
}

// getPod reads pod ns/name as a recorded operation "get-pod". A pod that is
// not there is a successful read (Found false) and returns nil, nil.
func getPod(ctx context.Context, p *proc, ns, name string) (*corev1.Pod, error) {
	var pod *corev1.Pod
	err := p.call(ctx, "get-pod", ns+"/"+name, "", func(ctx context.Context, op *history.Op) error {
		got, err := p.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err == nil {
			pod, op.Found, op.Output = got, true, podState(got)
		}
		return err
	})
	return pod, err
}

// createPod creates pod as a recorded operation "create-pod"; value says
// what kind of pod it is.
func createPod(ctx context.Context, p *proc, pod *corev1.Pod, value string) error {
	return p.call(ctx, "create-pod", pod.Namespace+"/"+pod.Name, value, func(ctx context.Context, _ *history.Op) error {
		_, err := p.cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		return err
	})
}

// labelApp is the label that ties a workload's pods to their set (or group).
const labelApp = "app"

// setGrace is the default terminationGracePeriodSeconds of set i's pods:
// 5 s for the first, 2 s more for each next, at most 10.
func setGrace(i int) int64 { return min(5+2*int64(i), 10) }

// runSlot performs a slot action's common verbs (get, list, delete) on pod
// prefix<slot> in ns and teaches the planner; create and extra are the
// workload's, passed in.
func runSlot(ctx context.Context, p *proc, pl *slotPlanner, ns, prefix string, now func() time.Time, a slotAction,
	create func(slot int, variant uint64) error, extra func(variant uint64) error) {
	name := prefix + strconv.Itoa(a.slot)
	var pod *corev1.Pod
	var err error
	switch a.verb {
	case slotCreate:
		err = create(a.slot, a.variant)
	case slotGet:
		pod, err = getPod(ctx, p, ns, name)
	case slotList:
		_, err = listPods(ctx, p, ns, "")
	case slotExtra:
		if extra != nil {
			err = extra(a.variant)
		}
	case slotDelete:
		err = deletePod(ctx, p, ns, name, a.grace)
	}
	pl.observe(a, now(), pod, err)
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
