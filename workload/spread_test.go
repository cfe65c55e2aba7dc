package workload

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
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

// The hard-case knobs reach the constraints, only where they are valid
// (minDomains on DoNotSchedule), and every combination shows up; without
// them the pods are what they were.
func TestSpreadHardCases(t *testing.T) {
	plain := &Spread{}
	plain.defaults()
	w := &Spread{MinDomains: 3, MatchLabelKeys: true, NodePolicies: true, avoid: "node-0"}
	w.defaults()
	seen := map[string]int{}
	for variant := range uint64(200) {
		pod, value := w.barePod(1, variant)
		checkConstraints(t, value, pod.Labels, pod.Spec.TopologySpreadConstraints)
		before, _ := plain.barePod(1, variant)
		for i, c := range pod.Spec.TopologySpreadConstraints {
			b := before.Spec.TopologySpreadConstraints[i]
			if c.TopologyKey != b.TopologyKey || c.MaxSkew != b.MaxSkew || c.WhenUnsatisfiable != b.WhenUnsatisfiable {
				t.Fatalf("variant %d: the knobs changed the plain constraint %+v into %+v", variant, b, c)
			}
			if c.MinDomains != nil {
				if c.WhenUnsatisfiable != corev1.DoNotSchedule || c.TopologyKey != corev1.LabelTopologyZone || *c.MinDomains != 3 {
					t.Errorf("variant %d: minDomains on %+v", variant, c)
				}
				seen["minDomains"]++
			}
			if !cmp.Equal(c.MatchLabelKeys, []string{labelSpreadGroup}) {
				t.Errorf("variant %d: matchLabelKeys %v", variant, c.MatchLabelKeys)
			}
			seen["affinity="+string(*c.NodeAffinityPolicy)+"/taints="+string(*c.NodeTaintsPolicy)]++
		}
		if pod.Labels[labelSpreadGroup] != "g1" {
			t.Errorf("slot 1 in group %q", pod.Labels[labelSpreadGroup])
		}
		if pod.Spec.Affinity != nil {
			seen["avoids node-0"]++
		}
		if len(pod.Spec.Tolerations) > 0 {
			seen["tolerates"]++
		}
	}
	for _, want := range []string{"minDomains", "avoids node-0", "tolerates", "affinity=Honor/taints=Honor", "affinity=Honor/taints=Ignore",
		"affinity=Ignore/taints=Honor", "affinity=Ignore/taints=Ignore"} {
		if seen[want] == 0 {
			t.Errorf("no pod with %s in 200: %v", want, seen)
		}
	}
	sets := map[bool]int{}
	for i := range 4 {
		for _, c := range w.replicaSet(i, 1).Spec.Template.Spec.TopologySpreadConstraints {
			sets[c.MinDomains != nil]++
			if c.NodeAffinityPolicy == nil || c.NodeTaintsPolicy == nil {
				t.Errorf("set %d: constraint without node policies: %+v", i, c)
			}
		}
	}
	if sets[true] == 0 || sets[false] == 0 {
		t.Errorf("sets with and without minDomains: %v", sets)
	}
	if err := (&Spread{MinDomains: -1}).Validate(); err == nil {
		t.Error("MinDomains -1 accepted")
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

// The neighbours carry each group's labels in another namespace, without
// constraints, pinned to the zone given: pods the constraints select but
// must not count (TS-6).
func TestSpreadNeighbors(t *testing.T) {
	w := &Spread{}
	w.defaults()
	pods := w.neighbors("zone-a")
	if want := w.Neighbors * (w.Sets + 1); len(pods) != want {
		t.Fatalf("%d neighbours, want %d (%d for each of %d groups)", len(pods), want, w.Neighbors, w.Sets+1)
	}
	perGroup := map[string]int{}
	names := map[string]bool{}
	for _, p := range pods {
		if p.Namespace == w.Namespace || p.Namespace != w.neighborNamespace() {
			t.Errorf("%s in namespace %q, want %q, not the workload's own", p.Name, p.Namespace, w.neighborNamespace())
		}
		if names[p.Name] {
			t.Errorf("neighbour %s named twice", p.Name)
		}
		names[p.Name] = true
		if len(p.Spec.TopologySpreadConstraints) != 0 {
			t.Errorf("%s has constraints of its own", p.Name)
		}
		if diff := cmp.Diff(map[string]string{corev1.LabelTopologyZone: "zone-a"}, p.Spec.NodeSelector); diff != "" {
			t.Errorf("%s node selector (-want +got):\n%s", p.Name, diff)
		}
		perGroup[p.Labels[labelApp]]++
	}
	// Every constraint of every group selects that group's neighbours.
	groups := map[string][]corev1.TopologySpreadConstraint{}
	for i := range w.Sets {
		rs := w.replicaSet(i, 1)
		groups[rs.Name] = rs.Spec.Template.Spec.TopologySpreadConstraints
	}
	for variant := range uint64(20) {
		pod, _ := w.barePod(0, variant)
		groups[bareApp] = append(groups[bareApp], pod.Spec.TopologySpreadConstraints...)
	}
	for g, cs := range groups {
		if perGroup[g] != w.Neighbors {
			t.Errorf("group %s has %d neighbours, want %d", g, perGroup[g], w.Neighbors)
		}
		for _, c := range cs {
			sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
			if err != nil {
				t.Fatal(err)
			}
			if !sel.Matches(labels.Set{labelApp: g}) {
				t.Errorf("group %s: constraint selector %v does not select its neighbours", g, c.LabelSelector)
			}
		}
	}

	if pods := w.neighbors(""); len(pods) == 0 || pods[0].Spec.NodeSelector != nil {
		t.Errorf("without zones the neighbours must go anywhere, got %d pods", len(pods))
	}
	none := &Spread{Neighbors: -1}
	none.defaults()
	if pods := none.neighbors("zone-a"); len(pods) != 0 {
		t.Errorf("Neighbors -1 built %d neighbours", len(pods))
	}
}

func TestFirstZone(t *testing.T) {
	for _, tc := range []struct {
		zones map[string]string
		want  string
	}{
		{map[string]string{"node-0": "zone-b", "node-1": "zone-a", "node-2": ""}, "zone-a"},
		{map[string]string{"node-0": ""}, ""},
		{nil, ""},
	} {
		if got := firstZone(tc.zones); got != tc.want {
			t.Errorf("firstZone(%v) = %q, want %q", tc.zones, got, tc.want)
		}
	}
}

// Setup creates the sets with InitialReplicas before the processes start,
// and the neighbours in their own namespace.
func TestSpreadSetup(t *testing.T) {
	for _, tc := range []struct {
		name      string
		w         Spread
		replicas  int32 // -1: no set created
		neighbors int
	}{
		{"defaults", Spread{}, 2, 3},
		{"capped by MaxReplicas", Spread{InitialReplicas: 9, MaxReplicas: 3}, 3, 3},
		{"none", Spread{InitialReplicas: -1, Neighbors: -1}, -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := tc.w
			w.defaults()
			cs := fake.NewClientset()
			p := fakeProc(t, cs, 0, 1, clocktesting.NewFakeClock(time.Unix(0, 0)))
			fam := &setFamily{ns: w.Namespace, prefix: "spread", replicaSet: w.replicaSet}
			if err := w.setup(context.Background(), p, fam, "zone-a"); err != nil {
				t.Fatal(err)
			}
			sets, err := cs.AppsV1().ReplicaSets(w.Namespace).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if tc.replicas < 0 {
				if len(sets.Items) != 0 {
					t.Errorf("%d sets created, want none", len(sets.Items))
				}
			} else if len(sets.Items) != w.Sets {
				t.Errorf("%d sets created, want %d", len(sets.Items), w.Sets)
			}
			for _, rs := range sets.Items {
				if *rs.Spec.Replicas != tc.replicas {
					t.Errorf("%s created with %d replicas, want %d", rs.Name, *rs.Spec.Replicas, tc.replicas)
				}
			}
			if got := len(podNames(t, cs, w.neighborNamespace())); got != tc.neighbors*(w.Sets+1) {
				t.Errorf("%d neighbours created, want %d", got, tc.neighbors*(w.Sets+1))
			}
			if got := podNames(t, cs, w.Namespace); len(got) != 0 {
				t.Errorf("setup created pods %v in the workload's namespace", got)
			}
		})
	}
}
