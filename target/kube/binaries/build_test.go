package binaries

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeGoScript stands in for the go command: the compiler is not what these
// tests test, the cache around it is. It answers `go env`, `go list -m
// -versions` and `go mod download -json` from fixtures under $FAKE_GO_ROOT,
// and `go build` writes small scripts where the binaries go. Every call is
// appended to $FAKE_GO_ROOT/calls with the environment Build set. A call
// whose arguments contain $FAKE_GO_FAIL fails; one containing $FAKE_GO_HANG
// writes a half binary and hangs.
const fakeGoScript = `#!/bin/sh
echo "$* | GOFLAGS=$GOFLAGS GOWORK=$GOWORK CGO_ENABLED=$CGO_ENABLED GOPROXY=$GOPROXY" >> "$FAKE_GO_ROOT/calls"
if [ -n "$FAKE_GO_FAIL" ]; then case "$*" in *"$FAKE_GO_FAIL"*) echo "fake go: $FAKE_GO_FAIL: compile error" >&2; exit 1 ;; esac; fi
case "$1 $2" in
"env GOFLAGS") printf '%s\n%s\n' "-buildvcs=false -mod=vendor" "go1.26.8-fake" ;;
"list -m")
	case "$4" in
	k8s.io/kubernetes) echo "$4 v1.13.0 v1.36.3 v1.37.2" ;;
	go.etcd.io/etcd/server/v3) echo "$4 v3.6.16 v3.7.0 v3.7.3" ;;
	go.etcd.io/etcd/etcdctl/v3) echo "$4 v3.6.16 v3.7.3" ;;
	*) echo "go: module $4: not found" >&2; exit 1 ;;
	esac ;;
"mod download")
	mod="${4%@*}"; ver="${4#*@}"; dir="$FAKE_GO_ROOT/mod/$mod@$ver"
	if [ ! -d "$dir" ]; then
		printf '{"Path":"%s","Version":"%s","Error":"%s: not available"}\n' "$mod" "$ver" "$4"; exit 1
	fi
	printf '{"Path":"%s","Version":"%s","Info":"%s/info","GoMod":"%s/go.mod","Dir":"%s"}\n' "$mod" "$ver" "$dir" "$dir" "$dir" ;;
"mod tidy") : > go.sum ;;
"build -trimpath")
	[ "$4" = "-o" ] || { echo "fake go: unexpected build arguments: $*" >&2; exit 2; }
	flags="$3"; out="$5"; shift 5
	for p in "$@"; do
		f="$out"; case "$out" in */) f="$out${p##*/}" ;; esac
		case "$p" in go.etcd.io/*) ;; *) [ -f go.sum ] || { echo "fake go: build before tidy" >&2; exit 2; } ;; esac
		if [ -n "$FAKE_GO_HANG" ]; then case "$p" in *"$FAKE_GO_HANG"*) echo half > "$f"; sleep 60; exit 1 ;; esac; fi
		printf '#!/bin/sh\necho "%s %s"\n' "$p" "$flags" > "$f"; chmod +x "$f"
	done ;;
*) echo "fake go: unexpected command: $*" >&2; exit 2 ;;
esac
`

