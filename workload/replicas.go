package workload

import (
	"context"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func init() {
	Add("replicas", func() Workload { return &Replicas{} })
}

// GraceReplicasName is the Replicas workload tuned for the grace-period
// guarantees: a variant (variants/replicas-grace.yaml).
const GraceReplicasName = "replicas-grace"

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
	SetKnobs
	// Scripts are the container scripts, set i taking Scripts[i mod len]
	// (default: unscripted, "prestop=2s", "stop-after-term=3s").
	Scripts []string

	// name and describe are a variant's (see variant), when it runs as one.
	name, describe string
	ran            setRun

	_ struct{}
}

// Name implements Workload.
func (w *Replicas) Name() string {
	if w.name != "" {
		return w.name
	}
	return "replicas"
}

// Describe implements Workload.
func (w *Replicas) Describe() string {
	if w.describe != "" {
		return w.describe
	}
	return "ReplicaSets scaled 0..3 while their pods are deleted with random grace; replacements may overlap (PS-7)"
}

func (w *Replicas) rename(name, describe string) { w.name, w.describe = name, describe }

// Needs implements Workload.
func (w *Replicas) Needs() Needs {
	return Needs{Kubelets: true, Scheduler: true, Controllers: true, MinNodes: 2}
}

func (w *Replicas) defaults() {
	w.SetKnobs.defaults(w.Name())
	if len(w.Scripts) == 0 {
		w.Scripts = []string{"", "prestop=2s", "stop-after-term=3s"}
	}
}

// Validate reports the first unusable field, after defaults.
func (w *Replicas) Validate() error { return w.SetKnobs.validate(w.Name()) }

// Run implements Workload.
func (w *Replicas) Run(ctx context.Context, env Env) error {
	if err := w.Validate(); err != nil {
		return err
	}
	w.defaults()
	return w.SetKnobs.run(ctx, env, w.Name(), w.family(), &w.ran)
}

// Finish implements Finisher: one pod of every ReplicaSet is deleted.
func (w *Replicas) Finish(ctx context.Context, _ Env) error {
	return w.SetKnobs.finish(ctx, w.family(), &w.ran)
}

func (w *Replicas) family() *setFamily {
	return &setFamily{ns: w.Namespace, prefix: "web", replicaSet: w.replicaSet}
}

// replicaSet builds set i with replicas. It is pure.
func (w *Replicas) replicaSet(i int, replicas int32) *appsv1.ReplicaSet {
	name := "web" + strconv.Itoa(i)
	ann := map[string]string{}
	setScript(ann, "app", w.Scripts[i%len(w.Scripts)])
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.Namespace},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{labelApp: name}},
			Template: setTemplate(i, name, w.TerminationGrace, ann, w.Placement),
		},
	}
}
