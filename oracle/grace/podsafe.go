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
// deadline counted from t0.
func (p *Podsafe) delete(ctx context.Context, name string, grace *int64, t0 time.Time) (Outcome, error) {
	pods := p.cs.CoreV1().Pods("default")
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
	o := Outcome{Grace: copyPtr(cur.DeletionGracePeriodSeconds)}
	if cur.DeletionTimestamp != nil {
		o.Deadline = ptr(int64(math.Ceil(cur.DeletionTimestamp.Sub(t0).Seconds())))
	}
	return o, nil
}
