package grace

import (
	"context"
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/registry/rest"
	api "k8s.io/kubernetes/pkg/apis/core"
	_ "k8s.io/kubernetes/pkg/apis/core/install" // registers api.Pod in legacyscheme, which Strategy types with
	apiv1 "k8s.io/kubernetes/pkg/apis/core/v1"
	podregistry "k8s.io/kubernetes/pkg/registry/core/pod"

	"github.com/podsafe/podsafe/apiserver"
)

// callAllowance is how long upstream's BeforeDelete, which reads the real
// clock, may take between the case's anchor and its own reading: deadlines
// are compared in whole seconds after subtracting it. Every generated
// instant is half a second from the next whole second, so this never moves
// an answer.
const callAllowance = 250 * time.Millisecond

// upstreamStored returns the pod as upstream v1.37.2 stores it: defaulted
// by pkg/apis/core/v1, converted to the internal type.
func upstreamStored(p *corev1.Pod) (*api.Pod, error) {
	p = p.DeepCopy()
	apiv1.SetObjectDefaults_Pod(p)
	var out api.Pod
	if err := apiv1.Convert_v1_Pod_To_core_Pod(p, &out, nil); err != nil {
		return nil, fmt.Errorf("converting pod %s: %w", p.Name, err)
	}
	return &out, nil
}

// UpstreamFirstGrace is the grace period upstream's pod strategy
// (CheckGracefulDelete) gives the first DELETE of the case's pod, as stored
// (defaulted), with DeleteOptions.gracePeriodSeconds grace: 0 means the
// object goes at once. graceful is CheckGracefulDelete's own answer.
func UpstreamFirstGrace(c Case) (grace int64, graceful bool, err error) {
	p, err := upstreamStored(c.Pod("default", "p"))
	if err != nil {
		return 0, false, err
	}
	opts := &metav1.DeleteOptions{GracePeriodSeconds: copyPtr(c.First)}
	graceful = podregistry.Strategy.CheckGracefulDelete(context.Background(), p, opts)
	if opts.GracePeriodSeconds == nil {
		return 0, graceful, fmt.Errorf("CheckGracefulDelete left no grace period")
	}
	return *opts.GracePeriodSeconds, graceful, nil
}

// Upstream runs the case's DELETEs through upstream's graceful-deletion
// rules: rest.BeforeDelete with the pod Strategy, then the generic
// registry's decision around it (Store.Delete with no finalizers): a
// pending deletion is left alone, a non-graceful one or one whose grace
// ended at 0 removes the object, any other marks it terminating. It
// returns the stored pod after each DELETE.
func Upstream(c Case) ([]Outcome, error) {
	ctx := context.Background()
	// The case's first DELETE is at t0, its second at t0 + Elapsed + 0.5 s;
	// BeforeDelete reads the real clock, so t0 is placed that far before
	// the real time of each call, and the stored deletionTimestamp moves
	// with it.
	t0 := time.Now()
	p, err := upstreamStored(c.PodAt("default", "p", t0))
	if err != nil {
		return nil, err
	}
	var out []Outcome
	o, removed, err := upstreamDelete(ctx, p, c.First, t0)
	if err != nil {
		return nil, err
	}
	out = append(out, o)
	if removed || !c.Second {
		return out, nil
	}
	if c.PhaseBefore != "" {
		p.Status.Phase = api.PodPhase(c.PhaseBefore)
	}
	t1 := time.Now().Add(-(time.Duration(c.Elapsed)*time.Second + time.Second/2))
	if p.DeletionTimestamp != nil {
		moved := metav1.NewTime(p.DeletionTimestamp.Add(t1.Sub(t0)))
		p.DeletionTimestamp = &moved
	}
	o, _, err = upstreamDelete(ctx, p, c.SecondGrace, t1)
	if err != nil {
		return nil, err
	}
	return append(out, o), nil
}

