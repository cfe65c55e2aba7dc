package main

import (
	"bufio"
	"compress/gzip"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/podsafe/podsafe/history"
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
	// A killed run is never plain Ok: its history has no closing record.
	if code != exitUnknown || !strings.Contains(out, "verdict: Unknown (incomplete run)") {
		t.Errorf("check of a correct run's partial history: exit %d, want 2 and an incomplete-run verdict:\n%s", code, out)
	}
	// The counts are the history's, not zeros from a run that never
	// reported.
	if strings.Contains(out, "ops: ok 0,") {
		t.Errorf("the check counts no completed operation in a history of %d lines:\n%s", lines(hist), out)
	}
	res := read(filepath.Join(store, "latest", "results.json"))
	if !strings.Contains(res, `"incomplete": true`) {
		t.Errorf("results.json does not say the run is incomplete:\n%s", res)
	}
	if junit := read(filepath.Join(store, "latest", "junit.xml")); !strings.Contains(junit, "IncompleteRun") {
		t.Errorf("junit.xml does not report the incomplete run:\n%.2000s", junit)
	}
	if html := read(filepath.Join(store, "latest", "report.html")); !strings.Contains(html, "incomplete run") {
		t.Error("report.html does not label the incomplete run")
	}
}

// TestInterruptedRunChecksWhatRan: a first SIGINT stops the workload and
// the faults and the run checks what ran, prints its verdict and the
// podsafe check command; the history says the run was interrupted.
func TestInterruptedRunChecksWhatRan(t *testing.T) {
	store := t.TempDir()
	cmd := exec.Command(os.Args[0], "test", "--workload", "register", "--nemesis", "partition",
		"--nemesis-interval", "5m", "--time-limit", "10m", "--store", store, "--seed", "11")
	cmd.Env = append(os.Environ(), "PODSAFE_AS_MAIN=1")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := false
	t.Cleanup(func() {
		if !done {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	hist := filepath.Join(store, "latest", "history.jsonl")
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(read(hist), `"kind":"complete"`) || lines(hist) < 200 {
		if time.Now().After(deadline) {
			t.Fatalf("the run wrote only %d history lines", lines(hist))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	done = true
	out := stdout.String()
	if err != nil {
		t.Fatalf("interrupted run: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	for _, want := range []string{"verdict: Ok (interrupted)", "podsafe check " + filepath.Join(store, "register-partition"), "Everything looks good"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "too short") {
		t.Errorf("an interrupted run warns that its time limit was too short:\n%s", out)
	}
	if !strings.Contains(stderr.String(), "interrupted: stopping the workload") {
		t.Errorf("stderr does not say what the interrupt does:\n%s", stderr.String())
	}
	// The run finished: its history is compressed now.
	if h := readHistory(t, filepath.Join(store, "latest")); !strings.Contains(h, `"kind":"end"`) || !strings.Contains(h, `"interrupted":true`) {
		t.Error("the history's closing record does not say the run was interrupted")
	}
	// Checked again, the history says the same.
	again, code := run(context.Background(), "check", filepath.Join(store, "latest"))
	if code != exitValid || !strings.Contains(again, "verdict: Ok (interrupted)") {
		t.Errorf("check of the interrupted run: exit %d:\n%s", code, again)
	}
}

// TestSecondInterruptAborts: a second SIGINT abandons the run at once.
func TestSecondInterruptAborts(t *testing.T) {
	store := t.TempDir()
	cmd := exec.Command(os.Args[0], "test", "--workload", "register", "--nemesis", "none",
		"--time-limit", "10m", "--store", store, "--seed", "12")
	cmd.Env = append(os.Environ(), "PODSAFE_AS_MAIN=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	hist := filepath.Join(store, "latest", "history.jsonl")
	deadline := time.Now().Add(2 * time.Minute)
	for lines(hist) < 100 {
		if time.Now().After(deadline) {
			t.Fatalf("the run wrote only %d history lines", lines(hist))
		}
		time.Sleep(50 * time.Millisecond)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	_ = cmd.Process.Signal(os.Interrupt)
	_ = cmd.Process.Signal(os.Interrupt)
	select {
	case <-exited:
	case <-time.After(2 * time.Minute):
		t.Fatal("podsafe test did not end after two interrupts")
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

// readHistory returns the history of the run in dir, plain or compressed
// (decompressed), or "" when it has none.
func readHistory(t *testing.T, dir string) string {
	t.Helper()
	path := history.Locate(filepath.Join(dir, "history.jsonl"))
	if !strings.HasSuffix(path, history.CompressedExt) {
		return read(path)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return string(b)
}
