package specs

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/podsafe/podsafe/checker"
	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/history"
)

// A scenario's policies reach the embedded cluster's configuration, survive
// a round trip through scenario.json and are recorded in the history.
func TestPoliciesReachTheCluster(t *testing.T) {
	s := validScenario(t, `workload: pets
policies:
  failPodsOnLostNode: true
  terminatedPodThreshold: 3
  disablePreemption: true
  evictionHard: 1Gi
  evictionSoft: 512Mi
  evictionSoftGracePeriod: 20s
  evictionMaxPodGracePeriod: 7
  storageFencingTokens: true
`)
	var cfg cluster.Config
	s.Policies.applyEmbedded(&cfg)
	want := cluster.Config{DisablePreemption: true,
		Controller: cluster.ControllerOptions{FailPodsOnLostNode: true, TerminatedPodThreshold: 3},
		Kubelet: cluster.KubeletOptions{EvictionHard: 1 << 30, EvictionSoft: 512 << 20,
			EvictionSoftGracePeriod: 20 * time.Second, EvictionMaxPodGracePeriod: 7}}
	if cfg.DisablePreemption != want.DisablePreemption || cfg.Controller != want.Controller || cfg.Kubelet != want.Kubelet {
		t.Errorf("config: preemption off %v, controller %+v, kubelet %+v", cfg.DisablePreemption, cfg.Controller, cfg.Kubelet)
	}
	if !cfg.StorageFencingTokens {
		t.Error("config: the storage does not compare fencing tokens")
	}
	b, err := yaml.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if again := validScenario(t, string(b)); again.Policies != s.Policies {
		t.Errorf("round trip: %+v, want %+v", again.Policies, s.Policies)
	}

	path := filepath.Join(t.TempDir(), "history.jsonl")
	rec, err := history.Create(path, history.Meta{Scenario: "p"})
	if err != nil {
		t.Fatal(err)
	}
	logPolicies(rec, s.Policies)
	logPolicies(rec, Policies{}) // none set: nothing recorded
	if err := rec.CloseWith(history.End{}); err != nil {
		t.Fatal(err)
	}
	h, err := history.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var logged []map[string]string
	for _, l := range h.Logs {
		if l.Msg == "cluster policies" {
			logged = append(logged, l.Attrs)
		}
	}
	if diff := cmp.Diff([]map[string]string{s.Policies.Attrs()}, logged); diff != "" || logged[0]["evictionSoft"] != "512Mi" || logged[0][checker.LogStorageFencingTokens] != "true" {
		t.Errorf("logged policies (-want +got):\n%s", diff)
	}
}

func TestPoliciesRefused(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"policies: {terminatedPodThreshold: -1}", "terminatedPodThreshold"},
		{"policies: {evictionHard: lots}", "evictionHard must be a positive quantity"},
		{"policies: {evictionSoft: -5Mi}", "evictionSoft must be a positive quantity"},
		{"policies: {evictionSoftGracePeriod: 10s}", "evictionSoft is not given"},
		{"target: kube\npolicies: {failPodsOnLostNode: true}", "failPodsOnLostNode are the embedded target's"},
		{"target: kube\npolicies: {evictionHard: 1Gi}", "eviction thresholds"},
	} {
		s, err := ParseScenario([]byte("workload: pets\n" + tc.doc + "\n"))
		if err != nil {
			t.Fatalf("%q: %v", tc.doc, err)
		}
		s.Defaults()
		err = s.Validate()
		if !errors.Is(err, ErrInvalidScenario) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.doc, err, tc.want)
		}
	}
	if _, err := ParseScenario([]byte("workload: pets\npolicies: {failPodOnLostNode: true}\n")); err == nil {
		t.Error("an unknown policy accepted")
	}
	// The kube target takes the policies it has flags for.
	s := validScenario(t, "workload: pets\ntarget: kube\npolicies: {terminatedPodThreshold: 5, disablePreemption: true}\n")
	if s.Policies.TerminatedPodThreshold != 5 {
		t.Errorf("%+v", s.Policies)
	}
}

func TestSetPolicies(t *testing.T) {
	p := Policies{TerminatedPodThreshold: 9, EvictionHard: "1Gi"}
	if err := SetPolicies(&p, map[string]string{"failPodsOnLostNode": "true", "terminatedPodThreshold": "3", "evictionSoftGracePeriod": "1m0s"}); err != nil {
		t.Fatal(err)
	}
	want := Policies{FailPodsOnLostNode: true, TerminatedPodThreshold: 3, EvictionHard: "1Gi", EvictionSoftGracePeriod: Duration(time.Minute)}
	if p != want {
		t.Errorf("%+v, want %+v", p, want)
	}
	for _, bad := range []map[string]string{{"failPodOnLostNode": "true"}, {"terminatedPodThreshold": "three"}, {"disablePreemption": "[x"}} {
		if err := SetPolicies(&p, bad); err == nil || !strings.Contains(err.Error(), "--policy") {
			t.Errorf("%v: %v", bad, err)
		}
	}
}
