package specs

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// FuzzScenario decodes arbitrary scenario files as the CLI does (strict
// YAML, then Defaults and Validate). Nothing panics; Defaults is
// idempotent; Validate leaves the scenario as it is and either accepts it
// or returns one line wrapping ErrInvalidScenario; and an accepted
// scenario written back as YAML reads as itself and is accepted again.
func FuzzScenario(f *testing.F) {
	repro, _ := filepath.Glob("../repro/*.yaml")
	for _, p := range repro {
		if filepath.Base(p) == "catalog.yaml" {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		"",
		"workload: register\nnemesis: [partition]\nduration: 30s\n",
		"workload: pets\nnemesis: [kill, pause]\nnemesisInterval: 2s\ntimeScale: 50\nseed: 3\nconcurrency: 4\nfencing: true\nfenceAgents: [storage, power]\n",
		"workload: replicas\ntopology: {members: 3, nodes: [{name: node-1}, {name: node-2}]}\nbugs: [nope]\n",
		"target: kube\nworkload: register\nkube: {apiservers: 2, network: loopback, kubelet: {podList: list, apiservers: {node-1: 1}}}\n",
		"target: kubeconfig\nkubeconfig: /nonexistent\nworkload: register\n",
		"workload: register\nduration: 1000000000\ntimeScale: .inf\nconcurrency: -1\n",
		"workload: register\nunknownField: 1\n",
		"{\"workload\":\"register\",\"duration\":\"1h\",\"checkers\":[\"register\"],\"durable\":true}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var s Scenario
		if err := yaml.UnmarshalStrict(data, &s); err != nil {
			return
		}
		s.Defaults()
		once := encodeScenario(t, &s)
		s.Defaults()
		if twice := encodeScenario(t, &s); !bytes.Equal(once, twice) {
			t.Fatalf("Defaults is not idempotent:\nonce:  %s\ntwice: %s", once, twice)
		}
		err := s.Validate()
		if after := encodeScenario(t, &s); !bytes.Equal(once, after) {
			t.Fatalf("Validate changed the scenario:\nbefore: %s\nafter:  %s", once, after)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalidScenario) {
				t.Fatalf("Validate: %v, which is not ErrInvalidScenario", err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("Validate's error is more than one line: %q", err)
			}
			return
		}
		// Written back out, the accepted scenario reads as itself.
		out, err := yaml.Marshal(&s)
		if err != nil {
			t.Fatalf("writing an accepted scenario: %v", err)
		}
		var back Scenario
		if err := yaml.UnmarshalStrict(out, &back); err != nil {
			t.Fatalf("reading an accepted scenario back: %v\n%s", err, out)
		}
		back.Defaults()
		if got := encodeScenario(t, &back); !bytes.Equal(once, got) {
			t.Fatalf("an accepted scenario reads back differently:\nwrote: %s\nread:  %s", once, got)
		}
		if err := back.Validate(); err != nil {
			t.Fatalf("an accepted scenario, read back, is refused: %v\n%s", err, out)
		}
	})
}

// encodeScenario is s as JSON, for comparing scenarios.
func encodeScenario(t *testing.T, s *Scenario) []byte {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatalf("encoding a scenario: %v", err)
	}
	return b
}
