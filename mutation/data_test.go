package mutation

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/podsafe/podsafe/specs"
)

func TestSample(t *testing.T) {
	var ms []Mutant
	for i := 1; i <= 40; i++ {
		ms = append(ms, Mutant{File: "p/a.go", Line: i, Column: 1, Mutator: ConditionalsNegation})
	}
	ids := func(ms []Mutant) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.ID())
		}
		return out
	}
	a := Sample(ms, 6, 1, "p")
	if len(a) != 6 {
		t.Fatalf("sampled %d, want 6", len(a))
	}
	// The same mutants in another order, the same seed: the same sample.
	rev := slices.Clone(ms)
	slices.Reverse(rev)
	if diff := cmp.Diff(ids(a), ids(Sample(rev, 6, 1, "p"))); diff != "" {
		t.Errorf("the sample depends on the input's order (-first +second):\n%s", diff)
	}
	if !slices.IsSorted(ids(a)) {
		t.Errorf("the sample is not sorted: %v", ids(a))
	}
	if cmp.Equal(ids(a), ids(Sample(ms, 6, 2, "p"))) {
		t.Errorf("seeds 1 and 2 drew the same sample %v", ids(a))
	}
	if cmp.Equal(ids(a), ids(Sample(ms, 6, 1, "q"))) {
		t.Errorf("packages p and q drew the same sample %v", ids(a))
	}
	if got := Sample(ms, 100, 1, "p"); len(got) != 40 {
		t.Errorf("a sample larger than the mutants has %d, want all 40", len(got))
	}
}

