package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets a test run this binary as the podsafe command itself, so a
// test can kill a real podsafe process.
func TestMain(m *testing.M) {
	if os.Getenv("PODSAFE_AS_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestKilledRunLeavesCheckableHistory: a podsafe test process killed with
// SIGKILL in the middle of its run leaves a history on disk that podsafe
// check reads (as a truncated history) to a verdict.
func TestKilledRunLeavesCheckableHistory(t *testing.T) {
	store := t.TempDir()
	cmd := exec.Command(os.Args[0], "test", "--workload", "register", "--nemesis", "partition",
		"--nemesis-interval", "300ms", "--time-limit", "60s", "--store", store, "--seed", "7")
	cmd.Env = append(os.Environ(), "PODSAFE_AS_MAIN=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	hist := filepath.Join(store, "latest", "history.jsonl")
	deadline := time.Now().Add(60 * time.Second)
	for lines(hist) < 2000 || !strings.Contains(read(hist), `"kind":"nemesis"`) {
		if time.Now().After(deadline) {
			t.Fatalf("the run wrote only %d history lines", lines(hist))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed = true
	_ = cmd.Wait()
	if _, err := os.Stat(filepath.Join(store, "latest", "results.json")); err == nil {
		t.Fatal("results.json exists: the run was not killed midway")
	}
	out, code := run(context.Background(), "check", filepath.Join(store, "latest"))
	if code == exitCrashed || code == exitUsage || !strings.Contains(out, "verdict:") {
		t.Fatalf("check of the killed run's history: exit %d:\n%s", code, out)
	}
	if code != exitValid {
		t.Errorf("check of a correct run's partial history: exit %d, want 0:\n%s", code, out)
	}
}

func lines(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		n++
	}
	return n
}

func read(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}
