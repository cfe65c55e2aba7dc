package specs

import (
	"errors"
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestReproScenarios: every scenario in repro/ loads strictly and is valid:
// its steps, its kubelet pins and its pod list mode.
func TestReproScenarios(t *testing.T) {
	files, err := os.ReadDir("../repro")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		if !strings.HasSuffix(f.Name(), ".yaml") {
			continue
		}
		n++
		b, err := os.ReadFile("../repro/" + f.Name())
		if err != nil {
			t.Fatal(err)
		}
		var s Scenario
		if err := yaml.UnmarshalStrict(b, &s); err != nil {
			t.Errorf("%s: %v", f.Name(), err)
			continue
		}
		s.Defaults()
		if err := s.Validate(); err != nil {
			t.Errorf("%s: %v", f.Name(), err)
		}
		if len(s.Steps) == 0 {
			t.Errorf("%s: no steps", f.Name())
		}
	}
	if n == 0 {
		t.Error("no reproduction in repro/")
	}
}

// TestStepsValidate: a malformed step or pin is refused, naming it.
func TestStepsValidate(t *testing.T) {
	base := func() Scenario {
		s := Scenario{Target: TargetKube, Workload: "pets", TimeScale: 1, Kube: &KubeScenario{APIServers: 2}}
		s.Defaults()
		return s
	}
	for _, tc := range []struct {
		name string
		edit func(*Scenario)
		want string
	}{
		{"unknown action", func(s *Scenario) { s.Steps = []Step{{Do: "reboot"}} }, `step 1: do "reboot"`},
		{"wait without pod", func(s *Scenario) { s.Steps = []Step{{Do: "cordon", Node: "node-0"}, {Do: "wait-running"}} }, "step 2 (wait-running): needs pod"},
		{"sleep without for", func(s *Scenario) { s.Steps = []Step{{Do: "sleep"}} }, "needs for"},
		{"steps on embedded", func(s *Scenario) {
			s.Target, s.Kube, s.TimeScale = TargetEmbedded, nil, 50
			s.Steps = []Step{{Do: "heal"}}
		}, "kube target only"},
		{"pin to a missing API server", func(s *Scenario) { s.Kube.Kubelet.APIServers = map[string]int{"node-0": 2} }, "pinned to API server 2 of 2"},
		{"pin of a missing node", func(s *Scenario) { s.Kube.Kubelet.APIServers = map[string]int{"node-9": 0} }, "no node node-9"},
		{"unknown pod list", func(s *Scenario) { s.Kube.Kubelet.PodList = "stream" }, `PodList "stream"`},
	} {
		s := base()
		tc.edit(&s)
		err := s.Validate()
		if !errors.Is(err, ErrInvalidScenario) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInvalidScenario saying %q", tc.name, err, tc.want)
		}
	}
	s := base()
	s.Steps = []Step{{Do: "heal"}}
	s.Kube.Kubelet = KubeletScenario{PodList: "list", APIServers: map[string]int{"node-0": 1}}
	if err := s.Validate(); err != nil {
		t.Errorf("a valid scripted scenario: %v", err)
	}
}
