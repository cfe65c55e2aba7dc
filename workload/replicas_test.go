package workload

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReplicasReplicaSet(t *testing.T) {
	w := &Replicas{}
	w.defaults()
	scripted := map[string]bool{}
	for i := range 3 {
		set := w.replicaSet(i, 3)
		if set.Name != "web"+strconv.Itoa(i) || *set.Spec.Replicas != 3 {
			t.Errorf("set %d: %s replicas %d", i, set.Name, *set.Spec.Replicas)
		}
		if diff := cmp.Diff(set.Spec.Selector.MatchLabels, set.Spec.Template.Labels); diff != "" {
			t.Errorf("set %d: selector does not match the template (-selector +labels):\n%s", i, diff)
		}
		s := checkScripts(t, set.Spec.Template.Annotations, set.Spec.Template.Spec)["app"]
		scripted[set.Spec.Template.Annotations["podsafe.io/script.app"]] = true
		if !s.Forever {
			t.Errorf("set %d: replicas should run until stopped: %+v", i, s)
		}
	}
	if len(scripted) != 3 {
		t.Errorf("the 3 sets share scripts: %v", scripted)
	}
}

func TestGraceReplicas(t *testing.T) {
	w, err := Lookup(GraceReplicasName)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := w.(*Replicas)
	if !ok || r.Name() != GraceReplicasName || r.Describe() == (&Replicas{}).Describe() {
		t.Fatalf("%T %q %q", w, w.Name(), w.Describe())
	}
	if diff := cmp.Diff((&Replicas{}).Needs(), w.Needs()); diff != "" {
		t.Errorf("Needs (-want +got):\n%s", diff)
	}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	r.defaults()
	if r.Namespace != "podsafe-"+GraceReplicasName || r.MaxDeleteGrace != variantMaxDelete || r.Regrace <= 0 {
		t.Errorf("knobs %+v", r.SetKnobs)
	}
	for i := range 3 {
		set := r.replicaSet(i, 1)
		s := checkScripts(t, set.Spec.Template.Annotations, set.Spec.Template.Spec)["app"]
		if !s.IgnoreTerm || !s.Forever {
			t.Errorf("set %d: containers must run until KILL: %+v", i, s)
		}
		// Deletions ask for up to 300 s: most are longer than the spec's.
		if g := *set.Spec.Template.Spec.TerminationGracePeriodSeconds; g >= variantMaxDelete/10 {
			t.Errorf("set %d: spec grace %d s", i, g)
		}
	}
	bad := &Replicas{SetKnobs: SetKnobs{Regrace: 101}}
	if err := bad.Validate(); err == nil {
		t.Error("Regrace 101 accepted")
	}
	for _, fd := range []string{"", "random", "none", "Background", "Foreground", "Orphan"} {
		if err := (&Replicas{SetKnobs: SetKnobs{FinalDelete: fd}}).Validate(); err != nil {
			t.Errorf("FinalDelete %q: %v", fd, err)
		}
	}
	if err := (&Replicas{SetKnobs: SetKnobs{FinalDelete: "background"}}).Validate(); err == nil || !strings.Contains(err.Error(), `FinalDelete is Background, Foreground, Orphan, random or none, got "background"`) {
		t.Errorf("FinalDelete background: %v", err)
	}
	if (&Replicas{}).Name() != "replicas" {
		t.Error("the plain workload lost its name")
	}
}

// variantMaxDelete is the maxDeleteGrace of variants/replicas-grace.yaml.
const variantMaxDelete = 300
