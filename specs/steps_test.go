package specs

import (
	"errors"
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
		if !strings.HasSuffix(f.Name(), ".yaml") || f.Name() == "catalog.yaml" {
			continue // the catalog is report's (report.LoadReproCatalog)
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
		{"create without manifest", func(s *Scenario) { s.Steps = []Step{{Do: "create"}} }, "step 1 (create): manifest: no object"},
		{"manifest without kind", func(s *Scenario) {
			s.Steps = []Step{{Do: "create", Manifest: "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\napiVersion: v1\nmetadata: {name: b}\n"}}
		}, "document 2: no kind"},
		{"manifest without name", func(s *Scenario) { s.Steps = []Step{{Do: "create", Manifest: "apiVersion: v1\nkind: Pod\n"}} }, "document 1 (Pod): no metadata.name"},
		{"manifest not YAML", func(s *Scenario) { s.Steps = []Step{{Do: "create", Manifest: "kind: [Pod\n"}} }, "step 1 (create): manifest: document 1"},
		{"wait without type", func(s *Scenario) { s.Steps = []Step{{Do: "wait", Object: "web-0", Until: "delete"}} }, `object "web-0": write TYPE/NAME`},
		{"wait for nothing", func(s *Scenario) { s.Steps = []Step{{Do: "wait", Object: "pod/web-0"}} }, `until "": write delete`},
		{"patch without object", func(s *Scenario) { s.Steps = []Step{{Do: "patch", Patch: "{}"}} }, `object "": write TYPE/NAME`},
		{"patch not YAML", func(s *Scenario) { s.Steps = []Step{{Do: "patch", Object: "node/n", Patch: "spec: [a"}} }, "step 1 (patch): patch:"},
		{"empty patch", func(s *Scenario) { s.Steps = []Step{{Do: "patch", Object: "node/n"}} }, "patch: empty"},
		{"freeze without resource", func(s *Scenario) { s.Steps = []Step{{Do: "freeze-watch", Component: "kube-controller-manager-0"}} }, "needs component and resource"},
		{"wait on a bad jsonpath", func(s *Scenario) {
			s.Steps = []Step{{Do: "wait", Object: "pod/web-0", Until: "jsonpath={.status.phase=Running"}}
		}, "write jsonpath={.path}=value"},
	} {
		s := base()
		tc.edit(&s)
		err := s.Validate()
		if !errors.Is(err, ErrInvalidScenario) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInvalidScenario saying %q", tc.name, err, tc.want)
		}
	}
	s := base()
	s.Steps = []Step{{Do: "heal"}, {Do: "create", Manifest: "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n"},
		{Do: "wait", Object: "pdb/budget", Until: "jsonpath={.status.currentHealthy}=1"},
		{Do: "wait", Object: "pod/a", Until: "condition=Ready"}, {Do: "wait", Object: "pod/a", Until: "delete"},
		{Do: "patch", Object: "node/node-0", Patch: "spec: {taints: null}"}, {Do: "freeze-watch", Component: "kube-controller-manager-0", Resource: "nodes"}}
	s.Kube.Kubelet = KubeletScenario{PodList: "list", APIServers: map[string]int{"node-0": 1}}
	if err := s.Validate(); err != nil {
		t.Errorf("a valid scripted scenario: %v", err)
	}
}

// TestWaitCondition: each form of until holds exactly when kubectl wait's
// --for would.
func TestWaitCondition(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"status": map[string]any{"phase": "Running", "conditions": []any{
			map[string]any{"type": "Ready", "status": "True"}, map[string]any{"type": "PodScheduled", "status": "False"}}},
	}}
	for _, tc := range []struct {
		until string
		obj   *unstructured.Unstructured
		want  bool
	}{
		{"delete", nil, true},
		{"delete", obj, false},
		{"condition=Ready", obj, true},
		{"condition=Ready=False", obj, false},
		{"condition=PodScheduled=false", obj, true},
		{"condition=Initialized", obj, false},
		{"condition=Ready", nil, false},
		{"jsonpath={.status.phase}=Running", obj, true},
		{"jsonpath={.status.phase}=Pending", obj, false},
		{"jsonpath={.status.missing}=1", obj, false},
	} {
		c, err := parseWaitCondition(tc.until)
		if err != nil {
			t.Fatalf("%s: %v", tc.until, err)
		}
		if got, err := c.holds(tc.obj); err != nil || got != tc.want {
			t.Errorf("%s on %v: %v, %v; want %v", tc.until, tc.obj != nil, got, err, tc.want)
		}
	}
}
