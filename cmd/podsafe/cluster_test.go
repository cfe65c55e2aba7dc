package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// waitFile waits until path exists.
func waitFile(t *testing.T, path string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was not written within %v", path, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestClusterUpDataDir: a durable data directory belongs to one cluster up
// at a time, and to one membership. A second podsafe on it is told the pid
// of the first at once; after the first is killed (kill -9, no cleanup),
// starting it with other --members is refused naming the recorded members,
// and with its own it starts again.
func TestClusterUpDataDir(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	kc := filepath.Join(dir, "first.kubeconfig")
	first := exec.Command(os.Args[0], "cluster", "up", "--durable", "--data-dir", data, "--members", "1", "--nodes", "1", "--kubeconfig", kc)
	first.Env = append(os.Environ(), "PODSAFE_AS_MAIN=1")
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			first.Process.Kill()
			first.Wait()
		}
	})
	waitFile(t, kc, 60*time.Second)

	ctx := context.Background()
	kc2 := filepath.Join(dir, "second.kubeconfig")
	start := time.Now()
	out, code := run(ctx, "cluster", "up", "--durable", "--data-dir", data, "--members", "1", "--nodes", "1", "--kubeconfig", kc2)
	want := fmt.Sprintf("is in use by pid %d", first.Process.Pid)
	if code != exitUsage || !strings.Contains(out, want) || !strings.Contains(out, "--data-dir "+data) {
		t.Errorf("second cluster up on a data dir in use: exit %d, output %q; want exit %d and %q", code, out, exitUsage, want)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the refusal took %v", d)
	}

	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.Wait()
	killed = true

	for _, members := range []string{"3", "5"} {
		out, code = run(ctx, "cluster", "up", "--durable", "--data-dir", data, "--members", members, "--nodes", "1", "--kubeconfig", kc2)
		want = "--data-dir " + data + " holds a 1-member cluster (cp-0), not --members " + members + ": start it with --members 1"
		if code != exitUsage || !strings.Contains(out, want) {
			t.Errorf("cluster up --members %s on a 1-member data dir: exit %d, output %q; want exit %d and %q", members, code, out, exitUsage, want)
		}
	}

	// Its own membership starts it again: the refusals and the kill left
	// no lock behind.
	os.Remove(kc2)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan string, 1)
	go func() {
		out, code := run(runCtx, "cluster", "up", "--durable", "--data-dir", data, "--members", "1", "--nodes", "1", "--kubeconfig", kc2)
		done <- fmt.Sprintf("exit %d: %s", code, out)
	}()
	waitFile(t, kc2, 60*time.Second)
	cancel()
	select {
	case got := <-done:
		if !strings.HasPrefix(got, "exit 0:") {
			t.Errorf("cluster up on its own data dir: %s", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("cluster up did not stop")
	}
}

// TestBadClusterUpFlags: podsafe cluster up refuses the same counts.
func TestBadClusterUpFlags(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kc")
	up := func(args ...string) []string { return append([]string{"cluster", "up", "--kubeconfig", kc}, args...) }
	expectUsage(t, []usageCase{
		{"negative nodes", up("--nodes", "-1"), "--nodes must be 0 or more, got -1"},
		{"zones 0", up("--zones", "0"), "--zones must be at least 1, got 0"},
		{"more zones than nodes", up("--zones", "4", "--nodes", "3"), "--zones must be between 1 and the number of nodes (--nodes 3), got 4"},
		{"members 0", up("--members", "0"), "--members must be 1, 3 or 5, got 0"},
		{"time-scale 0", up("--time-scale", "0"), "--time-scale must be at least 1 and finite, got 0"},
		{"data-dir without durable", up("--data-dir", t.TempDir()), "add --durable"},
	})
}
