package workload

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsafe/podsafe/kubelet"
)

// checkScripts asserts every container of a pod (or template) with
// annotations ann has a script the simulated runtime accepts, and returns
// them by container.
func checkScripts(t *testing.T, ann map[string]string, spec corev1.PodSpec) map[string]kubelet.Script {
	t.Helper()
	out := map[string]kubelet.Script{}
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range list {
			c := &list[i]
			if c.Image == "" {
				t.Errorf("container %s has no image; the API refuses it", c.Name)
			}
			if _, dup := out[c.Name]; dup {
				t.Errorf("container name %s used twice", c.Name)
			}
			s, err := kubelet.ContainerScript(ann, c)
			if err != nil {
				t.Errorf("container %s: %v", c.Name, err)
			}
			out[c.Name] = s
		}
	}
	return out
}

func TestPetsStatefulSet(t *testing.T) {
	w := &Pets{}
	w.defaults()
	for i := range 4 {
		set := w.statefulSet(i, 2)
		name := w.family().name(i)
		if set.Name != name || set.Namespace != "podsafe-pets" || *set.Spec.Replicas != 2 {
			t.Errorf("set %d: %s/%s replicas %d", i, set.Namespace, set.Name, *set.Spec.Replicas)
		}
		if diff := cmp.Diff(set.Spec.Selector.MatchLabels, set.Spec.Template.Labels); diff != "" {
			t.Errorf("set %d: selector does not match the template (-selector +labels):\n%s", i, diff)
		}
		if len(set.Spec.VolumeClaimTemplates) != 1 || set.Spec.VolumeClaimTemplates[0].Name != "data" {
			t.Errorf("set %d: claim templates %+v, want one named data", i, set.Spec.VolumeClaimTemplates)
		}
		if g := *set.Spec.Template.Spec.TerminationGracePeriodSeconds; g < 5 || g > 10 {
			t.Errorf("set %d: pets' grace %d s, want 5..10", i, g)
		}
		scripts := checkScripts(t, set.Spec.Template.Annotations, set.Spec.Template.Spec)
		if scripts["app"].WriteEvery == 0 {
			t.Errorf("set %d: the pets do not write their volume: %+v", i, scripts["app"])
		}
	}
	w.TerminationGrace = 7
	if g := *w.statefulSet(0, 1).Spec.Template.Spec.TerminationGracePeriodSeconds; g != 7 {
		t.Errorf("TerminationGrace 7 gave pets grace %d", g)
	}
}

func TestPetsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		w    Pets
		ok   bool
	}{
		{"defaults", Pets{}, true},
		{"negative replicas", Pets{SetKnobs: SetKnobs{MaxReplicas: -1}}, false},
		{"negative weight", Pets{SetKnobs: SetKnobs{Weights: [5]int{1, -1, 0, 0, 0}}}, false},
	} {
		err := tc.w.Validate()
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalidWorkload)) {
			t.Errorf("%s: Validate = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

func TestPodWorkloadsRegistered(t *testing.T) {
	want := map[string]Needs{
		"pets":      {Kubelets: true, Scheduler: true, Controllers: true, MinNodes: 2},
		"replicas":  {Kubelets: true, Scheduler: true, Controllers: true, MinNodes: 2},
		"priority":  {Kubelets: true, Scheduler: true, Controllers: true},
		"spread":    {Kubelets: true, Scheduler: true, Controllers: true, MinNodes: 2, Zones: 2},
		"lifecycle": {Kubelets: true, Scheduler: true},
	}
	for name, needs := range want {
		w, err := Lookup(name)
		if err != nil {
			t.Errorf("Lookup(%q): %v", name, err)
			continue
		}
		if w.Name() != name || w.Describe() == "" {
			t.Errorf("%s: Name %q, Describe %q", name, w.Name(), w.Describe())
		}
		if diff := cmp.Diff(needs, w.Needs()); diff != "" {
			t.Errorf("%s: Needs (-want +got):\n%s", name, diff)
		}
	}
}
