package grace

import (
	"context"
	"fmt"
	"math"
	"net/http/httptest"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/podsafe/podsafe/apiserver"
)

// PodsafeFirstGrace is podsafe's GP-6 grace period for the first DELETE of
// the case's pod: apiserver.EffectiveGracePeriod, on the pod as created (its
// fallback of 30 s stands for the default podsafe's admission writes).
func PodsafeFirstGrace(c Case) int64 {
	return apiserver.EffectiveGracePeriod(c.Pod("default", "p"), c.First)
}

// Step is one DELETE of a case as apiserver.GracefulDelete decides it: the
// pod as stored before, the grace asked for, the instant, and the decision.
type Step struct {
	Before    *corev1.Pod
	Requested *int64
	Now       time.Time
	Answer    *corev1.Pod
	Outcome   apiserver.DeleteOutcome
}

// PodsafeSteps runs the case's DELETEs through apiserver.GracefulDelete
// alone, on a timeline starting at a whole second: the first DELETE at t0
// (the pod seeded as the case says), the second at t0 + Elapsed + 0.5 s on
// the pod as the first left it (its phase then set to PhaseBefore). A
// pending DELETE leaves the stored pod as it was.
func PodsafeSteps(c Case) []Step {
	t0 := podsafeStart
	pod := c.PodAt("default", "p", t0)
	first := decide(pod, c.First, t0)
	steps := []Step{first}
	if first.Outcome == apiserver.DeleteNow || !c.Second {
		return steps
	}
	next := first.Before.DeepCopy()
	if first.Outcome == apiserver.DeleteGraceful {
		next = first.Answer.DeepCopy()
	}
	if c.PhaseBefore != "" {
		next.Status.Phase = c.PhaseBefore
	}
	now := t0.Add(time.Duration(c.Elapsed)*time.Second + time.Second/2)
	return append(steps, decide(next, c.SecondGrace, now))
}

// decide is one Step.
func decide(pod *corev1.Pod, requested *int64, now time.Time) Step {
	answer, outcome := apiserver.GracefulDelete(pod, copyPtr(requested), now)
	return Step{Before: pod, Requested: copyPtr(requested), Now: now, Answer: answer, Outcome: outcome}
}

// DecisionDiff lists how podsafe's decision on a DELETE (answer, outcome)
// differs from upstream's on the same one (UpstreamDecide): outcome,
// deletionGracePeriodSeconds, generation, and deletionTimestamp: a graceful
// deletion's as stored, whole seconds rounded up (podsafe stores deadlines
// so; upstream's may trail by the call, under callAllowance), any other's
// as answered, upstream's no earlier and less than callAllowance later.
// None when they agree.
func DecisionDiff(want *corev1.Pod, wantOutcome apiserver.DeleteOutcome, got *corev1.Pod, gotOutcome apiserver.DeleteOutcome) []string {
	var out []string
	if wantOutcome != gotOutcome {
		out = append(out, fmt.Sprintf("outcome: upstream %s, podsafe %s", wantOutcome, gotOutcome))
	}
	if w, g := ptrString(want.DeletionGracePeriodSeconds), ptrString(got.DeletionGracePeriodSeconds); w != g {
		out = append(out, fmt.Sprintf("deletionGracePeriodSeconds: upstream %s, podsafe %s", w, g))
	}
	if want.Generation != got.Generation {
		out = append(out, fmt.Sprintf("generation: upstream %d, podsafe %d", want.Generation, got.Generation))
	}
	wt, gt := want.DeletionTimestamp, got.DeletionTimestamp
	switch {
	case (wt == nil) != (gt == nil):
		out = append(out, fmt.Sprintf("deletionTimestamp: upstream %s, podsafe %s", tsString(wt), tsString(gt)))
	case wt == nil:
	case wantOutcome == apiserver.DeleteGraceful && gotOutcome == apiserver.DeleteGraceful:
		if w := ceilSecond(wt.Add(-callAllowance)); !w.Equal(gt.Time) {
			out = append(out, fmt.Sprintf("deletionTimestamp as stored: upstream %s (rounded up), podsafe %s", w.Format(time.RFC3339Nano), tsString(gt)))
		}
	default:
		if d := wt.Sub(gt.Time); d < 0 || d >= callAllowance {
			out = append(out, fmt.Sprintf("deletionTimestamp: upstream %s, podsafe %s", tsString(wt), tsString(gt)))
		}
	}
	return out
}

func tsString(t *metav1.Time) string {
	if t == nil {
		return "none"
	}
	return t.Format(time.RFC3339Nano)
}