// fakeGo writes the fake go command and its module fixtures and returns its
// path. Kubernetes v1.37.2 names etcd 3.7.0 and v1.36.3 names 3.6.0.
func fakeGo(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	t.Setenv("FAKE_GO_ROOT", root)
	t.Setenv("FAKE_GO_FAIL", "")
	t.Setenv("FAKE_GO_HANG", "")
	t.Setenv("GOPROXY", "https://proxy.example")
	for _, m := range []struct{ dir, gomod, deps string }{
		{"k8s.io/kubernetes@v1.37.2", releaseGoMod, dependenciesYAML},
		{"k8s.io/kubernetes@v1.36.3", releaseGoMod, strings.ReplaceAll(dependenciesYAML, "3.7.0", "3.6.0")},
		{"k8s.io/kubernetes@v1.13.0", releaseGoMod, ""}, // older than build/dependencies.yaml
		{"go.etcd.io/etcd/server/v3@v3.7.3", "module go.etcd.io/etcd/server/v3\n\ngo 1.26.0\n", ""},
		{"go.etcd.io/etcd/server/v3@v3.6.16", "module go.etcd.io/etcd/server/v3\n\ngo 1.24.0\n", ""},
	} {
		dir := filepath.Join(root, "mod", m.dir)
		writeFile(t, filepath.Join(dir, "go.mod"), m.gomod)
		writeFile(t, filepath.Join(dir, "info"), `{"Version":"v0","Time":"2026-10-27T12:01:04Z"}`)
		if m.deps != "" {
			writeFile(t, filepath.Join(dir, "build", "dependencies.yaml"), m.deps)
		}
	}
	path := filepath.Join(root, "go")
	if err := os.WriteFile(path, []byte(fakeGoScript), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// calls returns the fake go's calls so far.
func calls(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(os.Getenv("FAKE_GO_ROOT"), "calls"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(b), "\n"), "\n")
}

func builds(all []string) (n int) {
	for _, c := range all {
		if strings.HasPrefix(c, "build ") {
			n++
		}
	}
	return n
}

func TestBuildThenReuse(t *testing.T) {
	goCmd := fakeGo(t)
	cache := t.TempDir()
	var log strings.Builder
	p, err := Build(context.Background(), Options{CacheDir: cache, Go: goCmd, Log: &log})
	if err != nil {
		t.Fatalf("Build: %v\nlog:\n%s", err, log.String())
	}
	dir := filepath.Join(cache, "k8s-v1.37.2_etcd-v3.7.3")
	if p.Dir != dir || p.Reused || p.Versions != DefaultVersions() {
		t.Errorf("Build = %+v, want a fresh build of %v in %s", p, DefaultVersions(), dir)
	}
	m, err := readManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Recipe != Recipe || m.Kubernetes != "v1.37.2" || m.Etcd != "v3.7.3" || m.Go != "go1.26.8-fake" || len(m.Binaries) != 4 {
		t.Errorf("manifest = %+v", m)
	}
	for name, path := range map[string]string{EtcdBinary: p.Etcd, KubeAPIServerBinary: p.KubeAPIServer, KubeSchedulerBinary: p.KubeScheduler, KubeControllerManagerBinary: p.KubeControllerManager} {
		if path != filepath.Join(dir, "bin", name) {
			t.Errorf("%s path = %s", name, path)
		}
		sum, err := hashFile(path)
		if err != nil || sum != m.Binaries[name].SHA256 {
			t.Errorf("%s sha256 = %s, %v; manifest says %s", name, sum, err, m.Binaries[name].SHA256)
		}
	}
	c := calls(t)
	if builds(c) != 2 {
		t.Errorf("go build ran %d times, want 2 (etcd, then the three Kubernetes commands):\n%s", builds(c), strings.Join(c, "\n"))
	}
	for _, call := range c {
		if strings.HasPrefix(call, "build ") || strings.HasPrefix(call, "mod tidy") {
			for _, want := range []string{"GOFLAGS=-buildvcs=false -mod=mod ", "GOWORK=off", "GOPROXY=https://proxy.example"} {
				if !strings.Contains(call, want) {
					t.Errorf("go call %q lacks %s", call, want)
				}
			}
		}
		if strings.HasPrefix(call, "build ") && !strings.Contains(call, "CGO_ENABLED=0") {
			t.Errorf("go build %q lacks CGO_ENABLED=0", call)
		}
	}
	// The wrappers stay beside the binaries, recording what went in.
	b, err := os.ReadFile(filepath.Join(dir, "src", "kubernetes", "go.mod"))
	if err != nil || !strings.Contains(string(b), "k8s.io/client-go => k8s.io/client-go v0.37.2") {
		t.Errorf("kubernetes wrapper go.mod: %v\n%s", err, b)
	}

	// A second Build reuses the cache without running go at all.
	start := time.Now()
	p2, err := Build(context.Background(), Options{CacheDir: cache, Go: goCmd, Versions: Versions{Kubernetes: "1.37.2", Etcd: "3.7.3"}})
	if err != nil || !p2.Reused || p2.KubeAPIServer != p.KubeAPIServer {
		t.Fatalf("second Build = %+v, %v; want the cached build", p2, err)
	}
	if n := len(calls(t)); n != len(c) {
		t.Errorf("the cached Build ran go %d times", n-len(c))
	}
	t.Logf("cache hit in %s", time.Since(start))
	if _, err := Build(context.Background(), Options{CacheDir: cache, Go: goCmd, Verify: true}); err != nil {
		t.Errorf("verified reuse: %v", err)
	}
}

func TestBuildRebuildsIncompleteCache(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(t *testing.T, dir string)
	}{
		{"no manifest", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, ManifestFile)); err != nil {
				t.Fatal(err)
			}
		}},
		{"truncated binary", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "bin", KubeAPIServerBinary), []byte("#!"), 0o755); err != nil {
				t.Fatal(err)
			}
		}},
		{"missing binary", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "bin", EtcdBinary)); err != nil {
				t.Fatal(err)
			}
		}},
		{"manifest of an older recipe", func(t *testing.T, dir string) {
			m, err := readManifest(dir)
			if err != nil {
				t.Fatal(err)
			}
			m.Recipe--
			if err := writeManifest(dir, m); err != nil {
				t.Fatal(err)
			}
		}},
		{"manifest of other versions", func(t *testing.T, dir string) {
			m, err := readManifest(dir)
			if err != nil {
				t.Fatal(err)
			}
			m.Etcd = "v3.6.16"
			if err := writeManifest(dir, m); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			goCmd := fakeGo(t)
			cache := t.TempDir()
			p, err := Build(context.Background(), Options{CacheDir: cache, Go: goCmd})
			if err != nil {
				t.Fatal(err)
			}
			tc.spoil(t, p.Dir)
			before := builds(calls(t))
			p2, err := Build(context.Background(), Options{CacheDir: cache, Go: goCmd})
			if err != nil {
				t.Fatal(err)
			}
			if p2.Reused || builds(calls(t)) != before+2 {
				t.Errorf("Build after %s: reused=%v, %d go builds; want a rebuild", tc.name, p2.Reused, builds(calls(t))-before)
			}
			if _, ok := reuse(p2.Dir, DefaultVersions(), true); !ok {
				t.Errorf("the rebuilt cache is not complete")
			}
		})
	}
}

