package workload

import (
	"context"
	"fmt"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func init() {
	Add("pets", func() Workload { return &Pets{} })
}

// Pets is the StatefulSet workload (PS-11, PS-12, PS-15): a few apps/v1
// StatefulSets, each pet with its own RWO volume (one "data" claim
// template) that its container writes every second, while processes create
// the sets, scale them within 0..MaxReplicas, delete pets with random grace
// periods and read the sets and their pods. The pet controller must never
// run two instances of a pet, and the ledger's volume writes must never
// interleave. Sets are never deleted: nothing garbage-collects the pods of a
// deleted owner, so a recreated set would find its pets' names taken.
//
// Operations: pets:create (Value replicas=N), pets:scale (replicas=N),
// pets:delete-pod (key ns/<set>-<ordinal>, Value grace=N|default), pets:get,
// pets:list, and pets:create-namespace once at the start.
type Pets struct {
	// Namespace holds the sets (default "podsafe-pets").
	Namespace string
	// Sets is how many StatefulSets there are (default 3).
	Sets int
	// MaxReplicas bounds every scale (default 3).
	MaxReplicas int
	// TerminationGrace is spec.terminationGracePeriodSeconds of every pet,
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
	// Script is the pets' container script (default "write=1s").
	Script string
	// Interval is the mean scaled time between two operations of the whole
	// workload (default 10 s).
	Interval time.Duration
	// OpTimeout bounds each operation in wall time; one that runs out is
	// recorded unknown (default 2 s).
	OpTimeout time.Duration
	// Weights of create, scale, delete-pod, get and list once the process
	// knows a set exists (default 0, 3, 3, 2, 1). A set the process has not
	// looked at is read first and created if missing; creating one known to
	// exist can only fail.
	Weights [5]int

	_ struct{}
}

// Name implements Workload.
func (w *Pets) Name() string { return "pets" }

// Describe implements Workload.
func (w *Pets) Describe() string {
	return "StatefulSets with a RWO volume per pet: create, scale 0..3, delete pets with random grace, get/list; pets write their volumes"
}

// Needs implements Workload.
func (w *Pets) Needs() Needs {
	return Needs{Kubelets: true, Scheduler: true, Controllers: true, MinNodes: 2}
}

func (w *Pets) defaults() {
	if w.Namespace == "" {
		w.Namespace = "podsafe-pets"
	}
	if w.Sets == 0 {
		w.Sets = 3
	}
	if w.MaxReplicas == 0 {
		w.MaxReplicas = 3
	}
	if w.MaxDeleteGrace == 0 {
		w.MaxDeleteGrace = defaultMaxDeleteGrace
	}
	if w.Script == "" {
		w.Script = "write=1s"
	}
	if w.Interval == 0 {
		w.Interval = defaultInterval
	}
	if w.OpTimeout == 0 {
		w.OpTimeout = defaultOpTimeout
	}
	if w.Weights == [5]int{} {
		w.Weights = [5]int{0, 3, 3, 2, 1}
	}
}

// Validate reports the first unusable field, after defaults.
func (w *Pets) Validate() error {
	c := *w
	c.defaults()
	switch {
	case c.Sets < 0, c.MaxReplicas < 0, c.TerminationGrace < 0, c.MaxDeleteGrace < 0, c.Interval < 0, c.OpTimeout < 0:
		return fmt.Errorf("%w: pets: Sets, MaxReplicas, TerminationGrace, MaxDeleteGrace, Interval and OpTimeout must not be negative", ErrInvalidWorkload)
	}
	return validWeights("pets", c.Weights[:])
}

// Run implements Workload.
func (w *Pets) Run(ctx context.Context, env Env) error {
	if err := w.Validate(); err != nil {
		return err
	}
	w.defaults()
	fam := w.family()
	return runProcs(ctx, env, w.Name(), w.OpTimeout,
		func(ctx context.Context, p *proc) error { return p.ensureNamespace(ctx, w.Namespace) },
		func(runCtx context.Context, p *proc) {
			ctx := context.WithoutCancel(runCtx)
			pl := newSetPlanner(p.rng, w.Sets, w.MaxReplicas, w.MaxDeleteGrace, w.Force, w.Weights)
			for p.think(runCtx, w.Interval) {
				fam.run(ctx, p, pl, pl.next())
			}
		})
}

func (w *Pets) family() *setFamily {
	return &setFamily{ns: w.Namespace, prefix: "db", pets: true, statefulSet: w.statefulSet}
}

// statefulSet builds set i with replicas. It is pure.
func (w *Pets) statefulSet(i int, replicas int32) *appsv1.StatefulSet {
	name := "db" + strconv.Itoa(i)
	grace := w.TerminationGrace
	if grace == 0 {
		grace = setGrace(i)
	}
	ann := map[string]string{}
	setScript(ann, "app", w.Script)
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.Namespace},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(replicas),
			ServiceName: name,
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{labelApp: name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{labelApp: name}, Annotations: ann},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To(grace),
					Containers:                    []corev1.Container{simContainer("app")},
				},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}},
		},
	}
}
