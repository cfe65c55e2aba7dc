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
	Add("replicas", func() Workload { return &Replicas{} })
}

// Replicas is the ReplicaSet workload (PS-7, PS-9): a few apps/v1
// ReplicaSets scaled within 0..MaxReplicas while processes delete their pods
// with random grace periods. Replacements may overlap a terminating pod
// (PS-7 allows it); the controller must only ever delete gracefully. Sets are
// never deleted (nothing garbage-collects an owner's pods).
//
// Operations: replicas:create (Value replicas=N), replicas:scale,
// replicas:list-pods (key ns/<set>) followed by replicas:delete-pod (key
// ns/<pod>, Value grace=N|default), replicas:get, replicas:list, and
// replicas:create-namespace once at the start.
type Replicas struct {
	// Namespace holds the sets (default "podsafe-replicas").
	Namespace string
	// Sets is how many ReplicaSets there are (default 3).
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
	// Force lets deletions ask for grace 0 (refused to the workload for
	// running pods, PS-9); off by default.
	Force bool
	// Scripts are the container scripts, set i taking Scripts[i mod len]
	// (default: unscripted, "prestop=2s", "stop-after-term=3s").
	Scripts []string
	// Interval is the mean scaled time between two operations of the whole
	// workload (default 10 s).
	Interval time.Duration
	// OpTimeout bounds each operation in wall time (default 2 s).
	OpTimeout time.Duration
	// Weights of create, scale, delete-pod, get and list once the process
	// knows a set exists (default 0, 3, 3, 2, 1). A set the process has not
	// looked at is read first and created if missing; creating one known to
	// exist can only fail.
	Weights [5]int

	_ struct{}
}

// Name implements Workload.
func (w *Replicas) Name() string { return "replicas" }

// Describe implements Workload.
func (w *Replicas) Describe() string {
	return "ReplicaSets scaled 0..3 while their pods are deleted with random grace; replacements may overlap (PS-7)"
}

// Needs implements Workload.
func (w *Replicas) Needs() Needs {
	return Needs{Kubelets: true, Scheduler: true, Controllers: true, MinNodes: 2}
}

func (w *Replicas) defaults() {
	if w.Namespace == "" {
		w.Namespace = "podsafe-replicas"
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
	if len(w.Scripts) == 0 {
		w.Scripts = []string{"", "prestop=2s", "stop-after-term=3s"}
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
func (w *Replicas) Validate() error {
	c := *w
	c.defaults()
	switch {
	case c.Sets < 0, c.MaxReplicas < 0, c.TerminationGrace < 0, c.MaxDeleteGrace < 0, c.Interval < 0, c.OpTimeout < 0:
		return fmt.Errorf("%w: replicas: Sets, MaxReplicas, TerminationGrace, MaxDeleteGrace, Interval and OpTimeout must not be negative", ErrInvalidWorkload)
	}
	return validWeights("replicas", c.Weights[:])
}

// Run implements Workload.
func (w *Replicas) Run(ctx context.Context, env Env) error {
	if err := w.Validate(); err != nil {
		return err
	}
	w.defaults()
	fam := &setFamily{ns: w.Namespace, prefix: "web", replicaSet: w.replicaSet}
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

// replicaSet builds set i with replicas. It is pure.
func (w *Replicas) replicaSet(i int, replicas int32) *appsv1.ReplicaSet {
	name := "web" + strconv.Itoa(i)
	grace := w.TerminationGrace
	if grace == 0 {
		grace = setGrace(i)
	}
	ann := map[string]string{}
	setScript(ann, "app", w.Scripts[i%len(w.Scripts)])
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.Namespace},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{labelApp: name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{labelApp: name}, Annotations: ann},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To(grace),
					Containers:                    []corev1.Container{simContainer("app")},
				},
			},
		},
	}
}
