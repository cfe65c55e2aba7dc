package report

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/podsafe/podsafe/checker"
)

// handMadeMutation is a mutation run's results: PS-1 has a mutant a checker
// caught and one that survived, PS-11 only survivors, PS-4 one killed by
// unit tests only; an equivalent and a not viable mutant count nowhere.
func handMadeMutation() *MutationResults {
	r := &MutationResults{Tool: "gremlins v0.6.0", Seed: 1, PerPackage: 4, Mutants: []MutantResult{
		{ID: "a", Status: MutantKilledByChecker, Guarantees: []string{"PS-1"}},
		{ID: "b", Status: MutantSurvived, Guarantees: []string{"PS-1", "PS-11"}},
		{ID: "c", Status: MutantSurvived, Guarantees: []string{"PS-11"}},
		{ID: "d", Status: MutantKilledByUnit, Guarantees: []string{"PS-4"}},
		{ID: "e", Status: MutantEquivalent, Guarantees: []string{"PS-4"}},
		{ID: "f", Status: MutantNotViable, Guarantees: []string{"PS-4"}},
	}}
	r.Guarantees()
	return r
}

func TestMutationGuarantees(t *testing.T) {
	r := handMadeMutation()
	want := []MutationGuarantee{
		{ID: "PS-1", Attributed: 2, KilledByRun: 1, Survived: 1, Mutants: []string{"a", "b"}},
		{ID: "PS-11", Attributed: 2, Survived: 2, Mutants: []string{"b", "c"}},
		{ID: "PS-4", Attributed: 1, Mutants: []string{"d"}},
	}
	if diff := cmp.Diff(want, r.ByID); diff != "" {
		t.Errorf("ByID (-want +got):\n%s", diff)
	}
	for id, w := range map[string]string{"PS-1": "1/2 (50%)", "PS-11": "0/2 (0%)", "PS-4": "0/1 (0%)", "LC-1": "not measured"} {
		if got := MutationRate(r.Guarantee(id)); got != w {
			t.Errorf("MutationRate(%s) = %q, want %q", id, got, w)
		}
	}
}

func writeMutation(t *testing.T, dir string, r *MutationResults) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, MutationFile)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConformanceMutation(t *testing.T) {
	t.Setenv(MutationEnv, "")
	root := t.TempDir()
	store := filepath.Join(root, "conformance")
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	storeRun(t, store, "pets", 1, t0, chk("amo", checker.Ok, "PS-1", "PS-11"), chk("grace", checker.Ok, "PS-4"))
	// The mutation store sits beside the conformance runs, its latest link
	// naming the newest mutation run.
	run := filepath.Join(root, "mutation", "20261122T100000Z")
	src := writeMutation(t, run, handMadeMutation())
	if err := os.Symlink("20261122T100000Z", filepath.Join(root, "mutation", "latest")); err != nil {
		t.Fatal(err)
	}
	rep, err := ConformanceDir(store)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "mutation", "latest", MutationFile); rep.MutationSource != want {
		t.Errorf("MutationSource = %q, want %q (src %s)", rep.MutationSource, want, src)
	}
	rows := map[string]ConformanceRow{}
	for _, r := range rep.Rows {
		rows[r.ID] = r
	}
	// PS-11 passed its run, but every mutant that breaks it survived.
	if r := rows["PS-11"]; r.Covered || r.Status != StatusNotCovered {
		t.Errorf("PS-11: covered %v status %q, want not covered", r.Covered, r.Status)
	}
	if r := rows["PS-1"]; !r.Covered || r.Status != StatusPassed || MutationRate(r.Mutation) != "1/2 (50%)" {
		t.Errorf("PS-1: covered %v status %q rate %q", r.Covered, r.Status, MutationRate(r.Mutation))
	}
	// Killed by unit tests only: covered stays, the rate says 0%.
	if r := rows["PS-4"]; !r.Covered || MutationRate(r.Mutation) != "0/1 (0%)" {
		t.Errorf("PS-4: covered %v rate %q", r.Covered, MutationRate(r.Mutation))
	}
	if r := rows["LC-1"]; r.Mutation != nil {
		t.Errorf("LC-1: mutation %+v, want none", r.Mutation)
	}
	if rep.Totals.Covered != 2 {
		t.Errorf("covered %d, want 2 (PS-1, PS-4)", rep.Totals.Covered)
	}
	page, err := os.ReadFile(filepath.Join(store, ConformanceHTMLFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Mutation kill rate", `<td class="id">PS-1</td><td>yes</td><td>1/2 (50%)</td>`, `<td class="id">PS-11</td><td>no</td><td>0/2 (0%)</td><td>2</td>`, `<td class="id">LC-1</td><td>no</td><td>not measured</td>`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("conformance.html lacks %q", want)
		}
	}
	if i, j := strings.Index(string(page), `id="mutation"`), strings.LastIndex(string(page), "</main>"); i < 0 || i > j {
		t.Errorf("the mutation section is not inside main (at %d, main ends at %d)", i, j)
	}
	junit, _ := os.ReadFile(filepath.Join(store, ConformanceJUnitFile))
	if !strings.Contains(string(junit), `name="mutation" value="`+rep.MutationSource+`"`) {
		t.Errorf("junit lacks the mutation property:\n%s", junit)
	}
}

func TestConformanceMutationNone(t *testing.T) {
	t.Setenv(MutationEnv, "")
	store := t.TempDir()
	storeRun(t, store, "pets", 1, time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), chk("amo", checker.Ok, "PS-11"))
	rep, err := ConformanceDir(store)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Rows {
		if r.Mutation != nil {
			t.Errorf("%s: measured %+v with no mutation.json", r.ID, r.Mutation)
		}
		if r.ID == "PS-11" && !r.Covered {
			t.Errorf("PS-11 not covered without mutation results")
		}
	}
	page, _ := os.ReadFile(filepath.Join(store, ConformanceHTMLFile))
	if !strings.Contains(string(page), "Not measured: no mutation.json") || strings.Contains(string(page), "%)</td>") {
		t.Errorf("conformance.html should say not measured and show no rate")
	}
}

func TestLoadMutation(t *testing.T) {
	dir := t.TempDir()
	p := writeMutation(t, filepath.Join(dir, "run"), handMadeMutation())
	// PODSAFE_MUTATION names the file to use, whatever is beside the store.
	t.Setenv(MutationEnv, p)
	r, src, err := FindMutation(t.TempDir())
	if err != nil || src != p || len(r.ByID) != 3 {
		t.Fatalf("FindMutation = %v, %q, %v", r, src, err)
	}
	if _, _, err := LoadMutation(filepath.Join(dir, "missing")); !errors.Is(err, ErrNoMutation) {
		t.Errorf("LoadMutation of nothing: %v, want ErrNoMutation", err)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte("{"), 0o644)
	if _, _, err := LoadMutation(bad); err == nil || !strings.Contains(err.Error(), "bad.json is not a mutation.json") {
		t.Errorf("LoadMutation of a corrupt file: %v", err)
	}
}
