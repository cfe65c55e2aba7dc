package nemesis

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pingcap/failpoint"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/cluster"
)

// TestFailpointsExistInSource: every failpoint the nemesis offers names a
// marker that exists in its package (plain or rewritten by failpoint-ctl).
func TestFailpointsExistInSource(t *testing.T) {
	for _, fp := range Failpoints {
		rel, ok := strings.CutPrefix(fp.Name, mod)
		if !ok {
			t.Errorf("%s is not in module %s", fp.Name, mod)
			continue
		}
		dir, marker := filepath.Split(rel)
		files, err := filepath.Glob(filepath.Join("..", dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Errorf("%s: no package at %s", fp.Name, dir)
			continue
		}
		found := false
		for _, f := range files {
			if strings.Contains(f, "__failpoint_stash__") || strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			src := string(b)
			if strings.Contains(src, `failpoint.Inject("`+marker+`"`) || strings.Contains(src, `_curpkg_("`+marker+`")`) {
				found = true
			}
		}
		if !found {
			t.Errorf("failpoint %s: no marker %q in %s", fp.Name, marker, dir)
		}
	}
}

// TestFailpointFault runs in the failpoint build (make test-failpoints sets
// PODSAFE_FAILPOINTS=1): the markers must be live there, and a failpoint the
// fault switches on must take effect and its heal must end it. In an
// ordinary build the fault is unavailable, which this also checks.
func TestFailpointFault(t *testing.T) {
	want := os.Getenv("PODSAFE_FAILPOINTS") == "1"
	c := cluster.StartForTest(t, cluster.Config{Topology: cluster.DefaultTopology(1, 1, 1)})
	f := failpointFault{}
	if !FailpointsCompiled() {
		if want {
			t.Fatal("PODSAFE_FAILPOINTS=1 but the failpoint markers are not live: the sources were not rewritten (make failpoint-enable)")
		}
		if f.Available(cluster.AsTarget(c)) {
			t.Fatal("the failpoint fault claims to be available in a build without live markers")
		}
		t.Skip("ordinary build: failpoint markers are inert; make test-failpoints runs this test for real")
	}
	if !f.Available(cluster.AsTarget(c)) {
		t.Fatal("failpoints are compiled in but the fault is unavailable")
	}
	cs, err := c.Clientset(apiserver.IdentityAdmin, cluster.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	timeList := func() time.Duration {
		start := time.Now()
		if _, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	// The API delay failpoint, made certain for this test: every request
	// waits at least 300 ms while it is on, and none does after the heal.
	const name = mod + "apiserver/requestDelay"
	if err := failpoint.Enable(name, "sleep(300)"); err != nil {
		t.Fatal(err)
	}
	if d := timeList(); d < 300*time.Millisecond {
		t.Errorf("a request with %s on took %s, want at least 300ms", name, d)
	}
	if err := failpoint.Disable(name); err != nil {
		t.Fatal(err)
	}
	// The fault itself: every choice enables a failpoint and heals it.
	rng := rand.New(rand.NewPCG(1, 2))
	seen := map[string]bool{}
	for range 40 {
		inj, err := f.Inject(ctx, cluster.AsTarget(c), rng)
		if err != nil {
			t.Fatal(err)
		}
		seen[inj.Targets[0]] = true
		if _, err := failpoint.Status(inj.Targets[0]); err != nil {
			t.Errorf("%s not enabled after Inject: %v", inj.Targets[0], err)
		}
		if err := inj.Heal(); err != nil {
			t.Fatal(err)
		}
		if _, err := failpoint.Status(inj.Targets[0]); err == nil {
			t.Errorf("%s still enabled after Heal", inj.Targets[0])
		}
	}
	if len(seen) != len(Failpoints) {
		t.Errorf("40 injections chose %d of %d failpoints", len(seen), len(Failpoints))
	}
}
