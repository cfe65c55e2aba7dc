package fpprobe

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestKilledToolexecBuildLeavesTreeAlone: the failpoint build make
// test-failpoints runs (failpoint-toolexec, its own GOCACHE), SIGKILLed
// once it has begun rewriting podsafe's packages, leaves every source with
// a marker as it was and no file of failpoint-ctl's rewriting behind: the
// rewritten copies live in the build's temporary directory only.
//
// It needs the repository (git), make and the module cache or proxy; -short
// skips it. The build is the one test-failpoints runs later in make test,
// so its objects are not wasted; a flag that changes nothing (-D, for the
// probe package only) and differs per run makes sure at least this package
// is compiled, and so rewritten, even when the cache is warm.
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
	env := failpointEnv(t, root)

	before := markedSources(t, root)
	if len(before) == 0 {
		t.Fatal("no source with a failpoint marker found")
	}

	tmp := t.TempDir()
	nonce := strconv.FormatUint(rand.Uint64(), 16)
	cmd := exec.Command("go", "test", "-toolexec="+env["FAILPOINT_TOOLEXEC"], "-race", "-count=1",
		"-gcflags=github.com/podsafe/podsafe/nemesis/fpprobe=-D=/nonce"+nonce,
		"-run", "Failpoint", "./nemesis/")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOCACHE="+env["FAILPOINT_GOCACHE"], "TMPDIR="+tmp, "PODSAFE_FAILPOINTS=1")
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

	// Wait until toolexec has written a rewritten copy of a podsafe
	// package, then let it go on a little before the kill.
	rewritten := filepath.Join(tmp, "failpoint-toolexec", "github.com", "podsafe", "podsafe")
	deadline := time.After(5 * time.Minute)
	for started := false; !started; {
		select {
		case err := <-exited:
			t.Fatalf("the failpoint build ended (%v) before it rewrote a package:\n%s", err, out.String())
		case <-deadline:
			t.Fatalf("the failpoint build rewrote nothing in 5 minutes:\n%s", out.String())
		case <-time.After(20 * time.Millisecond):
			started = anyFile(rewritten)
		}
	}
	time.Sleep(time.Duration(rand.IntN(200)) * time.Millisecond)
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed = true
	if err := <-exited; err == nil {
		t.Fatalf("the failpoint build finished before the kill:\n%s", out.String())
	}

	after := markedSources(t, root)
	for path, sum := range before {
		if after[path] != sum {
			t.Errorf("%s changed under the killed failpoint build", path)
		}
	}
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if strings.Contains(d.Name(), "__failpoint_stash__") || d.Name() == "binding__failpoint_binding__.go" {
			t.Errorf("failpoint-rewritten file in the tree: %s", path)
		}
		return nil
	})
}

// failpointEnv installs the pinned failpoint-toolexec and returns the
// Makefile's FAILPOINT_TOOLEXEC and FAILPOINT_GOCACHE.
func failpointEnv(t *testing.T, root string) map[string]string {
	t.Helper()
	cmd := exec.Command("make", "-s", "--no-print-directory", "failpoint-env")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "MAKEFLAGS=")
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("make failpoint-env: %v", err)
	}
	env := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			env[k] = v
		}
	}
	if env["FAILPOINT_TOOLEXEC"] == "" || env["FAILPOINT_GOCACHE"] == "" {
		t.Fatalf("make failpoint-env printed %q", b)
	}
	return env
}

// markedSources hashes every tracked Go file that holds a failpoint marker:
// the files a rewriting build would touch.
func markedSources(t *testing.T, root string) map[string][32]byte {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z", "--", "*.go")
	cmd.Dir = root
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	sums := map[string][32]byte{}
	for _, rel := range strings.Split(string(b), "\x00") {
		if rel == "" || strings.HasPrefix(rel, "oracle/") {
			continue
		}
		src, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			continue // removed from the worktree by someone else: not ours to judge
		}
		if bytes.Contains(src, []byte("failpoint.Inject")) {
			sums[rel] = sha256.Sum256(src)
		}
	}
	return sums
}

// anyFile reports whether dir holds a regular file at any depth.
func anyFile(dir string) bool {
	found := false
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			found = true
			return filepath.SkipAll
		}
		return nil
	})
	return found
}
