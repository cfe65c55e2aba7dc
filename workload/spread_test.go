package workload

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// checkConstraints asserts TS-1 validity of a pod's constraints and that
// each selects the pod's own group.
func checkConstraints(t *testing.T, what string, podLabels map[string]string, cs []corev1.TopologySpreadConstraint) {
	t.Helper()
	if len(cs) == 0 {
		t.Errorf("%s: no constraints", what)
	}
	keys := map[string]bool{}
	for _, c := range cs {
		if c.MaxSkew < 1 || c.MaxSkew > 2 {
			t.Errorf("%s: maxSkew %d outside 1..2", what, c.MaxSkew)
		}
		if c.TopologyKey != corev1.LabelTopologyZone && c.TopologyKey != corev1.LabelHostname {
			t.Errorf("%s: topology key %q", what, c.TopologyKey)
		}
		if keys[c.TopologyKey] {
			t.Errorf("%s: key %s constrained twice", what, c.TopologyKey)
		}
		keys[c.TopologyKey] = true
		if c.WhenUnsatisfiable != corev1.DoNotSchedule && c.WhenUnsatisfiable != corev1.ScheduleAnyway {
			t.Errorf("%s: whenUnsatisfiable %q", what, c.WhenUnsatisfiable)
		}
		sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
		if err != nil || !sel.Matches(labels.Set(podLabels)) {
			t.Errorf("%s: constraint selector %v does not select the pod's own labels %v", what, c.LabelSelector, podLabels)
		}
	}
}

func TestSpreadReplicaSets(t *testing.T) {
	w := &Spread{}
	w.defaults()
	whens := map[corev1.UnsatisfiableConstraintAction]bool{}
	keys := map[string]bool{}
	for i := range len(spreadSets) {
		set := w.replicaSet(i, 2)
		tmpl := set.Spec.Template
		checkConstraints(t, set.Name, tmpl.Labels, tmpl.Spec.TopologySpreadConstraints)
		if diff := cmp.Diff(set.Spec.Selector.MatchLabels, tmpl.Labels); diff != "" {
			t.Errorf("%s: selector does not match the template (-selector +labels):\n%s", set.Name, diff)
		}
		checkScripts(t, tmpl.Annotations, tmpl.Spec)
		for _, c := range tmpl.Spec.TopologySpreadConstraints {
			whens[c.WhenUnsatisfiable] = true
			keys[c.TopologyKey] = true
		}
	}
	if len(whens) != 2 || len(keys) != 2 {
		t.Errorf("the sets use whenUnsatisfiable %v and keys %v; want both of each", whens, keys)
	}
}

func TestSpreadBarePods(t *testing.T) {
	w := &Spread{}
	w.defaults()
	seen := map[string]bool{}
	for variant := range uint64(200) {
		pod, value := w.barePod(3, variant)
		if pod.Name != "bare-3" {
			t.Fatalf("slot 3 pod named %s", pod.Name)
		}
		checkConstraints(t, value, pod.Labels, pod.Spec.TopologySpreadConstraints)
		seen[value] = true
		again, _ := w.barePod(3, variant)
		if diff := cmp.Diff(pod, again); diff != "" {
			t.Fatalf("the same variant built different pods (-first +second):\n%s", diff)
		}
	}
	// 2 keys × 2 actions × 2 skews for one constraint, more for two.
	if len(seen) < 20 {
		t.Errorf("only %d distinct constraint sets in 200 pods: %v", len(seen), seen)
	}
}

func spreadSequence(seed uint64, n int) []string {
	w := &Spread{}
	w.defaults()
	sp := w.planner(rand.New(rand.NewPCG(seed, 1)), 0, 3)
	now := time.Unix(0, 0)
	var out []string
	for range n {
		a := sp.next(now)
		out = append(out, a.String())
		if a.onSet {
			sp.sets.observe(a.set, -1, nil)
		} else {
			sp.pods.observe(a.slot, now, nil, nil)
		}
		now = now.Add(10 * time.Second)
	}
	return out
}

func TestSpreadPlanner(t *testing.T) {
	a := spreadSequence(5, 300)
	if diff := cmp.Diff(a, spreadSequence(5, 300)); diff != "" {
		t.Errorf("same seed, different operations (-first +second):\n%s", diff)
	}
	if cmp.Equal(a, spreadSequence(6, 300)) {
		t.Error("seeds 5 and 6 chose the same 300 operations")
	}
	onSets := 0
	for _, s := range a {
		if s[:4] == "set " {
			onSets++
		}
	}
	if onSets < 150 || onSets > 210 {
		t.Errorf("%d of 300 operations on the sets, want about 60%%", onSets)
	}
}
