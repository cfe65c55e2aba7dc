package kube

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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

func dumpLogs(t *testing.T, dir string) {
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
