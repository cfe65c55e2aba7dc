package specs_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/podsafe/podsafe/checker"
	"github.com/podsafe/podsafe/nemesis"
	"github.com/podsafe/podsafe/specs"
)

// TestFailpointBugKubeletKillsEarly is the first bug-zoo entry: in a
// failpoint build (make test-failpoints) the planted bug kubelet-kills-early
// must make the grace-period checker say Illegal on a replicas run (its
// containers take 3 s to stop after TERM, or run a 2 s preStop). In an
// ordinary build the bug cannot be planted, and the scenario says so.
func TestFailpointBugKubeletKillsEarly(t *testing.T) {
	s := specs.Scenario{Workload: "replicas", Duration: specs.Duration(8 * time.Second), Seed: 5,
		Bugs: []string{"kubelet-kills-early"}}
	if !nemesis.FailpointsCompiled() {
		if os.Getenv("PODSAFE_FAILPOINTS") == "1" {
			t.Fatal("PODSAFE_FAILPOINTS=1 but the failpoint markers are not live (make failpoint-enable)")
		}
		s.Defaults()
		if err := s.Validate(); err == nil {
			t.Fatal("a failpoint bug validated in a build whose failpoints are inert")
		}
		t.Skip("ordinary build: make test-failpoints runs the bug zoo")
	}
	out, err := specs.Run(context.Background(), s, specs.RunOptions{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if out.Results.Verdict != checker.Illegal {
		t.Fatalf("verdict with kubelet-kills-early = %s, want Illegal: %+v", out.Results.Verdict, out.Results.Checks)
	}
	caught := false
	for _, c := range out.Results.Checks {
		if c.Checker == checker.GraceChecker && c.Verdict == checker.Illegal {
			caught = true
		}
	}
	if !caught {
		t.Errorf("the grace-period checker did not catch kubelet-kills-early: %+v", out.Results.Checks)
	}
	// The same scenario without the bug is valid: the checker bites the
	// bug, not the workload.
	s.Bugs = nil
	clean, err := specs.Run(context.Background(), s, specs.RunOptions{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if clean.Results.Verdict != checker.Ok {
		t.Errorf("verdict without the bug = %s, want Ok: %+v", clean.Results.Verdict, clean.Results.Checks)
	}
}
