package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBadTestFlags: every out-of-range flag of podsafe test is a usage error
// naming the flag and its range, never a silent default.
func TestBadTestFlags(t *testing.T) {
	store := t.TempDir()
	test := func(args ...string) []string { return append([]string{"test", "--store", store}, args...) }
	expectUsage(t, []usageCase{
		{"time-limit 0", test("--time-limit", "0"), "--time-limit (scenario duration) must be > 0, got 0s"},
		{"negative time-limit", test("--time-limit", "-5s"), "--time-limit (scenario duration) must be > 0, got -5s"},
		{"members 0", test("--members", "0"), "--members (scenario topology.members) must be 1, 3 or 5, got 0"},
		{"negative nodes", test("--nodes", "-3"), "--nodes must be 0 or more, got -3"},
		{"more zones than nodes", test("--zones", "10", "--nodes", "3"), "--zones must be between 1 and the number of nodes (--nodes 3), got 10"},
		{"zones 0", test("--zones", "0"), "--zones must be at least 1, got 0"},
		{"keys 0", test("--keys", "0"), "--keys must be at least 1, got 0"},
		{"negative keys", test("--keys", "-1"), "--keys must be at least 1, got -1"},
		{"nemesis-interval 0", test("--nemesis-interval", "0"), "--nemesis-interval (scenario nemesisInterval) must be > 0, got 0s"},
		{"concurrency 0", test("--concurrency", "0"), "--concurrency must be between 1 and 1000, got 0"},
		{"negative concurrency", test("--concurrency", "-4"), "--concurrency must be between 1 and 1000, got -4"},
		{"time-scale 0", test("--time-scale", "0"), "--time-scale (scenario timeScale) must be at least 1 and finite, got 0"},
		{"negative time-scale", test("--time-scale", "-1"), "--time-scale (scenario timeScale) must be at least 1 and finite, got -1"},
		{"NaN time-scale", test("--time-scale", "NaN"), "--time-scale (scenario timeScale) must be at least 1 and finite, got NaN"},
		{"infinite time-scale", test("--time-scale", "Inf"), "--time-scale (scenario timeScale) must be at least 1 and finite, got +Inf"},
		{"test-count 0", test("--test-count", "0"), "--test-count must be at least 1, got 0"},
		{"negative rate", test("--rate", "-1"), "--rate (scenario rate) must be operations per second, 0 (no bound) or more and finite, got -1"},
		{"NaN rate", test("--rate", "NaN"), "--rate (scenario rate) must be operations per second, 0 (no bound) or more and finite, got NaN"},
		{"infinite rate", test("--rate", "Inf"), "--rate (scenario rate) must be operations per second, 0 (no bound) or more and finite, got +Inf"},
		{"apiservers 0", test("--target", "kube", "--apiservers", "0"), "--apiservers (scenario kube.apiservers) must be between 1 and 3"},
	})
}

