package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// doctor rewrites dir's history, plain, keeping only the lines keep
// accepts; the compressed history of the finished run goes.
func doctor(t *testing.T, dir string, keep func(line string) bool) {
	t.Helper()
	path := filepath.Join(dir, "history.jsonl")
	var out []string
	dropped := 0
	for _, l := range strings.SplitAfter(readHistory(t, dir), "\n") {
		if l == "" {
			continue
		}
		if keep(l) {
			out = append(out, l)
		} else {
			dropped++
		}
	}
	if dropped == 0 {
		t.Fatalf("doctoring %s dropped no line", path)
	}
	if err := os.WriteFile(path, []byte(strings.Join(out, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(path + ".gz")
}

// runDir runs podsafe test with args into a fresh store, requires a valid
// verdict, and returns the run's directory.
func runDir(t *testing.T, args ...string) string {
	t.Helper()
	store := t.TempDir()
	out, code := run(context.Background(), append([]string{"test", "--store", store}, args...)...)
	if code != exitValid {
		t.Fatalf("podsafe test %v: exit %d:\n%s", args, code, out)
	}
	dir, err := filepath.EvalSymlinks(filepath.Join(store, "latest"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestDoctoredHistoriesAreNeverValid: a history stripped of what its
// workload always records checks as Unknown (exit 2) naming what is
// missing, never as Ok.
func TestDoctoredHistoriesAreNeverValid(t *testing.T) {
	t.Run("register without completions", func(t *testing.T) {
		dir := runDir(t, "--workload", "register", "--nemesis", "none", "--time-limit", "2s", "--seed", "5")
		doctor(t, dir, func(l string) bool { return !strings.Contains(l, `"kind":"complete"`) })
		out, code := run(context.Background(), "check", dir)
		if code != exitUnknown || !strings.Contains(out, "nothing to judge") || !strings.Contains(out, "ops: ok 0, fail 0, unknown") {
			t.Errorf("check: exit %d, want 2 with nothing to judge:\n%s", code, out)
		}
	})
	t.Run("pets without the ledger", func(t *testing.T) {
		dir := runDir(t, "--workload", "pets", "--nemesis", "none", "--time-limit", "4s", "--seed", "5")
		doctor(t, dir, func(l string) bool { return !strings.Contains(l, `"kind":"ledger"`) })
		out, code := run(context.Background(), "check", dir)
		if code != exitUnknown || !strings.Contains(out, "at-most-one") || !strings.Contains(out, "holds no container run of a pet") {
			t.Errorf("check: exit %d, want 2 naming the missing ledger:\n%s", code, out)
		}
	})
}
