package mutation

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/podsafe/podsafe/report"
)

const fixture = "testdata/fixture"

// copyFixture copies the fixture module into a temporary directory, so a
// test can build and enumerate it without touching the tree.
func copyFixture(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(fixture, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(fixture, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestLocateApply(t *testing.T) {
	orig, err := os.ReadFile(filepath.Join(fixture, "calc/calc.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name         string
		m            Mutant
		fn, from, to string
		line         string // the mutated line, trimmed
	}{
		{"boundary", Mutant{Line: 7, Column: 7, Mutator: ConditionalsBoundary}, "Clamp", "<", "<=", "if v <= lo {"},
		{"negation", Mutant{Line: 10, Column: 7, Mutator: ConditionalsNegation}, "Clamp", ">", "<=", "if v <= hi {"},
		{"logical", Mutant{Line: 20, Column: 16, Mutator: InvertLogical}, "Sum", "&&", "||", "if xs[i] < 0 || total >= 0 {"},
		{"arithmetic", Mutant{Line: 23, Column: 17, Mutator: ArithmeticBase}, "Sum", "+", "-", "total = total - xs[i]"},
		{"loop control", Mutant{Line: 21, Column: 4, Mutator: InvertLoopCtrl}, "Sum", "break", "continue", "continue"},
		{"method", Mutant{Line: 31, Column: 31, Mutator: IncrementDecrement}, "counter.bump", "++", "--", "func (c *counter) bump() { c.n-- }"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := c.m
			m.Package, m.File = "calc", "calc/calc.go"
			if err := m.Locate(fixture); err != nil {
				t.Fatal(err)
			}
			if m.Func != c.fn || m.Original != c.from || m.Replacement != c.to {
				t.Errorf("located %s %q→%q, want %s %q→%q", m.Func, m.Original, m.Replacement, c.fn, c.from, c.to)
			}
			got, err := m.Apply(fixture)
			if err != nil {
				t.Fatal(err)
			}
			gl, ol := strings.Split(string(got), "\n"), strings.Split(string(orig), "\n")
			if len(gl) != len(ol) {
				t.Fatalf("the mutant has %d lines, the original %d", len(gl), len(ol))
			}
			for i := range ol {
				want := ol[i]
				if i == m.Line-1 {
					want = c.line
					if strings.TrimSpace(gl[i]) != want {
						t.Errorf("line %d = %q, want %q", m.Line, strings.TrimSpace(gl[i]), want)
					}
					continue
				}
				if gl[i] != want {
					t.Errorf("line %d changed: %q", i+1, gl[i])
				}
			}
		})
	}
}

func TestLocateRefuses(t *testing.T) {
	for _, c := range []struct {
		m    Mutant
		want string
	}{
		{Mutant{Line: 7, Column: 7, Mutator: InvertLogical}, `INVERT_LOGICAL does not change "<"`},
		{Mutant{Line: 7, Column: 8, Mutator: ConditionalsBoundary}, "no operator at calc/calc.go:7:8"},
		{Mutant{Line: 7, Column: 7, Mutator: "REMOVE_SELF_ASSIGNMENTS"}, `mutator "REMOVE_SELF_ASSIGNMENTS" is not one of`},
	} {
		m := c.m
		m.Package, m.File = "calc", "calc/calc.go"
		if err := m.Locate(fixture); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Locate(%s) = %v, want an error saying %q", m.ID(), err, c.want)
		}
	}
}

func TestWriteOverlay(t *testing.T) {
	root := copyFixture(t)
	m := Mutant{Package: "calc", File: "calc/calc.go", Line: 10, Column: 7, Mutator: ConditionalsNegation}
	if err := m.Locate(root); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(root, m.File))
	ov, err := m.WriteOverlay(root, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var o struct{ Replace map[string]string }
	b, _ := os.ReadFile(ov)
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatal(err)
	}
	mutated, ok := o.Replace[filepath.Join(root, m.File)]
	if !ok || len(o.Replace) != 1 {
		t.Fatalf("overlay %s does not replace %s alone", b, m.File)
	}
	if mb, _ := os.ReadFile(mutated); !strings.Contains(string(mb), "if v <= hi {") {
		t.Errorf("the overlay's file is not the mutant")
	}
	if after, _ := os.ReadFile(filepath.Join(root, m.File)); string(after) != string(before) {
		t.Errorf("WriteOverlay wrote the tree")
	}
	// The go command builds the mutant through the overlay: the fixture's
	// test of Clamp fails (Clamp(5) is now 10).
	ex := &executor{root: root, goCmd: "go", unitTimeout: time.Minute}
	if out, err := ex.goRun(context.Background(), time.Minute, "test", "-overlay", ov, "-count=1", "./calc"); err == nil {
		t.Errorf("the fixture's tests passed with the mutant:\n%s", out)
	}
	if out, err := ex.goRun(context.Background(), time.Minute, "test", "-count=1", "./calc"); err != nil {
		t.Errorf("the fixture's tests fail without the mutant:\n%s", out)
	}
}

func TestEvaluateUnitOnly(t *testing.T) {
	root := copyFixture(t)
	ex := &executor{root: root, goCmd: "go", unitTimeout: time.Minute, runTimeout: time.Minute}
	for _, c := range []struct {
		m    Mutant
		want string
	}{
		// v > hi → v >= hi: Clamp(10) is still 10 and no case tests it.
		{Mutant{Line: 10, Column: 7, Mutator: ConditionalsBoundary, CoveredByUnit: true}, report.MutantSurvived},
		{Mutant{Line: 23, Column: 17, Mutator: ArithmeticBase, CoveredByUnit: true}, report.MutantKilledByUnit},
		// gremlins' coverage is not trusted: the unit tests run for a
		// mutant it calls not covered, and kill it when they notice it.
		{Mutant{Line: 23, Column: 17, Mutator: ArithmeticBase}, report.MutantKilledByUnit},
		// Truly not covered (no test calls bump): it survives them.
		{Mutant{Line: 31, Column: 31, Mutator: IncrementDecrement}, report.MutantSurvived},
	} {
		m := c.m
		m.Package, m.File = "calc", "calc/calc.go"
		if err := m.Locate(root); err != nil {
			t.Fatal(err)
		}
		r := ex.evaluateUnit(context.Background(), &m, t.TempDir())
		if r.Status != c.want {
			t.Errorf("%s: %s (%s), want %s", m.ID(), r.Status, r.Reason, c.want)
		}
	}
}

func TestParseGremlins(t *testing.T) {
	in := `{"go_module":"m","files":[
	{"file_name":"storage.go","mutations":[{"type":"CONDITIONALS_NEGATION","status":"RUNNABLE","line":85,"column":9},{"type":"ARITHMETIC_BASE","status":"NOT COVERED","line":7,"column":66}]},
	{"file_name":"sub/other.go","mutations":[{"type":"CONDITIONALS_NEGATION","status":"RUNNABLE","line":1,"column":1}]}]}`
	got, err := ParseGremlins("cluster/storage", strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Mutant{
		{Package: "cluster/storage", File: "cluster/storage/storage.go", Line: 7, Column: 66, Mutator: ArithmeticBase},
		{Package: "cluster/storage", File: "cluster/storage/storage.go", Line: 85, Column: 9, Mutator: ConditionalsNegation, CoveredByUnit: true},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(Mutant{})); diff != "" {
		t.Errorf("ParseGremlins (-want +got):\n%s", diff)
	}
	bad := `{"files":[{"file_name":"a.go","mutations":[{"type":"INVERT_BWASSIGN","status":"RUNNABLE","line":1,"column":1}]}]}`
	if _, err := ParseGremlins("p", strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), `mutator "INVERT_BWASSIGN" of a.go:1`) {
		t.Errorf("an unknown mutator: %v", err)
	}
}

// TestEnumerateFixture runs the real gremlins over the fixture module.
func TestEnumerateFixture(t *testing.T) {
	bin := os.Getenv("PODSAFE_GREMLINS")
	if bin == "" {
		home, _ := os.UserHomeDir()
		bin = filepath.Join(home, ".cache", "podsafe", "gremlins-"+GremlinsVersion, "gremlins")
	}
	if _, err := exec.LookPath(bin); err != nil {
		t.Skipf("gremlins %s is not installed at %s (make mutation installs it; PODSAFE_GREMLINS names another)", GremlinsVersion, bin)
	}
	root := copyFixture(t)
	ms, err := Enumerate(context.Background(), bin, root, "calc", testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 15 {
		t.Errorf("%d mutants, want 15 (gremlins' defaults and the logical and loop-control inversions)", len(ms))
	}
	covered := 0
	for i := range ms {
		if err := ms[i].Locate(root); err != nil {
			t.Errorf("gremlins' mutant does not locate: %v", err)
		}
		if ms[i].CoveredByUnit {
			covered++
		}
	}
	if covered != 13 {
		t.Errorf("%d mutants covered by unit tests, want 13 (all but break and bump's ++)", covered)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// TestLocateMarker: an operator in a failpoint marker's function is marked
// InMarker (its mutants are equivalent: ordinary builds never run it), the
// same operator outside is not.
func TestLocateMarker(t *testing.T) {
	for _, c := range []struct {
		line, col int
		want      bool
	}{
		{14, 8, true},   // d > 0, inside the marker's function
		{18, 7, false},  // d > spec, after it
		{21, 16, false}, // d > 1, in the arguments of a plain function's call
	} {
		m := Mutant{Package: "marker", File: "marker/marker.go", Line: c.line, Column: c.col, Mutator: ConditionalsNegation}
		if err := m.Locate("testdata"); err != nil {
			t.Fatal(err)
		}
		if m.InMarker != c.want {
			t.Errorf("%s (%q): InMarker %v, want %v", m.ID(), m.Source, m.InMarker, c.want)
		}
	}
}

// TestResolveCommit: a commit given as HEAD is recorded as the hash it
// named; a name that is no commit is an error naming it.
func TestResolveCommit(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		t.Skip("not a git checkout")
	}
	got, err := ResolveCommit(context.Background(), root, "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 40 || strings.Trim(got, "0123456789abcdef") != "" {
		t.Errorf("HEAD resolved to %q, want a full hash", got)
	}
	if _, err := ResolveCommit(context.Background(), root, "no-such-commit"); err == nil || !strings.Contains(err.Error(), `"no-such-commit"`) {
		t.Errorf("err = %v, want one naming the commit", err)
	}
}