func writeScenario(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestBadScenarioFiles: a scenario file gets the flags' validation, naming
// the flag and the field; a field given as zero is refused, not defaulted.
func TestBadScenarioFiles(t *testing.T) {
	dir, store := t.TempDir(), t.TempDir()
	file := func(name, body string) []string {
		return []string{"test", "--store", store, "--scenario", writeScenario(t, dir, name, "workload: register\n"+body)}
	}
	expectUsage(t, []usageCase{
		{"duration 0", file("duration", "duration: 0s\n"), "--time-limit (scenario duration) must be > 0, got 0s"},
		{"members 0", file("members", "topology: {members: 0}\n"), "--members (scenario topology.members) must be 1, 3 or 5, got 0"},
		{"nemesisInterval 0", file("interval", "nemesisInterval: 0s\n"), "--nemesis-interval (scenario nemesisInterval) must be > 0, got 0s"},
		{"keys 0", file("keys", "keys: 0\n"), "--keys must be at least 1, got 0"},
		{"concurrency 0", file("concurrency", "concurrency: 0\n"), "--concurrency must be between 1 and 1000, got 0"},
		{"timeScale 0", file("timescale", "timeScale: 0\n"), "--time-scale (scenario timeScale) must be at least 1 and finite, got 0"},
		{"negative timeScale", file("timescale-neg", "timeScale: -2\n"), "--time-scale (scenario timeScale) must be at least 1 and finite, got -2"},
		{"negative rate", file("rate-neg", "rate: -5\n"), "--rate (scenario rate) must be operations per second, 0 (no bound) or more and finite, got -5"},
		{"NaN rate", file("rate-nan", "rate: .nan\n"), "rate-nan.yaml: error converting YAML to JSON: json: unsupported value: NaN"},
		{"invalid node name", file("nodename", "topology:\n  members: 1\n  nodes: [{name: Node_1}]\n"),
			`topology.nodes[0].name "Node_1" is not a valid node name (a DNS-1123 subdomain)`},
		{"node name too long", file("nodelong", "topology:\n  members: 1\n  nodes: [{name: "+strings.Repeat("n", 254)+"}]\n"),
			"is not a valid node name (a DNS-1123 subdomain): must be no more than 253 characters"},
		{"duplicate node names", file("nodedup", "topology:\n  members: 1\n  nodes: [{name: node-a}, {name: node-b}, {name: node-a}]\n"),
			`topology.nodes[2].name "node-a" is the name of topology.nodes[0] too`},
		{"invalid node label", file("nodelabel", "topology:\n  members: 1\n  nodes: [{name: node-a, labels: {zone: 'a b'}}]\n"),
			`topology.nodes[0].labels[zone]: value "a b"`},
		{"name with a slash", file("slash", "name: a/b\n"), `scenario name "a/b" has '/'`},
		{"name latest", file("latest", "name: latest\n"), `scenario name "latest" is the store's link to the newest run`},
		{"hidden name", file("hidden", "name: .x\n"), `scenario name ".x" must start with a letter or a digit`},
		{"long name", file("long", "name: "+strings.Repeat("a", 101)+"\n"), "characters long; at most 100"},
	})
}

// TestScenarioNameEscape: a scenario named ../../../escape is refused as a
// usage error and writes nothing outside (or inside) the store.
func TestScenarioNameEscape(t *testing.T) {
	base := t.TempDir()
	store := filepath.Join(base, "a", "b", "store")
	path := writeScenario(t, base, "escape", "name: ../../../escape\nworkload: register\nduration: 1s\n")
	out, code := run(context.Background(), "test", "--scenario", path, "--store", store)
	if code != exitUsage || !strings.Contains(out, `scenario name "../../../escape" must start with a letter or a digit`) {
		t.Fatalf("exit %d, output %q; want exit %d refusing the name", code, out, exitUsage)
	}
	for _, p := range []string{filepath.Join(base, "escape"), filepath.Join(store, "..", "..", "..", "escape"), store} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s exists after the refused run", p)
		}
	}
}

// TestScenarioFileDefaults: fields a scenario file leaves out still get
// their defaults, and nodes it lists without members are kept.
func TestScenarioFileDefaults(t *testing.T) {
	path := writeScenario(t, t.TempDir(), "nodes", "workload: register\ntopology:\n  nodes: [{name: alpha}, {name: beta}]\n")
	cmd, f := newTestCommand()
	if err := cmd.Flags().Parse([]string{"--scenario", path}); err != nil {
		t.Fatal(err)
	}
	s, err := scenarioFromFlags(cmd, f)
	if err != nil {
		t.Fatal(err)
	}
	s.Defaults()
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if s.Topology.Members != 3 || len(s.Topology.Nodes) != 2 || s.Topology.Nodes[0].Name != "alpha" {
		t.Errorf("topology %+v: want 3 members and the file's nodes alpha, beta", s.Topology)
	}
	if s.Duration.String() != "30s" || s.NemesisInterval.String() != "5s" || s.Keys != 5 || s.Concurrency != 6 || s.TimeScale != 1 {
		t.Errorf("defaults: duration %s, nemesis interval %s, keys %d, concurrency %d, time scale %g; want 30s, 5s, 5, 6, 1",
			s.Duration, s.NemesisInterval, s.Keys, s.Concurrency, s.TimeScale)
	}
}
