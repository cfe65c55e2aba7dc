package workload

import (
	"context"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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
	SetKnobs
	// Script is the pets' container script (default "write=1s", or
	// nothing with NoVolumes).
	Script string
	// NoVolumes leaves out the claim template: the pets have no RWO
	// volume and write nothing (a cluster whose volumes podsafe's kubelets
	// cannot attach, such as an existing cluster, runs them so; the storage
	// checker then has nothing to judge).
	NoVolumes bool
	// StorageClass is the claim template's storage class ("": none named,
	// as on the embedded cluster, whose volumes need no provisioning).
	StorageClass string

	ran setRun
	_   struct{}
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
	w.SetKnobs.defaults(w.Name())
	if w.Script == "" && !w.NoVolumes {
		w.Script = "write=1s"
	}
}

// Validate reports the first unusable field, after defaults.
func (w *Pets) Validate() error { return w.SetKnobs.validate(w.Name()) }

// Run implements Workload.
func (w *Pets) Run(ctx context.Context, env Env) error {
	if err := w.Validate(); err != nil {
		return err
	}
	w.defaults()
	return w.SetKnobs.run(ctx, env, w.Name(), w.family(), &w.ran)
}

// Finish implements Finisher: one pet of every StatefulSet is deleted.
func (w *Pets) Finish(ctx context.Context, _ Env) error {
	return w.SetKnobs.finish(ctx, w.family(), &w.ran)
}

func (w *Pets) family() *setFamily {
	return &setFamily{ns: w.Namespace, prefix: "db", pets: true, statefulSet: w.statefulSet}
}

// statefulSet builds set i with replicas. It is pure.
func (w *Pets) statefulSet(i int, replicas int32) *appsv1.StatefulSet {
	name := "db" + strconv.Itoa(i)
	ann := map[string]string{}
	setScript(ann, "app", w.Script)
	var claims []corev1.PersistentVolumeClaim
	if !w.NoVolumes {
		claim := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data"},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			}}
		if w.StorageClass != "" {
			claim.Spec.StorageClassName = ptr.To(w.StorageClass)
		}
		claims = []corev1.PersistentVolumeClaim{claim}
	}
	set := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.Namespace},
		Spec: appsv1.StatefulSetSpec{
			Replicas:             ptr.To(replicas),
			ServiceName:          name,
			Selector:             &metav1.LabelSelector{MatchLabels: map[string]string{labelApp: name}},
			Template:             setTemplate(i, name, w.TerminationGrace, ann, w.Placement),
			VolumeClaimTemplates: claims,
		},
	}
	return set
}
