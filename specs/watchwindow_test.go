package specs

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/podsafe/podsafe/workload"
)

// A scenario's watchWindow is a positive count of events for the embedded
// store; anything else is refused in one line naming the field.
func TestScenarioWatchWindow(t *testing.T) {
	s := validScenario(t, "workload: register\nwatchWindow: 64\n")
	if s.WatchWindow != 64 {
		t.Errorf("watchWindow %d, want 64", s.WatchWindow)
	}
	if s := validScenario(t, "workload: register\n"); s.WatchWindow != 0 {
		t.Errorf("watchWindow %d by default, want 0 (the store's default)", s.WatchWindow)
	}
	for _, tc := range []struct{ doc, want string }{
		{"workload: register\nwatchWindow: -1\n", "watchWindow"},
		{"workload: register\ntarget: kube\nwatchWindow: 64\n", "watchWindow"},
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
}

// The conformance run that judges the watch guarantees keeps a window
// small enough for its watchers to reach the floor, and watches short
// enough that they resume often; its watchers rewind more than an ordinary
// run's.
func TestConformanceWatchWindow(t *testing.T) {
	s := ConformanceRuns["store"]
	s.Defaults()
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if s.WatchWindow <= 0 || s.WatchWindow > 1000 {
		t.Errorf("the store run's watch window is %d events, want a small one", s.WatchWindow)
	}
	w, err := s.TunedWorkload()
	if err != nil {
		t.Fatal(err)
	}
	if got := w.(*workload.Register).WatchTimeout; got <= 0 || got > 5*time.Second {
		t.Errorf("the store run's watches last up to %s, want a few seconds", got)
	}
	if watcherRewind(s) <= watcherRewind(Scenario{}) {
		t.Errorf("a run with a small window rewinds %d%% of resumes, an ordinary run %d%%", watcherRewind(s), watcherRewind(Scenario{}))
	}
}