func TestBuildRemovesStaleBuildDirs(t *testing.T) {
	goCmd := fakeGo(t)
	cache := t.TempDir()
	// What a build killed by SIGKILL leaves: a temp dir with some binaries.
	stale := filepath.Join(cache, ".build-k8s-v1.37.2_etcd-v3.7.3-123")
	writeFile(t, filepath.Join(stale, "bin", EtcdBinary), "half")
	other := filepath.Join(cache, ".build-k8s-v1.36.3_etcd-v3.6.16-456")
	writeFile(t, filepath.Join(other, "bin", EtcdBinary), "another version's build")
	if _, err := Build(context.Background(), Options{CacheDir: cache, Go: goCmd}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale build dir %s left: %v", stale, err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("the build dir of other versions was removed: %v", err)
	}
}

func TestBuildFailureLeavesNothing(t *testing.T) {
	goCmd := fakeGo(t)
	cache := t.TempDir()
	t.Setenv("FAKE_GO_FAIL", "k8s.io/kubernetes/cmd/kube-apiserver")
	_, err := Build(context.Background(), Options{CacheDir: cache, Go: goCmd})
	if err == nil || !strings.Contains(err.Error(), "building kubernetes v1.37.2") || !strings.Contains(err.Error(), "compile error") {
		t.Fatalf("Build with a failing compile: err = %v", err)
	}
	assertOnlyLocks(t, cache)
	t.Setenv("FAKE_GO_FAIL", "")
	if p, err := Build(context.Background(), Options{CacheDir: cache, Go: goCmd}); err != nil || p.Reused {
		t.Errorf("Build after a failed one = %+v, %v; want a fresh build", p, err)
	}
}

func TestBuildCancelledLeavesNothing(t *testing.T) {
	goCmd := fakeGo(t)
	cache := t.TempDir()
	t.Setenv("FAKE_GO_HANG", "kube-scheduler")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := Build(ctx, Options{CacheDir: cache, Go: goCmd})
		done <- err
	}()
	// Cancel once the hanging compile has written its half binary.
	for {
		if m, _ := filepath.Glob(filepath.Join(cache, ".build-*", "bin", KubeSchedulerBinary)); len(m) > 0 {
			break
		}
		if time.Since(start) > 20*time.Second {
			t.Fatal("the fake build never reached kube-scheduler")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled Build: err = %v, want context.Canceled", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Build did not return after cancel (the hanging go was not killed)")
	}
	assertOnlyLocks(t, cache)
}

// assertOnlyLocks fails unless the cache holds nothing but lock files.
func assertOnlyLocks(t *testing.T, cache string) {
	t.Helper()
	entries, err := os.ReadDir(cache)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".lock") {
			t.Errorf("cache holds %s after a failed build", e.Name())
		}
	}
}

