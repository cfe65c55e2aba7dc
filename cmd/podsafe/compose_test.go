package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/podsafe/podsafe/specs"
)

// fromFlags parses args as podsafe test would and returns the scenario,
// defaulted and validated.
func fromFlags(t *testing.T, args ...string) (specs.Scenario, error) {
	t.Helper()
	cmd, f := newTestCommand()
	if err := cmd.Flags().Parse(args); err != nil {
		t.Fatal(err)
	}
	s, err := scenarioFromFlags(cmd, f)
	if err != nil {
		return s, err
	}
	s.Defaults()
	return s, s.Validate()
}

// --nemesis-compose gives the parts of a composed nemesis, replacing the
// default --nemesis (and a file's nemesis); --nemesis replaces a file's
// composed nemesis; the rerun command gives the same parts back.
func TestNemesisComposeFlag(t *testing.T) {
	s, err := fromFlags(t, "--workload", "pets", "--nemesis-interval", "3s",
		"--nemesis-compose", "partition@6s", "--nemesis-compose", "kill-kubelet, pause-kubelet")
	if err != nil {
		t.Fatal(err)
	}
	want := []specs.NemesisPart{
		{Faults: []string{"partition"}, Interval: specs.Duration(6 * time.Second)},
		{Faults: []string{"kill-kubelet", "pause-kubelet"}},
	}
	if diff := cmp.Diff(want, s.NemesisCompose); diff != "" || len(s.Nemesis) != 0 {
		t.Errorf("parts (-want +got):\n%s\nnemesis %v", diff, s.Nemesis)
	}
	rerun := rerunCommand(s, "store")
	if !strings.Contains(rerun, "--nemesis-compose partition@6s --nemesis-compose kill-kubelet,pause-kubelet@3s") || strings.Contains(rerun, "--nemesis ") {
		t.Errorf("rerun %q", rerun)
	}
	again, err := fromFlags(t, strings.Fields(rerun)[2:]...)
	if err != nil {
		t.Fatal(err)
	}
	want[1].Interval = specs.Duration(3 * time.Second)
	if diff := cmp.Diff(want, again.NemesisCompose); diff != "" {
		t.Errorf("parts of the rerun (-want +got):\n%s", diff)
	}

	file := writeScenario(t, t.TempDir(), "c", "workload: register\nnemesisCompose:\n  - faults: [partition]\n  - faults: [slow-member]\n")
	s, err = fromFlags(t, "--scenario", file)
	if err != nil || len(s.NemesisCompose) != 2 {
		t.Errorf("from the file: %v, parts %v", err, s.NemesisCompose)
	}
	s, err = fromFlags(t, "--scenario", file, "--nemesis", "kill-member")
	if err != nil || len(s.NemesisCompose) != 0 || !cmp.Equal(s.Nemesis, []string{"kill-member"}) {
		t.Errorf("--nemesis over the file: %v, parts %v, nemesis %v", err, s.NemesisCompose, s.Nemesis)
	}
}

func TestNemesisComposeBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"test", "--nemesis-compose", "partition@soon"}, `--nemesis-compose "partition@soon": the interval after @ must be a duration > 0`},
		{[]string{"test", "--nemesis-compose", "@4s"}, `--nemesis-compose "@4s" names no fault`},
		{[]string{"test", "--nemesis-compose", "partiton"}, `nemesisCompose[0].faults: unknown nemesis "partiton"`},
		{[]string{"test", "--nemesis", "kill", "--nemesis-compose", "partition"}, "nemesis kill and nemesisCompose are both given"},
	} {
		out, code := run(context.Background(), tc.args...)
		if code != exitUsage || !strings.Contains(out, tc.want) {
			t.Errorf("podsafe %s: exit %d, output %q; want exit %d and %q", strings.Join(tc.args, " "), code, out, exitUsage, tc.want)
		}
	}
}
