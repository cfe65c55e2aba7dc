package dirlock

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestAcquireTwiceInProcess: a second Acquire of a locked directory fails at
// once naming this pid, and succeeds after Release.
func TestAcquireTwiceInProcess(t *testing.T) {
	dir := t.TempDir()
	l, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = Acquire(dir)
	var inUse *InUseError
	if !errors.As(err, &inUse) || !errors.Is(err, ErrInUse) {
		t.Fatalf("second Acquire: %v, want an *InUseError", err)
	}
	if inUse.PID != os.Getpid() || !strings.Contains(err.Error(), fmt.Sprintf("in use by pid %d", os.Getpid())) {
		t.Errorf("second Acquire: %v, want pid %d", err, os.Getpid())
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("second Acquire took %v; it must not wait", d)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l, err = Acquire(dir)
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	l.Release()
}

// TestAcquireHeldByChild: a lock held by another process names its pid;
// when that process dies, the lock is free again.
func TestAcquireHeldByChild(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHold$")
	cmd.Env = append(os.Environ(), "DIRLOCK_HOLD="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("the holder said %q, %v", line, err)
	}
	_, err = Acquire(dir)
	var inUse *InUseError
	if !errors.As(err, &inUse) {
		t.Fatalf("Acquire of a directory another process holds: %v", err)
	}
	if inUse.PID != cmd.Process.Pid || !strings.Contains(err.Error(), fmt.Sprintf("in use by pid %d", cmd.Process.Pid)) {
		t.Errorf("Acquire: %v, want the holder's pid %d", err, cmd.Process.Pid)
	}
	cmd.Process.Kill() // as kill -9: no Release
	cmd.Wait()
	l, err := Acquire(dir)
	if err != nil {
		t.Fatalf("Acquire after the holder died: %v", err)
	}
	l.Release()
}

// TestHelperHold is the holder process of TestAcquireHeldByChild.
func TestHelperHold(t *testing.T) {
	dir := os.Getenv("DIRLOCK_HOLD")
	if dir == "" {
		t.Skip("a helper process")
	}
	if _, err := Acquire(dir); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	fmt.Println("ready")
	time.Sleep(time.Minute)
	os.Exit(0)
}