// upstreamDelete applies one DELETE asking for grace to the stored pod p,
// as the generic registry's Store.Delete does, and reports the pod as then
// stored, its deadline counted from t0.
func upstreamDelete(ctx context.Context, p *api.Pod, grace *int64, t0 time.Time) (Outcome, bool, error) {
	opts := &metav1.DeleteOptions{GracePeriodSeconds: copyPtr(grace)}
	updated := p.DeepCopy()
	graceful, pending, err := rest.BeforeDelete(podregistry.Strategy, ctx, updated, opts)
	if err != nil {
		return Outcome{}, false, fmt.Errorf("BeforeDelete: %w", err)
	}
	switch {
	case pending:
		// errAlreadyDeleting: the object stays as it was.
	case !graceful, opts.GracePeriodSeconds != nil && *opts.GracePeriodSeconds == 0:
		return Outcome{Removed: true}, true, nil
	default:
		*p = *updated
	}
	o := Outcome{Grace: copyPtr(p.DeletionGracePeriodSeconds), Pending: pending}
	if p.DeletionTimestamp != nil {
		o.Deadline = ptr(int64(math.Ceil((p.DeletionTimestamp.Sub(t0) - callAllowance).Seconds())))
	}
	return o, false, nil
}

// UpstreamDecide is upstream's decision on one DELETE asking for requested
// (nil: no gracePeriodSeconds) of pod as stored (defaulted as upstream
// stores it), at instant now of the caller's timeline: rest.BeforeDelete
// with the pod Strategy and the generic registry's Store.Delete around it,
// for a pod without finalizers. It answers what apiserver.GracefulDelete
// answers: the outcome, and the pod as upstream answers the DELETE (as
// written for a graceful deletion, as it stands for a pending one, as last
// stored for one at once), its times on the caller's timeline.
//
// BeforeDelete reads the real clock, so pod's times are moved onto it by
// the offset of now from the real time just before the call, and the
// answer's moved back: they may trail the caller's by the time the call
// took (under callAllowance).
func UpstreamDecide(pod *corev1.Pod, requested *int64, now time.Time) (*corev1.Pod, apiserver.DeleteOutcome, error) {
	shift := time.Since(now)
	p := pod.DeepCopy()
	shiftPod(p, shift)
	stored, err := upstreamStored(p)
	if err != nil {
		return nil, 0, err
	}
	opts := &metav1.DeleteOptions{GracePeriodSeconds: copyPtr(requested)}
	answer := stored.DeepCopy()
	graceful, pending, err := rest.BeforeDelete(podregistry.Strategy, context.Background(), answer, opts)
	if err != nil {
		return nil, 0, fmt.Errorf("BeforeDelete: %w", err)
	}
	var outcome apiserver.DeleteOutcome
	switch {
	case pending:
		// Store.Delete answers the object BeforeDelete looked at.
		outcome = apiserver.DeletePending
	case !graceful:
		// Removed as stored: no update comes first.
		outcome, answer = apiserver.DeleteNow, stored
	case opts.GracePeriodSeconds != nil && *opts.GracePeriodSeconds == 0:
		// Updated with deletionGracePeriodSeconds 0, then removed.
		outcome = apiserver.DeleteNow
	default:
		outcome = apiserver.DeleteGraceful
	}
	var out corev1.Pod
	if err := apiv1.Convert_core_Pod_To_v1_Pod(answer, &out, nil); err != nil {
		return nil, 0, fmt.Errorf("converting pod %s: %w", answer.Name, err)
	}
	shiftPod(&out, -shift)
	return &out, outcome, nil
}

// shiftPod moves a pod's deletionTimestamp by d.
func shiftPod(p *corev1.Pod, d time.Duration) {
	if p.DeletionTimestamp != nil {
		ts := metav1.NewTime(p.DeletionTimestamp.Add(d))
		p.DeletionTimestamp = &ts
	}
}
