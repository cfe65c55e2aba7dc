package nemesis

import (
	"bytes"
	"context"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pingcap/failpoint"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/history"
	"github.com/podsafe/podsafe/internal/fpctx"
	"github.com/podsafe/podsafe/target"
)

// TestFailpointsExistInSource: every failpoint the nemesis offers names a
// marker that exists in its package, and every marker in podsafe's code is
// an InjectContext, so that each can be aimed at one component (package
// fpctx): a plain Inject would fire in every component at once.
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
		re := regexp.MustCompile(`failpoint\.InjectContext\([^,]+, "` + regexp.QuoteMeta(marker) + `"`)
		found := false
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			found = found || re.Match(b)
		}
		if !found {
			t.Errorf("failpoint %s: no marker %q in %s", fp.Name, marker, dir)
		}
	}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "oracle" || d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte("failpoint.Inject(")) {
			t.Errorf("%s: a failpoint.Inject marker cannot be aimed at one component; use failpoint.InjectContext with an fpctx context", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestFailpointFault runs in the failpoint build (make test-failpoints sets
// PODSAFE_FAILPOINTS=1): the markers must be live there, and a failpoint the
// fault switches on must take effect and its heal must end it. In an
// ordinary build the fault is unavailable, which this also checks.
func TestFailpointFault(t *testing.T) {
	want := os.Getenv("PODSAFE_FAILPOINTS") == "1"
	c := cluster.StartForTest(t, cluster.Config{Topology: cluster.DefaultTopology(1, 1, 1), Kubelets: true, Controllers: true})
	f := failpointFault{}
	if !FailpointsCompiled() {
		if want {
			t.Fatal("PODSAFE_FAILPOINTS=1 but the failpoint markers are not live: this is not a failpoint build (make test-failpoints builds one)")
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
	// Aimed elsewhere it does not fire in the member's API server; aimed
	// at the member, it does. fpctx counts where it fired, which, unlike
	// a request's duration, a loaded machine cannot blur.
	member := cluster.MemberHost(0)
	for _, aim := range []string{cluster.ComponentStorage, member} {
		heal, err := cluster.AsTarget(c).(target.Failpoints).EnableFailpoint(ctx, name, "return(true)", aim)
		if err != nil {
			t.Fatal(err)
		}
		before := fpctx.Fired(name, member)
		timeList()
		fired := fpctx.Fired(name, member) - before
		if err := heal(); err != nil {
			t.Fatal(err)
		}
		if aim == member && fired == 0 {
			t.Errorf("%s aimed at %s did not fire there", name, member)
		}
		if aim != member && fired != 0 {
			t.Errorf("%s aimed at %s fired %d times in %s", name, aim, fired, member)
		}
	}
	// The fault itself: every choice enables a failpoint aimed at a
	// component it can reach, records the aim, and heals both.
	rng := rand.New(rand.NewPCG(1, 2))
	tgt := cluster.AsTarget(c)
	seen := map[string]bool{}
	for range 40 {
		inj, err := f.Inject(ctx, tgt, rng)
		if err != nil {
			t.Fatal(err)
		}
		name, comp := inj.Params[history.ParamFailpoint], inj.Params[history.ParamComponent]
		seen[name] = true
		i := slices.IndexFunc(Failpoints, func(fp Failpoint) bool { return fp.Name == name })
		if i < 0 {
			t.Fatalf("injected %s, not one of Failpoints", name)
		}
		if cp, ok := target.Find(tgt, comp); !ok || !Failpoints[i].Aims(cp) {
			t.Errorf("%s aimed at %q, which it cannot be", name, comp)
		}
		if !slices.Equal(inj.Targets, []string{comp}) {
			t.Errorf("%s: targets %v, want [%s]", name, inj.Targets, comp)
		}
		if _, err := failpoint.Status(name); err != nil {
			t.Errorf("%s not enabled after Inject: %v", name, err)
		}
		if got := fpctx.Aimed(name); got != comp {
			t.Errorf("%s aimed at %q after Inject, want %q", name, got, comp)
		}
		if err := inj.Heal(); err != nil {
			t.Fatal(err)
		}
		if _, err := failpoint.Status(name); err == nil {
			t.Errorf("%s still enabled after Heal", name)
		}
		if got := fpctx.Aimed(name); got != "" {
			t.Errorf("%s still aimed at %q after Heal", name, got)
		}
	}
	if len(seen) != len(aimable(tgt)) {
		t.Errorf("40 injections chose %d of %d failpoints", len(seen), len(aimable(tgt)))
	}
}

// TestFailpointIdentitiesAreComponentNames: the identities podsafe's
// markers carry (package fpctx) are the embedded cluster's component names,
// which the fault aims at; a store member's is its raft ID, which the
// cluster gives as its host (raftstore.Store.ID).
func TestFailpointIdentitiesAreComponentNames(t *testing.T) {
	pairs := [][2]string{
		{fpctx.Scheduler, cluster.ComponentScheduler},
		{fpctx.Storage, cluster.ComponentStorage},
		{fpctx.Kubelet("n1"), cluster.KubeletComponent("n1")},
		{fpctx.Controller(cluster.ControllerPet), cluster.ControllerComponent(cluster.ControllerPet)},
		{fpctx.Controller("fencing"), cluster.ControllerComponent(cluster.ControllerFencing)},
	}
	for _, p := range pairs {
		if p[0] != p[1] {
			t.Errorf("marker identity %q, component name %q", p[0], p[1])
		}
	}
	c := cluster.StartForTest(t, cluster.Config{Topology: cluster.DefaultTopology(1, 1, 1)})
	if id, host := c.Store(0).ID(), cluster.MemberHost(0); id != host {
		t.Errorf("member 0's raft ID %q, component name %q", id, host)
	}
}
