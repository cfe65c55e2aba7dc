package specs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestScenarioCompose: a composed nemesis reads strictly from YAML, gives
// each part its interval (the scenario's where it gives none), and every
// mistake is one line naming the field.
func TestScenarioCompose(t *testing.T) {
	s := validScenario(t, `workload: register
nemesisInterval: 3s
nemesisCompose:
  - faults: [partition]
    interval: 2s
  - faults: [slow-member, kill-member]
`)
	if s.Name != "register-compose-partition-slow-member+kill-member" {
		t.Errorf("name %q", s.Name)
	}
	parts, err := s.NemesisParts()
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 2 || parts[0].Interval != 2*time.Second || parts[1].Interval != 3*time.Second || len(parts[1].Faults) != 2 {
		t.Errorf("parts %+v", parts)
	}

	for _, tc := range []struct{ doc, want string }{
		{"nemesisCompose:\n  - faults: [partition]\n    every: 2s\n", `unknown field "every"`},
		{"nemesis: [kill]\nnemesisCompose:\n  - faults: [partition]\n", "nemesis kill and nemesisCompose are both given"},
		{"nemesisCompose:\n  - faults: [partition]\n  - faults: [partitoin]\n", `nemesisCompose[1].faults: unknown nemesis "partitoin"`},
		{"nemesisCompose:\n  - faults: [none]\n", "nemesisCompose[0].faults names no fault"},
		{"nemesisCompose:\n  - interval: 2s\n", "nemesisCompose[0].faults names no fault"},
		{"nemesisCompose:\n  - faults: [partition]\n    interval: -2s\n", "nemesisCompose[0].interval must be > 0"},
	} {
		s, err := ParseScenario([]byte("workload: register\n" + tc.doc))
		if err == nil {
			s.Defaults()
			err = s.Validate()
			if err != nil && !errors.Is(err, ErrInvalidScenario) {
				t.Errorf("%q: %v is no ErrInvalidScenario", tc.doc, err)
			}
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error %v, want one line with %q", tc.doc, err, tc.want)
		}
	}
	// "none" beside a composed nemesis says the same: no lone faults.
	s, _ = ParseScenario([]byte("workload: register\nnemesis: [none]\nnemesisCompose:\n  - faults: [partition]\n"))
	s.Defaults()
	if err := s.Validate(); err != nil {
		t.Errorf("nemesis none beside nemesisCompose: %v", err)
	}
}

// Every scenario file shipped with podsafe reads and validates.
func TestScenarioFiles(t *testing.T) {
	files, err := filepath.Glob("../scenarios/*.yaml")
	if err != nil || len(files) < 3 {
		t.Fatalf("scenarios: %v %v", files, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		validScenario(t, string(b))
	}
}

// The composed scenario file shipped with podsafe composes its nemesis.
func TestComposedScenarioFile(t *testing.T) {
	b, err := os.ReadFile("../scenarios/composed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := validScenario(t, string(b))
	if len(s.NemesisCompose) < 3 || len(s.Nemesis) != 0 {
		t.Errorf("scenario %s composes %d parts, nemesis %v", s.Name, len(s.NemesisCompose), s.Nemesis)
	}
}