func TestEquivalents(t *testing.T) {
	es, err := LoadEquivalents([]byte(`
- file: p/a.go
  func: Server.write
  mutator: CONDITIONALS_BOUNDARY
  source: "if n >= 0 {"
  reason: n is never 0 here
`))
	if err != nil {
		t.Fatal(err)
	}
	m := Mutant{File: "p/a.go", Func: "Server.write", Mutator: ConditionalsBoundary, Source: "if n >= 0 {", Line: 12}
	if !es[0].Matches(&m) {
		t.Errorf("the listed mutant does not match")
	}
	// Moved lines still match; another function, mutator or text does not.
	m.Line = 90
	if !es[0].Matches(&m) {
		t.Errorf("the listed mutant, moved, does not match")
	}
	for _, change := range []func(*Mutant){
		func(m *Mutant) { m.Func = "Server.read" },
		func(m *Mutant) { m.Mutator = ConditionalsNegation },
		func(m *Mutant) { m.Source = "if n > 0 {" },
		func(m *Mutant) { m.File = "p/b.go" },
	} {
		o := m
		change(&o)
		if es[0].Matches(&o) {
			t.Errorf("%+v matches the entry for %+v", o, es[0])
		}
	}
	for _, c := range []struct{ in, want string }{
		{"- file: a.go\n  mutator: ARITHMETIC_BASE\n  source: x\n", "needs file, mutator, source and reason"},
		{"- file: a.go\n  mutator: NOPE\n  source: x\n  reason: y\n", `mutator "NOPE" is not one of`},
		{"- file: a.go\n  mutatr: ARITHMETIC_BASE\n", "unknown field"},
	} {
		if _, err := LoadEquivalents([]byte(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("LoadEquivalents(%q) = %v, want %q", c.in, err, c.want)
		}
	}
	embedded, err := LoadEquivalents(nil)
	if err != nil {
		t.Errorf("the embedded list: %v", err)
	}
	// Every listed mutant is still in the code: its line, in its function.
	for _, e := range embedded {
		b, err := os.ReadFile(filepath.Join("..", e.File))
		if err != nil {
			t.Errorf("equivalent mutant of %s: %v", e.File, err)
			continue
		}
		found := false
		for _, line := range strings.Split(string(b), "\n") {
			found = found || strings.TrimSpace(line) == strings.TrimSpace(e.Source)
		}
		if !found || !declaredFuncs(t, filepath.Join("..", e.File))[e.Func] {
			t.Errorf("equivalent mutant %s %s %q is no longer in the code", e.File, e.Func, e.Source)
		}
	}
}

func TestAttribute(t *testing.T) {
	as, err := LoadAttributions([]byte(`
- file: p/a.go
  guarantees: [PS-1]
  why: all of a.go
- file: p/a.go
  funcs: [Server.write]
  guarantees: [PS-15, PS-14]
  why: the write path
- file: p/sub/
  guarantees: [TS-2]
  why: the directory
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		m    Mutant
		want []string
	}{
		{Mutant{File: "p/a.go", Func: "Server.write"}, []string{"PS-14", "PS-15"}},
		{Mutant{File: "p/a.go", Func: "other"}, []string{"PS-1"}},
		{Mutant{File: "p/sub/x.go", Func: "f"}, []string{"TS-2"}},
		{Mutant{File: "p/b.go", Func: "f"}, nil},
	} {
		if diff := cmp.Diff(c.want, Attribute(as, &c.m)); diff != "" {
			t.Errorf("Attribute(%s %s) (-want +got):\n%s", c.m.File, c.m.Func, diff)
		}
	}
	if _, err := LoadAttributions([]byte("- file: a.go\n  guarantees: [PS-99]\n  why: x\n")); err == nil || !strings.Contains(err.Error(), `"PS-99" is not a guarantee`) {
		t.Errorf("an unknown ID: %v", err)
	}
}

// TestGuaranteeMap checks the embedded map against the code: every file
// exists, every function named is declared in it, and every system-under-
// test package with scenarios has code mapped.
func TestGuaranteeMap(t *testing.T) {
	as, err := LoadAttributions(nil)
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join("..")
	mapped := map[string]bool{}
	for _, a := range as {
		p := filepath.Join(root, a.File)
		st, err := os.Stat(p)
		if err != nil {
			t.Errorf("%s: %v", a.File, err)
			continue
		}
		if strings.HasSuffix(a.File, "/") != st.IsDir() {
			t.Errorf("%s: a directory must end in / and a file must not", a.File)
		}
		mapped[strings.TrimSuffix(filepath.Dir(a.File+"x"), "/")] = true
		if len(a.Funcs) == 0 {
			continue
		}
		funcs := declaredFuncs(t, p)
		for _, f := range a.Funcs {
			if !funcs[f] {
				t.Errorf("%s declares no %s", a.File, f)
			}
		}
	}
	for pkg := range PackageScenarios {
		if !mapped[pkg] {
			t.Errorf("no code of %s is mapped to a guarantee", pkg)
		}
	}
}

func declaredFuncs(t *testing.T, file string) map[string]bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok {
			out[enclosingFunc(f, fd.Body.Lbrace)] = true
		}
	}
	return out
}

func TestScenarios(t *testing.T) {
	for pkg, bugs := range PackageScenarios {
		for _, b := range bugs {
			s, err := Scenario(b)
			if err != nil {
				t.Errorf("%s: %v", pkg, err)
				continue
			}
			if len(s.Bugs) != 0 || s.BypassAuthority || s.Name != "mutation-"+b {
				t.Errorf("%s: scenario %+v plants a bug, bypasses authority or is misnamed", pkg, s)
			}
			// podsafe test refuses a scenario file's zero fields.
			if s.Topology.Members == 0 || s.Duration == 0 || s.TimeScale == 0 {
				t.Errorf("%s: scenario %s is not defaulted: %+v", pkg, b, s)
			}
		}
	}
	// A conformance run is the suite's own scenario, seed and shape.
	s, err := Scenario("conformance-store")
	if err != nil || s.Name != "mutation-conformance-store" || s.Workload != "register" || s.Seed != specs.ConformanceRuns["store"].Seed || s.WatchWindow == 0 {
		t.Errorf("Scenario(conformance-store) = %+v, %v", s, err)
	}
	for _, c := range []struct{ name, want string }{
		{"conformance-nope", `no conformance run "nope"`},
		{"no-such-bug", `"no-such-bug" is neither a bug of the zoo nor conformance-<a conformance run>`},
	} {
		if _, err := Scenario(c.name); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Scenario(%s) = %v, want an error saying %s", c.name, err, c.want)
		}
	}
	for _, c := range []struct{ in, want string }{
		{"./cluster/storage/", "cluster/storage"},
		{"github.com/podsafe/podsafe/kubelet", "kubelet"},
		{"raftstore", "raftstore"},
	} {
		if got, err := NormalizePackage(c.in); err != nil || got != c.want {
			t.Errorf("NormalizePackage(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	if _, err := NormalizePackage("./checker"); err == nil || !strings.Contains(err.Error(), `package "checker" has no mutation scenarios; choose among ./apiserver,`) {
		t.Errorf("NormalizePackage(./checker) = %v", err)
	}
}

// TestGremlinsVersionPinned keeps the Makefile's pin and the code's in step.
func TestGremlinsVersionPinned(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^GREMLINS_VERSION\s*\?=\s*(\S+)$`).FindSubmatch(b)
	if m == nil || string(m[1]) != GremlinsVersion {
		t.Errorf("the Makefile pins gremlins %q, the code %s", m, GremlinsVersion)
	}
}

// TestTopUpByGuarantee: the top-up draws from each guarantee's own code
// until it has n sampled mutants (or its code has no more), counts a mutant
// for every guarantee it implements, leaves guarantees already at n alone,
// and draws the same mutants whatever the input's order.
func TestTopUpByGuarantee(t *testing.T) {
	as := []Attribution{
		{File: "a/grace.go", Guarantees: []string{"GP-1"}},
		{File: "a/both.go", Guarantees: []string{"GP-1", "PS-1"}},
		{File: "b/spread.go", Guarantees: []string{"TS-1"}},
	}
	mk := func(pkg, file string, lines int) []Mutant {
		var out []Mutant
		for i := 1; i <= lines; i++ {
			out = append(out, Mutant{Package: pkg, File: file, Line: i, Column: 1, Mutator: ConditionalsNegation})
		}
		return out
	}
	cands := map[string][]Mutant{
		"a": slices.Concat(mk("a", "a/grace.go", 10), mk("a", "a/both.go", 1), mk("a", "a/other.go", 10)),
		"b": mk("b", "b/spread.go", 1),
	}
	// The package sample already has one GP-1 mutant.
	samples := map[string][]Mutant{"a": mk("a", "a/grace.go", 1)}
	count := func(out map[string][]Mutant) map[string]int {
		n := map[string]int{}
		for _, ms := range out {
			for i := range ms {
				for _, id := range Attribute(as, &ms[i]) {
					n[id]++
				}
			}
		}
		return n
	}
	out := TopUpByGuarantee(cands, samples, as, 3, 1)
	got := count(out)
	// GP-1 reaches 3; PS-1's code has one mutant; TS-1's has one.
	if got["GP-1"] < 3 || got["PS-1"] != 1 || got["TS-1"] != 1 {
		t.Errorf("per guarantee after the top-up: %v", got)
	}
	if len(out["a"])+len(out["b"]) > 5 {
		t.Errorf("the top-up drew more than it needed: %d mutants", len(out["a"])+len(out["b"]))
	}
	for _, m := range out["a"] {
		if m.File == "a/other.go" {
			t.Errorf("drew %s, which implements no guarantee", m.ID())
		}
	}
	if len(samples["a"]) != 1 {
		t.Errorf("the top-up changed its input sample: %d", len(samples["a"]))
	}
	ids := func(ms []Mutant) []string {
		var s []string
		for _, m := range ms {
			s = append(s, m.ID())
		}
		return s
	}
	if !slices.IsSorted(ids(out["a"])) {
		t.Errorf("package a's sample is not sorted: %v", ids(out["a"]))
	}
	rev := map[string][]Mutant{"a": slices.Clone(cands["a"]), "b": cands["b"]}
	slices.Reverse(rev["a"])
	if diff := cmp.Diff(ids(out["a"]), ids(TopUpByGuarantee(rev, samples, as, 3, 1)["a"])); diff != "" {
		t.Errorf("the top-up depends on the input's order (-first +second):\n%s", diff)
	}
	// n of 0 adds nothing; a guarantee already at n gets nothing.
	if out := TopUpByGuarantee(cands, samples, as, 0, 1); len(out["a"]) != 1 || len(out["b"]) != 0 {
		t.Errorf("n=0 drew %v", out)
	}
	// (PS-1's one mutant implements GP-1 too, but no more of GP-1's own
	// code is drawn.)
	for _, m := range TopUpByGuarantee(cands, samples, as, 1, 1)["a"] {
		if m.File == "a/grace.go" && m.Line != 1 {
			t.Errorf("GP-1 already had 1 and got %s", m.ID())
		}
	}
}
