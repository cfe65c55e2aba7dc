package binaries

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestRealBuild builds the default versions with the real go command into
// the default cache (where `make kube-binaries` puts them, so it is quick
// after that and about 1,000 CPU-seconds cold) and runs each binary's
// --version. Set PODSAFE_KUBE_BUILD=1 to run it; it needs the module proxy.
func TestRealBuild(t *testing.T) {
	if os.Getenv("PODSAFE_KUBE_BUILD") != "1" {
		t.Skip("set PODSAFE_KUBE_BUILD=1 to build the real Kubernetes and etcd binaries (cold: ~1,000 CPU-s, 3.5 GB)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()

	etcd, err := ResolveEtcdVersion(ctx, "", DefaultKubernetesVersion)
	if err != nil {
		t.Fatal(err)
	}
	if etcd != DefaultEtcdVersion {
		t.Errorf("ResolveEtcdVersion(%s) = %s, DefaultEtcdVersion is %s", DefaultKubernetesVersion, etcd, DefaultEtcdVersion)
	}

	start := time.Now()
	p, err := Build(ctx, Options{Versions: Versions{Kubernetes: DefaultKubernetesVersion}, Log: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Build took %s (reused: %v): %s", time.Since(start).Round(time.Millisecond), p.Reused, p.Dir)

	for _, tc := range []struct{ path, want string }{
		{p.KubeAPIServer, "Kubernetes " + DefaultKubernetesVersion},
		{p.KubeScheduler, "Kubernetes " + DefaultKubernetesVersion},
		{p.KubeControllerManager, "Kubernetes " + DefaultKubernetesVersion},
		{p.Etcd, "etcd Version: " + strings.TrimPrefix(DefaultEtcdVersion, "v")},
	} {
		out, err := exec.CommandContext(ctx, tc.path, "--version").CombinedOutput()
		if err != nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("%s --version = %q, %v; want %q", tc.path, out, err, tc.want)
		}
	}

	// The second Build is a cache hit.
	start = time.Now()
	p2, err := Build(ctx, Options{})
	if err != nil || !p2.Reused || p2.Dir != p.Dir {
		t.Fatalf("second Build = %+v, %v; want the cached build", p2, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("a cache hit took %s", d)
	}
}

// testWriter sends Build's log to t.Log, a line at a time.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