func TestBuildUnservedVersion(t *testing.T) {
	goCmd := fakeGo(t)
	cache := t.TempDir()
	for _, tc := range []struct {
		name string
		v    Versions
		want []string
	}{
		{"kubernetes", Versions{Kubernetes: "v1.99.0"}, []string{"k8s.io/kubernetes v1.99.0", "not served", "v1.36.3 v1.37.2"}},
		{"kubernetes with etcd", Versions{Kubernetes: "v1.99.0", Etcd: "v3.7.3"}, []string{"k8s.io/kubernetes v1.99.0", "v1.37.2"}},
		{"etcd", Versions{Kubernetes: "v1.37.2", Etcd: "v3.7.9"}, []string{"go.etcd.io/etcd/server/v3 v3.7.9", "v3.6.16 v3.7.0 v3.7.3", "go.etcd.io/etcd/etcdctl/v3 v3.7.9"}},
		{"etcd served without etcdctl", Versions{Kubernetes: "v1.37.2", Etcd: "v3.7.0"}, []string{"go.etcd.io/etcd/etcdctl/v3 v3.7.0", "v3.6.16 v3.7.3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Build(context.Background(), Options{CacheDir: cache, Go: goCmd, Versions: tc.v})
			if !errors.Is(err, ErrNotServed) {
				t.Fatalf("err = %v, want ErrNotServed", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			assertOnlyLocks(t, cache)
		})
	}
	if builds(calls(t)) != 0 {
		t.Errorf("go build ran for an unserved version")
	}
	if _, err := Build(context.Background(), Options{CacheDir: cache, Go: goCmd, Versions: Versions{Kubernetes: "latest"}}); !errors.Is(err, ErrBadVersion) {
		t.Errorf("version latest: err = %v, want ErrBadVersion", err)
	}
}

func TestBuildResolvesEtcd(t *testing.T) {
	goCmd := fakeGo(t)
	cache := t.TempDir()
	p, err := Build(context.Background(), Options{CacheDir: cache, Go: goCmd, Versions: Versions{Kubernetes: "v1.36.3"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := (Versions{Kubernetes: "v1.36.3", Etcd: "v3.6.16"}); p.Versions != want || filepath.Base(p.Dir) != "k8s-v1.36.3_etcd-v3.6.16" {
		t.Errorf("Build = %+v, want %v", p, want)
	}
	// Once built, Cached finds the release's build without the module
	// proxy: the etcd it was built with is the one in the cache.
	if c, err := Cached(Options{CacheDir: cache, Versions: Versions{Kubernetes: "v1.36.3"}}); err != nil || c.Dir != p.Dir {
		t.Errorf("Cached(v1.36.3) = %+v, %v; want the build in %s", c, err, p.Dir)
	}
	if _, err := Cached(Options{CacheDir: cache, Versions: Versions{Kubernetes: "v1.35.4"}}); !errors.Is(err, ErrNotBuilt) || !strings.Contains(err.Error(), "--version v1.35.4") {
		t.Errorf("Cached(v1.35.4), never built: %v, want ErrNotBuilt naming the build command", err)
	}
	got, err := ResolveEtcdVersion(context.Background(), goCmd, "v1.37.2")
	if err != nil || got != DefaultEtcdVersion {
		t.Errorf("ResolveEtcdVersion(v1.37.2) = %q, %v; want %s", got, err, DefaultEtcdVersion)
	}
	if _, err := Build(context.Background(), Options{CacheDir: cache, Go: goCmd, Versions: Versions{Kubernetes: "v1.13.0"}}); !errors.Is(err, ErrNoEtcdVersion) || !strings.Contains(err.Error(), "--etcd-version") {
		t.Errorf("kubernetes v1.13.0 (no build/dependencies.yaml): err = %v, want ErrNoEtcdVersion asking for --etcd-version", err)
	}
	if _, err := ResolveEtcdVersion(context.Background(), goCmd, "v1.99.0"); !errors.Is(err, ErrNotServed) || !strings.Contains(err.Error(), "v1.37.2") {
		t.Errorf("ResolveEtcdVersion(v1.99.0): err = %v, want ErrNotServed listing the served", err)
	}
}

func TestBuildWaitsForConcurrentBuild(t *testing.T) {
	goCmd := fakeGo(t)
	cache := t.TempDir()
	const n = 3
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := Build(context.Background(), Options{CacheDir: cache, Go: goCmd})
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if b := builds(calls(t)); b != 2 {
		t.Errorf("%d concurrent Builds ran go build %d times, want 2 (one build)", n, b)
	}
}
