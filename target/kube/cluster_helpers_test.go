package kube

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/podsafe/podsafe/kubelet"
	"github.com/podsafe/podsafe/target/kube/binaries"
)

// cachedBinaries returns the built binaries of the default versions, or
// skips the test (in one line) when they are not built: `make test` builds
// them first.
func cachedBinaries(t *testing.T) binaries.Paths {
	t.Helper()
	if testing.Short() {
		t.Skip("the kube target starts real processes; skipped in -short")
	}
	p, err := binaries.Cached(binaries.Options{})
	if err != nil {
		t.Skipf("kube binaries not built (make kube-binaries): %v", err)
	}
	return p
}

// ledger collects the runtime's ledger entries.
type ledger struct {
	mu      sync.Mutex
	entries []kubelet.LedgerEntry
}

func (l *ledger) Record(e kubelet.LedgerEntry) {
	l.mu.Lock()
	l.entries = append(l.entries, e)
	l.mu.Unlock()
}

func (l *ledger) starts(pod string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.entries {
		if e.Pod == pod && e.Action == kubelet.ActionStart {
			n++
		}
	}
	return n
}

// dump formats pod's ledger entries, one per line, for a failure message.
func (l *ledger) dump(pod string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for i, e := range l.entries {
		if e.Pod == pod {
			fmt.Fprintf(&b, "  #%d %s %s uid=%s %s exit=%d grace=%d\n", i, e.Wall.Format("15:04:05.000"), e.Node, e.UID, e.Action, e.ExitCode, e.Grace)
		}
	}
	return b.String()
}

// startCluster starts a cluster of cfg with nodes, closed at the test's end.
func startCluster(t *testing.T, cfg Config, nodes int) (*Cluster, *ledger) {
	t.Helper()
	cfg.Binaries = cachedBinaries(t)
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var specs []NodeSpec
	for i := range nodes {
		n := fmt.Sprintf("node-%d", i)
		names = append(names, n)
		specs = append(specs, NodeSpec{Name: n, Labels: map[string]string{"kubernetes.io/hostname": n, "topology.kubernetes.io/zone": "zone-a"}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("closing: %v", err)
		}
		if t.Failed() {
			dumpLogs(t, cfg.Dir)
		}
	})
	if err := c.Start(ctx, names); err != nil {
		t.Fatal(err)
	}
	l := &ledger{}
	if err := c.StartStorage(ctx, StorageOptions{Ledger: l}); err != nil {
		t.Fatal(err)
	}
	if err := c.StartKubelets(ctx, specs, KubeletOptions{Ledger: l}); err != nil {
		t.Fatal(err)
	}
	return c, l
}

// writes returns the accepted writes of pod's UIDs, in order.
func (l *ledger) writes(pod string) []kubelet.LedgerEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []kubelet.LedgerEntry
	for _, e := range l.entries {
		if e.Pod == pod && e.Action == kubelet.ActionWrite {
			out = append(out, e)
		}
	}
	return out
}

// dumpLogs prints the tail of each component's log; with
// PODSAFE_KEEP_LOGS=dir it also copies the whole logs under dir, in a
// directory of their own, to read after the test's directory is gone.
func dumpLogs(t *testing.T, dir string) {
	if keep := os.Getenv("PODSAFE_KEEP_LOGS"); keep != "" {
		_ = os.CopyFS(filepath.Join(keep, fmt.Sprint(time.Now().UnixNano())), os.DirFS(filepath.Join(dir, "logs")))
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
	for _, f := range logs {
		b, _ := os.ReadFile(f)
		if len(b) > 3000 {
			b = b[len(b)-3000:]
		}
		t.Logf("---- %s (tail)\n%s", filepath.Base(f), b)
	}
}

func ready(ctx context.Context, cs kubernetes.Interface, node string) bool {
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitNodeReady waits until node's Ready condition is want.
func waitNodeReady(ctx context.Context, t *testing.T, cs kubernetes.Interface, node string, want bool) {
	t.Helper()
	eventually(ctx, t, fmt.Sprintf("%s Ready %v", node, want), func() error {
		if got := ready(ctx, cs, node); got != want {
			return fmt.Errorf("Ready %v", got)
		}
		return nil
	})
}

// eventually retries f until it succeeds or ctx ends (no wall-clock bound of
// its own: a slow machine only takes longer).
func eventually(ctx context.Context, t *testing.T, what string, f func() error) {
	t.Helper()
	for {
		err := f()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// TestFencedReplacements judges hand-made ledgers of a fenced pet: the
// ledger of a run where the taint eviction controller evicted the first
// replacement (repro/kubernetes-141568.yaml) holds; starts before the power-off, on
// the fenced node, or overlapping do not.
func TestFencedReplacements(t *testing.T) {
	e := func(node, uid string, a kubelet.LedgerAction) kubelet.LedgerEntry {
		return kubelet.LedgerEntry{Node: node, Pod: "pet-0", UID: uid, Action: a}
	}
	base := []kubelet.LedgerEntry{e("node-1", "a", kubelet.ActionStart), e("node-1", "a", kubelet.ActionPowerOff), e("node-1", "a", kubelet.ActionExit)}
	evicted := append(slices.Clone(base), e("node-0", "b", kubelet.ActionStart), e("node-0", "b", kubelet.ActionTerm),
		e("node-0", "b", kubelet.ActionExit), e("node-0", "c", kubelet.ActionStart))
	for _, tc := range []struct {
		name    string
		entries []kubelet.LedgerEntry
		n       int
		bad     string
	}{
		{"one replacement", append(slices.Clone(base), e("node-0", "b", kubelet.ActionStart)), 1, ""},
		{"replaced twice, one after the other", evicted, 2, ""},
		{"no replacement", base, 0, "no start after the fence"},
		{"a replacement before the power-off", []kubelet.LedgerEntry{e("node-1", "a", kubelet.ActionStart), e("node-0", "b", kubelet.ActionStart)}, 1, "want every replacement on node-0 after the power-off"},
		{"a replacement on the fenced node", append(slices.Clone(base), e("node-1", "b", kubelet.ActionStart)), 1, "start #2 on node-1"},
		{"two replacements at once", append(slices.Clone(base), e("node-0", "b", kubelet.ActionStart), e("node-0", "c", kubelet.ActionStart)), 2, "UID c started on node-0 while UID b still ran"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, problems := fencedReplacements(tc.entries, "pet-0", 1)
			if n != tc.n {
				t.Errorf("%d starts after the fence, want %d", n, tc.n)
			}
			if tc.bad == "" && len(problems) > 0 || tc.bad != "" && (len(problems) == 0 || !strings.Contains(strings.Join(problems, "\n"), tc.bad)) {
				t.Errorf("problems %q, want one mentioning %q", problems, tc.bad)
			}
		})
	}
}
