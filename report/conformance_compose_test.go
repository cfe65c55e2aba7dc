package report

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/podsafe/podsafe/checker"
)

// A run whose nemesis was composed lists its parts, each with its interval.
func TestConformanceComposedNemesis(t *testing.T) {
	dir := storeRun(t, t.TempDir(), "pets-composed", 1, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), chk("at-most-one", checker.Ok, "PS-1"))
	doc := `{"name":"pets-composed","workload":"pets","nemesis":null,"nemesisInterval":"3s",
	"nemesisCompose":[{"faults":["partition"],"interval":"6s"},{"faults":["slow-member","kill-member"]}]}`
	if err := os.WriteFile(filepath.Join(dir, ScenarioFile), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := Conformance([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"partition@6s", "slow-member,kill-member@3s"}, rep.Runs[0].Nemesis); diff != "" {
		t.Errorf("nemesis of the run (-want +got):\n%s", diff)
	}
}
