package workload

import (
	"context"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func init() {
	Add("deployments", func() Workload { return &Deployments{} })
}

// Deployments is the Deployment workload: a few apps/v1 Deployments scaled
// within 0..MaxReplicas and rolled out to new pod templates while processes
// delete their pods with random grace. A Deployment acts through its
// ReplicaSets (PS-7: a replacement may overlap a terminating pod; a rollout
// surges a new pod before an old one goes), so every checker of the
// replicas workload judges it, and the convergence checker judges, once
// every fault healed, that each rollout completed: the newest ReplicaSet
// holds the replicas, the older ones none.
//
// Operations: deployments:create (Value replicas=N), deployments:scale,
// deployments:rollout (Value revision=N), deployments:list-pods (key
// ns/<deployment>) followed by deployments:delete-pod (key ns/<pod>, Value
// grace=N|default), deployments:get, deployments:list, and
// deployments:create-namespace once at the start.
type Deployments struct {
	SetKnobs
	// Rollout is the percentage (0..100) of scale operations that are
	// rollouts instead (default 40).
	Rollout int
	// Script is the container script of every pod (default "prestop=1s").
	Script string

	ran setRun
	_   struct{}
}

// Name implements Workload.
func (w *Deployments) Name() string { return "deployments" }

// Describe implements Workload.
func (w *Deployments) Describe() string {
	return "Deployments scaled 0..3 and rolled out to new templates while their pods are deleted with random grace; each rollout must complete once faults heal (PS-7)"
}

// Needs implements Workload.
func (w *Deployments) Needs() Needs {
	return Needs{Kubelets: true, Scheduler: true, Controllers: true, MinNodes: 2}
}

func (w *Deployments) defaults() {
	w.SetKnobs.defaults(w.Name())
	if w.Rollout == 0 {
		w.Rollout = 40
	}
	if w.Script == "" {
		w.Script = "prestop=1s"
	}
}

// Validate reports the first unusable field, after defaults.
func (w *Deployments) Validate() error {
	if w.Rollout < 0 || w.Rollout > 100 {
		return fmt.Errorf("%w: %s: Rollout is a percentage, 0..100, got %d", ErrInvalidWorkload, w.Name(), w.Rollout)
	}
	return w.SetKnobs.validate(w.Name())
}

// Run implements Workload.
func (w *Deployments) Run(ctx context.Context, env Env) error {
	if err := w.Validate(); err != nil {
		return err
	}
	w.defaults()
	return w.SetKnobs.run(ctx, env, w.Name(), w.family(), &w.ran)
}

// Finish implements Finisher: every Deployment is rolled out once more,
// then one pod of each is deleted, so that the convergence wait sees each
// rollout complete after the last fault healed.
func (w *Deployments) Finish(ctx context.Context, _ Env) error {
	fam := w.family()
	if p := w.ran.first; p != nil {
		for i := 0; i < w.Sets && ctx.Err() == nil; i++ {
			_ = fam.rollout(ctx, p, fam.name(i), p.rng.Uint32())
		}
	}
	return w.SetKnobs.finish(ctx, fam, &w.ran)
}

func (w *Deployments) family() *setFamily {
	return &setFamily{ns: w.Namespace, prefix: "app", deployment: w.deployment, rollouts: w.Rollout}
}

// deployment builds Deployment i with replicas: rolling updates with
// upstream's defaults (25% surge and unavailable). It is pure.
func (w *Deployments) deployment(i int, replicas int32) *appsv1.Deployment {
	name := "app" + strconv.Itoa(i)
	ann := map[string]string{RevisionAnnotation: "0"}
	setScript(ann, "app", w.Script)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.Namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{labelApp: name}},
			Template: setTemplate(i, name, w.TerminationGrace, ann, w.Placement),
		},
	}
}