// ceilSecond rounds t up to a whole second.
func ceilSecond(t time.Time) time.Time {
	if r := t.Truncate(time.Second); !r.Equal(t) {
		return r.Add(time.Second)
	}
	return t
}

// Podsafe runs cases through podsafe's real API server, on a fake clock,
// over the store it is given, as the admin identity (allowed every
// deletion, so authority never decides an outcome). Not safe for
// concurrent use.
type Podsafe struct {
	cs    kubernetes.Interface
	clock *clocktesting.FakeClock
	srv   *apiserver.Server
	http  *httptest.Server
	n     int
}

// podsafeStart is the fake clock's first reading: a whole second, as every
// case's first DELETE is.
var podsafeStart = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

const adminToken = "token-admin"

// NewPodsafe serves podsafe's API server over store on a loopback HTTP
// server; Close stops it.
func NewPodsafe(store apiserver.Store) (*Podsafe, error) {
	clk := clocktesting.NewFakeClock(podsafeStart)
	srv, err := apiserver.New(apiserver.Config{Store: store, Clock: clk,
		Tokens: map[string]string{adminToken: apiserver.IdentityAdmin}})
	if err != nil {
		return nil, fmt.Errorf("starting the API server: %w", err)
	}
	hs := httptest.NewServer(srv)
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: hs.URL, BearerToken: adminToken, QPS: -1, Timeout: 30 * time.Second})
	if err != nil {
		hs.Close()
		_ = srv.Close()
		return nil, fmt.Errorf("client: %w", err)
	}
	return &Podsafe{cs: cs, clock: clk, srv: srv, http: hs}, nil
}

// Close stops the server.
func (p *Podsafe) Close() {
	p.http.Close()
	_ = p.srv.Close()
}

// Run creates the case's pod (a new name each time), reports its phase,
// sends its DELETEs at t0 and t0 + Elapsed + 0.5 s on the fake clock, and
// returns the stored pod after each.
func (p *Podsafe) Run(ctx context.Context, c Case) ([]Outcome, error) {
	p.n++
	name := "p-" + strconv.Itoa(p.n)
	pods := p.cs.CoreV1().Pods("default")
	created, err := pods.Create(ctx, c.Pod("default", name), metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating %s: %w", name, err)
	}
	if c.Phase != "" && created.Status.Phase != c.Phase {
		if err := p.setPhase(ctx, name, c.Phase); err != nil {
			return nil, err
		}
	}
	// Every case starts on a whole second, well after the last one.
	now := p.clock.Now()
	t0 := now.Truncate(time.Second).Add(time.Hour)
	p.clock.SetTime(t0)
	var out []Outcome
	o, err := p.delete(ctx, name, c.First, t0)
	if err != nil {
		return nil, err
	}
	out = append(out, o)
	if o.Removed || !c.Second {
		return out, nil
	}
	if c.PhaseBefore != "" {
		if err := p.setPhase(ctx, name, c.PhaseBefore); err != nil {
			return nil, err
		}
	}
	p.clock.SetTime(t0.Add(time.Duration(c.Elapsed)*time.Second + time.Second/2))
	o, err = p.delete(ctx, name, c.SecondGrace, t0)
	if err != nil {
		return nil, err
	}
	return append(out, o), nil
}

// setPhase writes the pod's status.phase, as its kubelet would.
func (p *Podsafe) setPhase(ctx context.Context, name string, phase corev1.PodPhase) error {
	pods := p.cs.CoreV1().Pods("default")
	cur, err := pods.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading %s: %w", name, err)
	}
	cur.Status.Phase = phase
	if _, err := pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("setting phase %s of %s: %w", phase, name, err)
	}
	return nil
}

// delete sends one DELETE asking for grace and reads the pod back, its
// deadline counted from t0; an unchanged resourceVersion means the DELETE
// was pending.
func (p *Podsafe) delete(ctx context.Context, name string, grace *int64, t0 time.Time) (Outcome, error) {
	pods := p.cs.CoreV1().Pods("default")
	before, err := pods.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return Outcome{}, fmt.Errorf("reading %s: %w", name, err)
	}
	if err := pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: copyPtr(grace)}); err != nil {
		return Outcome{}, fmt.Errorf("deleting %s: %w", name, err)
	}
	cur, err := pods.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return Outcome{Removed: true}, nil
	case err != nil:
		return Outcome{}, fmt.Errorf("reading %s: %w", name, err)
	}
	o := Outcome{Grace: copyPtr(cur.DeletionGracePeriodSeconds), Pending: cur.ResourceVersion == before.ResourceVersion}
	if cur.DeletionTimestamp != nil {
		o.Deadline = ptr(int64(math.Ceil(cur.DeletionTimestamp.Sub(t0).Seconds())))
	}
	return o, nil
}
