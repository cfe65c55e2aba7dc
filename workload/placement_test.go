package workload

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestPlacement: every pod and pod template a workload builds goes through
// its placement, so on an existing cluster all of podsafe's pods land on
// podsafe's own nodes; without one nothing changes.
func TestPlacement(t *testing.T) {
	mark := func(spec *corev1.PodSpec) {
		if spec.NodeSelector == nil {
			spec.NodeSelector = map[string]string{}
		}
		spec.NodeSelector["placed"] = "yes"
	}
	pets, replicas := &Pets{}, &Replicas{}
	lifecycle, priority, spread := &Lifecycle{}, &Priority{}, &Spread{}
	pets.defaults()
	replicas.defaults()
	lifecycle.defaults()
	priority.defaults(3)
	spread.defaults()
	for _, p := range []Placer{pets, replicas, lifecycle, priority, spread} {
		p.SetPlacement(mark)
	}
	lc, _ := lifecycle.pod(lifecycleVariants, 0, 1)
	prio, _ := priority.pod(0, 1)
	bare, _ := spread.barePod(0, 1)
	specs := map[string]*corev1.PodSpec{
		"pets":      &pets.statefulSet(0, 1).Spec.Template.Spec,
		"replicas":  &replicas.replicaSet(0, 1).Spec.Template.Spec,
		"lifecycle": &lc.Spec,
		"priority":  &prio.Spec,
		"spread":    &spread.replicaSet(0, 1).Spec.Template.Spec,
		"bare":      &bare.Spec,
	}
	for _, n := range spread.neighbors("zone-a") {
		specs["neighbor "+n.Name] = &n.Spec
	}
	for name, spec := range specs {
		if spec.NodeSelector["placed"] != "yes" {
			t.Errorf("%s: not placed: %v", name, spec.NodeSelector)
		}
	}
	if s := (&Pets{}).statefulSet(0, 1).Spec.Template.Spec; s.NodeSelector != nil {
		t.Errorf("placed without a placement: %v", s.NodeSelector)
	}
}
