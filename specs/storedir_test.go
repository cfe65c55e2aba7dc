package specs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidName(t *testing.T) {
	for _, tc := range []struct {
		name string
		want string // "" for valid
	}{
		{"register-partition", ""},
		{"pets-partition-node+kill", ""},
		{"Kube_1.37", ""},
		{"0day", ""},
		{"", "is empty"},
		{"../../../escape", "must start with a letter or a digit"},
		{"..", "must start with a letter or a digit"},
		{".hidden", "must start with a letter or a digit"},
		{"-flag", "must start with a letter or a digit"},
		{"a/b", `has '/'`},
		{`a\b`, `has '\\'`},
		{"a b", `has ' '`},
		{"ünïcode", "must start with a letter or a digit"},
		{"latest", "the store's link to the newest run"},
		{strings.Repeat("x", MaxNameLength), ""},
		{strings.Repeat("x", MaxNameLength+1), "at most 100"},
	} {
		err := ValidName(tc.name)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("ValidName(%q) = %v, want nil", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("ValidName(%q) = %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestCreateRunDirConfined: a run's directory is created inside the store
// and store/latest points at it; a link in the store that leads out of it
// is not followed.
func TestCreateRunDirConfined(t *testing.T) {
	base := t.TempDir()
	store, outside := filepath.Join(base, "store"), filepath.Join(base, "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := createRunDir(store, "register", "20260101T000000.000Z-seed1")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(store, "register", "20260101T000000.000Z-seed1"); dir != want {
		t.Errorf("run dir %s, want %s", dir, want)
	}
	if st, err := os.Stat(filepath.Join(store, "latest")); err != nil || !st.IsDir() {
		t.Errorf("store/latest does not lead to the run: %v", err)
	}
	// A scenario directory replaced by a link out of the store.
	if err := os.Symlink(outside, filepath.Join(store, "evil")); err != nil {
		t.Fatal(err)
	}
	if dir, err := createRunDir(store, "evil", "run"); err == nil {
		t.Errorf("createRunDir through a link out of the store made %s", dir)
	}
	if _, err := os.Stat(filepath.Join(outside, "run")); err == nil {
		t.Error("a run directory was made outside the store")
	}
	if _, err := createRunDir(store, "../outside", "run"); err == nil {
		t.Error("createRunDir accepted the name ../outside")
	}
}

// TestRunRefusesEscapingName: Run refuses a name that would leave the
// store before it writes anything.
func TestRunRefusesEscapingName(t *testing.T) {
	base := t.TempDir()
	store := filepath.Join(base, "a", "store")
	_, err := Run(context.Background(), Scenario{Name: "../../escape", Workload: "register"}, RunOptions{StoreDir: store})
	if !errors.Is(err, ErrInvalidScenario) || !strings.Contains(err.Error(), `scenario name "../../escape"`) {
		t.Fatalf("Run: %v, want ErrInvalidScenario naming the name", err)
	}
	for _, p := range []string{store, filepath.Join(base, "escape")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s exists after the refused run", p)
		}
	}
}

// TestParseScenarioGiven: a defaulted field the document sets to zero is
// refused by Validate; one it leaves out gets its default.
func TestParseScenarioGiven(t *testing.T) {
	for _, tc := range []struct {
		doc, want string
	}{
		{"workload: register\n", ""},
		{"workload: register\nduration: 0s\n", "--time-limit (scenario duration) must be > 0, got 0s"},
		{"workload: register\nkeys: 0\n", "--keys must be at least 1, got 0"},
		{"workload: register\nconcurrency: 0\n", "--concurrency must be between 1 and 1000, got 0"},
		{"workload: register\ntopology: {members: 0}\n", "--members (scenario topology.members) must be 1, 3 or 5, got 0"},
		{"target: kube\nworkload: pets\nkube: {apiservers: 0}\n", "--apiservers (scenario kube.apiservers) must be between 1 and 3"},
		{"workload: register\nduration: -1s\n", "--time-limit (scenario duration) must be > 0, got -1s"},
	} {
		s, err := ParseScenario([]byte(tc.doc))
		if err != nil {
			t.Fatalf("%q: %v", tc.doc, err)
		}
		s.Defaults()
		err = s.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.doc, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: %v, want %q", tc.doc, err, tc.want)
		}
	}
	if _, err := ParseScenario([]byte("workload: register\ntimeLimit: 3s\n")); err == nil || !strings.Contains(err.Error(), `unknown field "timeLimit"`) {
		t.Errorf("an unknown field: %v", err)
	}
}

// TestScenarioGeneratedNodes: scenario nodes and zones stand for a generated
// topology (as --nodes and --zones), replaced by the nodes themselves once
// defaulted; they are refused beside listed nodes, negative, or zones alone.
func TestScenarioGeneratedNodes(t *testing.T) {
	s, err := ParseScenario([]byte("workload: spread\nnodes: 12\nzones: 3\ntopology: {members: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	s.Defaults()
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(s.Topology.Nodes) != 12 || zonesOf(s.Topology) != 3 || s.Topology.Members != 1 || s.Nodes != 0 || s.Zones != 0 {
		t.Errorf("generated topology: %d nodes in %d zones, %d members, nodes/zones left %d/%d; want 12 in 3, 1 member, none left",
			len(s.Topology.Nodes), zonesOf(s.Topology), s.Topology.Members, s.Nodes, s.Zones)
	}
	for _, tc := range []struct{ doc, want string }{
		{"workload: pets\nnodes: 3\ntopology: {nodes: [{name: a}]}\n", "nodes and topology.nodes are both given"},
		{"workload: pets\nnodes: -3\n", "are counts"},
		{"workload: pets\nzones: 2\n", "zones is given without nodes"},
	} {
		s, err := ParseScenario([]byte(tc.doc))
		if err != nil {
			t.Fatalf("%q: %v", tc.doc, err)
		}
		s.Defaults()
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.doc, err, tc.want)
		}
	}
}
