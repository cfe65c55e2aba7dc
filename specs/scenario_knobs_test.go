package specs

import (
	"errors"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/podsafe/podsafe/workload"
)

// A scenario's knobs tune its workload: a tuned variant is a scenario file.
// They survive a round trip through scenario.json, so a rerun runs the same
// workload.
func TestScenarioKnobsTuneTheWorkload(t *testing.T) {
	s := validScenario(t, `workload: pets+spread
knobs:
  spread: {sets: 5, interval: 2s, setWeights: [0, 1, 1, 1, 1]}
  pets: {regrace: 40}
`)
	check := func(s Scenario) {
		t.Helper()
		w, err := s.TunedWorkload()
		if err != nil {
			t.Fatal(err)
		}
		parts := w.(*workload.Mix).Parts
		pets, spread := parts[0].(*workload.Pets), parts[1].(*workload.Spread)
		if spread.Sets != 5 || spread.Interval != 2*time.Second || spread.SetWeights != [5]int{0, 1, 1, 1, 1} || pets.Regrace != 40 {
			t.Errorf("tuned spread %d sets every %s, weights %v; pets regrace %d", spread.Sets, spread.Interval, spread.SetWeights, pets.Regrace)
		}
	}
	check(s)
	b, err := yaml.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	again, err := ParseScenario(b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	check(again)
}

// A mistake in the knobs is one line wrapping ErrInvalidScenario that names
// the knob.
func TestScenarioKnobsRefused(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"workload: spread\nknobs: {spread: {sets: many}}\n", "spread.sets"},
		{"workload: spread\nknobs: {spread: {pace: 3}}\n", `no knob "pace"`},
		{"workload: spread\nknobs: {pets: {sets: 2}}\n", `"pets"`},
		{"workload: replicas\nknobs: {replicas: {regrace: 200}}\n", "Regrace"},
		{"workload: register\nkeys: 3\nknobs: {register: {keys: 7}}\n", "given twice"},
	} {
		s, err := ParseScenario([]byte(tc.doc))
		if err != nil {
			t.Fatalf("%q: %v", tc.doc, err)
		}
		s.Defaults()
		err = s.Validate()
		if !errors.Is(err, ErrInvalidScenario) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v, want one line naming %q", tc.doc, err, tc.want)
		}
	}
	// A field that is not a knob's place is refused by the strict decoder.
	if _, err := ParseScenario([]byte("workload: spread\nknob: {spread: {sets: 2}}\n")); err == nil {
		t.Error("an unknown field (knob) accepted")
	}
}

// The register's keys may be given as its knob alone; the scenario then
// says the same, so scenario.json and the run agree.
func TestScenarioRegisterKeysKnob(t *testing.T) {
	s := validScenario(t, "workload: register\nknobs: {register: {keys: 7}}\n")
	if s.Keys != 7 {
		t.Errorf("keys %d, want the knob's 7", s.Keys)
	}
	validScenario(t, "workload: register\nkeys: 7\nknobs: {register: {keys: 7}}\n") // the same keys twice
}

// validScenario reads doc as a scenario file, with its defaults, and fails
// the test unless it is valid.
func validScenario(t *testing.T, doc string) Scenario {
	t.Helper()
	s, err := ParseScenario([]byte(doc))
	if err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
	s.Defaults()
	if err := s.Validate(); err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
	return s
}
