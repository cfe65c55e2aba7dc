package fpprobe

import (
	"bytes"
	"crypto/sha256"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestKilledToolexecBuildLeavesTreeAlone: make test-failpoints, SIGKILLed
// once its failpoint build has begun rewriting podsafe's packages, leaves
// the tree as it was, byte for byte and with no file added: the toolexec
// (internal/fptoolexec) rewrites copies in the build's temporary directory
// only, so nothing needs restoring after a kill. make bugzoo builds the same
// way.
//
// It runs on a copy of the committed tree (git archive HEAD), so that the
// edits of whoever works in the checkout meanwhile are not taken for the
// build's. It needs git, make and the module cache or proxy; -short skips
// it. Each run compiles podsafe's packages afresh (the copy's path is new),
// but the kill comes as soon as the first is rewritten.
func TestKilledToolexecBuildLeavesTreeAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds podsafe through failpoint-toolexec")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		t.Skipf("not a git checkout (%v): no tracked files to guard", err)
	}
	tree, tmp := t.TempDir(), t.TempDir()
	archive := exec.Command("sh", "-c", `git -C "$1" archive HEAD | tar -x -C "$2"`, "sh", root, tree)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("copying the committed tree: %v\n%s", err, out)
	}
	before := digest(t, tree)

	cmd := exec.Command("make", "-s", "--no-print-directory", "test-failpoints")
	cmd.Dir = tree
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "MAKEFLAGS=", "MAKELEVEL=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	killed := false
	defer func() {
		if !killed {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	}()

	// Wait until the toolexec has written a rewritten copy of a podsafe
	// source, then let the build go on a little before the kill.
	deadline := time.After(5 * time.Minute)
	for started := false; !started; {
		select {
		case err := <-exited:
			t.Fatalf("make test-failpoints ended (%v) before it rewrote a package:\n%s", err, out.String())
		case <-deadline:
			t.Fatalf("make test-failpoints rewrote nothing in 5 minutes:\n%s", out.String())
		case <-time.After(5 * time.Millisecond):
			started = rewriting(tmp)
		}
	}
	time.Sleep(time.Duration(rand.IntN(500)) * time.Millisecond)
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed = true
	if err := <-exited; err == nil {
		t.Fatalf("make test-failpoints finished before the kill:\n%s", out.String())
	}

	after := digest(t, tree)
	for path, sum := range before {
		if got, ok := after[path]; !ok {
			t.Errorf("%s removed by the killed failpoint build", path)
		} else if got != sum {
			t.Errorf("%s changed by the killed failpoint build", path)
		}
	}
	for path := range after {
		if _, ok := before[path]; !ok {
			t.Errorf("%s added by the killed failpoint build", path)
		}
	}
}

// digest hashes every file under dir, by path relative to it.
func digest(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	sums := map[string][32]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		sums[rel] = sha256.Sum256(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sums
}

// rewriting reports whether the failpoint build's toolexec has written a
// rewritten copy of a podsafe source somewhere under tmp (in a directory
// podsafe-failpoint-*, which lives as long as one compile).
func rewriting(tmp string) bool {
	found := false
	_ = filepath.WalkDir(tmp, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && strings.HasSuffix(path, ".go") &&
			strings.HasPrefix(filepath.Base(filepath.Dir(path)), "podsafe-failpoint-") {
			found = true
			return filepath.SkipAll
		}
		return nil
	})
	return found
}
