package workload

import (
	"strconv"
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
