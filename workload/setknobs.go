package workload

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// SetKnobs are the knobs the set workloads (pets, replicas, deployments) share: how many
// sets, how far they scale, how their pods are deleted, and the pace.
type SetKnobs struct {
	// Namespace holds the sets (default "podsafe-<workload>").
	Namespace string
	// Placement, when set, adjusts every pod template to the cluster (see
	// Placer).
	Placement func(*corev1.PodSpec)
	// Sets is how many sets there are (default 3).
	Sets int
	// MaxReplicas bounds every scale (default 3).
	MaxReplicas int
	// TerminationGrace is spec.terminationGracePeriodSeconds of every pod,
	// in scaled seconds (default 5 for the first set, 2 more for each next,
	// at most 10).
	TerminationGrace int64
	// MaxDeleteGrace is the longest grace a deletion asks for, in scaled
	// seconds (default 30).
	MaxDeleteGrace int64
	// Force lets deletions ask for grace 0 (force deletion), which the API
	// refuses to the workload identity for running pods (PS-9); off by
	// default.
	Force bool
	// Interval is the mean scaled time between two operations of the whole
	// workload (default 10 s).
	Interval time.Duration
	// OpTimeout bounds each operation in wall time; one that runs out is
	// recorded unknown (default 2 s).
	OpTimeout time.Duration
	// Regrace is the percentage (0..100) of pod deletions that the process
	// follows, while the pod terminates, with a second deletion asking for
	// another grace, shorter or longer (operation "regrace"; PS-3, GP-5).
	// Default 0: none.
	Regrace int
	// Weights of create, scale, delete-pod, get and list once the process
	// knows a set exists (default 0, 3, 3, 2, 1). A set the process has not
	// looked at is read first and created if missing; creating one known to
	// exist can only fail.
	Weights [5]int
	// FinalDelete is how the final phase deletes the workload's last set,
	// when it has two or more, so that the garbage collector deals with
	// its dependents after the heal (PS-9): the propagation policy
	// "Background", "Foreground" or "Orphan"; "random" (default): one of
	// the three, drawn from the seed; "none": the set is left, and loses a
	// pod like the others.
	FinalDelete string
}

// setRun is what a set workload's run leaves for its final phase (finish):
// the workload's first process, once it ran.
type setRun struct {
	first *proc
}

func (k *SetKnobs) defaults(workload string) {
	if k.Namespace == "" {
		k.Namespace = "podsafe-" + workload
	}
	if k.Sets == 0 {
		k.Sets = 3
	}
	if k.MaxReplicas == 0 {
		k.MaxReplicas = 3
	}
	if k.MaxDeleteGrace == 0 {
		k.MaxDeleteGrace = defaultMaxDeleteGrace
	}
	if k.Interval == 0 {
		k.Interval = defaultInterval
	}
	if k.OpTimeout == 0 {
		k.OpTimeout = defaultOpTimeout
	}
	if k.Weights == [5]int{} {
		k.Weights = [5]int{0, 3, 3, 2, 1}
	}
	if k.FinalDelete == "" {
		k.FinalDelete = FinalDeleteRandom
	}
}

// FinalDelete values besides the propagation policies.
const (
	FinalDeleteRandom = "random"
	FinalDeleteNone   = "none"
)

// finalPolicies are the propagation policies FinalDeleteRandom draws from.
var finalPolicies = []metav1.DeletionPropagation{metav1.DeletePropagationBackground, metav1.DeletePropagationForeground, metav1.DeletePropagationOrphan}

// validate reports the first unusable knob, after defaults.
func (k SetKnobs) validate(workload string) error {
	k.defaults(workload)
	switch {
	case k.Sets < 0, k.MaxReplicas < 0, k.TerminationGrace < 0, k.MaxDeleteGrace < 0, k.Interval < 0, k.OpTimeout < 0:
		return fmt.Errorf("%w: %s: Sets, MaxReplicas, TerminationGrace, MaxDeleteGrace, Interval and OpTimeout must not be negative", ErrInvalidWorkload, workload)
	case k.Regrace < 0 || k.Regrace > 100:
		return fmt.Errorf("%w: %s: Regrace is a percentage, 0..100, got %d", ErrInvalidWorkload, workload, k.Regrace)
	case k.FinalDelete != FinalDeleteRandom && k.FinalDelete != FinalDeleteNone && !slices.Contains(finalPolicies, metav1.DeletionPropagation(k.FinalDelete)):
		return fmt.Errorf("%w: %s: FinalDelete is Background, Foreground, Orphan, random or none, got %q", ErrInvalidWorkload, workload, k.FinalDelete)
	}
	return validWeights(workload, k.Weights[:])
}

// run drives the processes of a set workload over fam until ctx ends.
func (k *SetKnobs) run(ctx context.Context, env Env, workload string, fam *setFamily, r *setRun) error {
	return runProcs(ctx, env, workload, k.OpTimeout,
		func(ctx context.Context, p *proc) error { return p.ensureNamespace(ctx, k.Namespace) },
		func(runCtx context.Context, p *proc) {
			ctx := context.WithoutCancel(runCtx)
			pl := newSetPlanner(p.rng, k.Sets, k.MaxReplicas, k.MaxDeleteGrace, k.Force, k.Weights)
			pl.regrace, pl.rollout = k.Regrace, fam.rollouts
			if p.worker == 0 {
				r.first = p // read once run returned, after every process ended
			}
			for p.think(runCtx, k.Interval) {
				fam.run(ctx, p, pl, pl.next())
			}
		})
}

// FinalGrace is the grace, in scaled seconds, of the final phase's
// deletions: short, so that a run at time scale 1 sees the replacements
// within its wait.
const FinalGrace = 1

// finish is a set workload's final phase (Finisher): as the workload's
// first process, it lists the pods of every set and deletes the first by
// name that is not terminating, with FinalGrace; the last set, when there
// are two or more, it deletes whole as FinalDelete says. The run then
// waits for the cluster to converge, so every set that had a pod is seen
// to replace one after the last fault healed (PS-7, PS-12), every node
// that ran one to finish its deletion (PS-4, LC-11), and the garbage
// collector to collect, or orphan, the deleted set's pods (PS-9). A set
// with no pod is left alone; a failed call is recorded and the next set
// taken.
func (k *SetKnobs) finish(ctx context.Context, fam *setFamily, r *setRun) error {
	p := r.first
	if p == nil {
		return nil // the run ended before its first process began
	}
	last := -1
	policy := metav1.DeletionPropagation(k.FinalDelete)
	if k.Sets >= 2 && k.FinalDelete != FinalDeleteNone {
		last = k.Sets - 1
		if k.FinalDelete == FinalDeleteRandom {
			policy = finalPolicies[p.rng.IntN(len(finalPolicies))]
		}
	}
	for i := 0; i < k.Sets && ctx.Err() == nil; i++ {
		if i == last {
			_ = fam.deleteSet(ctx, p, fam.name(i), policy)
			continue
		}
		_, _ = fam.deleteReplica(ctx, p, fam.name(i), setAction{grace: ptr.To[int64](FinalGrace)})
	}
	return nil
}
