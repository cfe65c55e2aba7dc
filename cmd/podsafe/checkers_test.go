package main

import (
	"context"
	"strings"
	"testing"
)

// TestCheckersFlag: --checkers (a scenario's checkers) chooses the checkers
// that judge the run, and an unknown name is a usage error.
func TestCheckersFlag(t *testing.T) {
	out, code := run(context.Background(), "test", "--store", t.TempDir(), "--checkers", "store-linearizability,no-such-checker")
	if code != exitUsage || !strings.Contains(out, `unknown checker "no-such-checker"`) {
		t.Fatalf("exit %d, want 64 naming the unknown checker:\n%s", code, out)
	}
	out, code = run(context.Background(), "test", "--store", t.TempDir(), "--checkers", "phases,phases")
	if code != exitUsage || !strings.Contains(out, `checker "phases" is named twice`) {
		t.Fatalf("exit %d, want 64 naming the repeated checker:\n%s", code, out)
	}
	store := t.TempDir()
	out, code = run(context.Background(), "test", "--store", store, "--workload", "register", "--nemesis", "none",
		"--time-limit", "2s", "--seed", "9", "--checkers", "store-linearizability")
	if code != exitValid {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if !strings.Contains(out, "store-linearizability") || strings.Contains(out, "store-watch-order") {
		t.Errorf("the run was judged by other checkers than the one chosen:\n%s", out)
	}
	if !strings.Contains(out, "--checkers store-linearizability") {
		t.Errorf("the rerun command drops --checkers:\n%s", out)
	}
	// The choice is in the history: a re-check applies it too.
	again, code := run(context.Background(), "check", store+"/latest")
	if code != exitValid || strings.Contains(again, "store-watch-order") {
		t.Errorf("check: exit %d:\n%s", code, again)
	}
}
