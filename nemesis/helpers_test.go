package nemesis_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/nemesis"
)

// testScale is the time scale of clusters with kubelets: a 10 s lease
// renewal costs 50 ms, a 40 s lease 200 ms.
const testScale = 200

// startNodes starts a cluster of members members and nodes kubelets, with
// whatever else opts switch on.
func startNodes(t *testing.T, members, nodes int, opts ...func(*cluster.Config)) *cluster.Cluster {
	t.Helper()
	cfg := cluster.Config{Topology: cluster.DefaultTopology(members, nodes, 1), TimeScale: testScale, Kubelets: true}
	for _, o := range opts {
		o(&cfg)
	}
	return cluster.StartForTest(t, cfg)
}

func withScheduler(cfg *cluster.Config)   { cfg.Scheduler = true }
func withControllers(cfg *cluster.Config) { cfg.Controllers = true }
func withFencing(cfg *cluster.Config)     { cfg.Controllers = true; cfg.Fencing.Enabled = true }

func durable(t *testing.T) func(*cluster.Config) {
	return func(cfg *cluster.Config) {
		cfg.Durable = true
		cfg.DataDir = t.TempDir()
	}
}

// fault looks up one fault by name.
func fault(t *testing.T, name string) nemesis.Fault {
	t.Helper()
	fs, err := nemesis.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 1 || fs[0].Name() != name {
		t.Fatalf("Lookup(%q) = %d faults, want the fault itself", name, len(fs))
	}
	return fs[0]
}

// inject injects the named fault, which must be available on c.
func inject(t *testing.T, c *cluster.Cluster, name string, rng *rand.Rand) nemesis.Injection {
	t.Helper()
	f := fault(t, name)
	if !f.Available(cluster.AsTarget(c)) {
		t.Fatalf("%s is not available on this cluster", name)
	}
	inj, err := f.Inject(context.Background(), cluster.AsTarget(c), rng)
	if err != nil {
		t.Fatalf("injecting %s: %v", name, err)
	}
	if inj.Description == "" || len(inj.Targets) == 0 || inj.Heal == nil {
		t.Fatalf("%s injected %+v: want a description, targets and a heal", name, inj)
	}
	t.Logf("%s: %s (targets %v)", name, inj.Description, inj.Targets)
	checkLinksCut(t, c, inj)
	return inj
}

// checkLinksCut checks that the links an injection reports are cut on c:
// host links as simnet rules, port links as port rules.
func checkLinksCut(t *testing.T, c *cluster.Cluster, inj nemesis.Injection) {
	t.Helper()
	hosts := map[string]bool{}
	for _, r := range c.Network().Rules() {
		if r.Cut {
			hosts[r.From+"->"+r.To] = true
		}
	}
	ports := map[string]bool{}
	for _, r := range c.Network().PortRules() {
		if r.Cut {
			ports[r.From+"->"+r.To] = true
		}
	}
	for _, l := range inj.Links {
		if cut := hosts[l.String()] || (l.Port != "" && ports[l.String()]); !cut {
			t.Errorf("%s reports link %s, which is not cut", inj.Description, l)
		}
	}
}

func heal(t *testing.T, inj nemesis.Injection) {
	t.Helper()
	if err := inj.Heal(); err != nil {
		t.Fatalf("healing %s: %v", inj.Description, err)
	}
}

// eventually polls cond until it holds, failing the test after timeout.
func eventually(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// scaled sleeps for scaled duration d of c's clock.
func scaled(c *cluster.Cluster, d time.Duration) { time.Sleep(c.Clock().WallFor(d)) }

func admin(t *testing.T, c *cluster.Cluster) kubernetes.Interface {
	t.Helper()
	cs, err := c.Clientset(apiserver.IdentityAdmin, cluster.ClientOptions{Host: "test-admin", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// leaseRenewed is node's lease renew time, zero if it cannot be read.
func leaseRenewed(cs kubernetes.Interface, node string) time.Time {
	l, err := cs.CoordinationV1().Leases(apiserver.KubeLeaseNamespace).Get(context.Background(), node, metav1.GetOptions{})
	if err != nil || l.Spec.RenewTime == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Time
}

// assertLeaseFrozen checks that node's kubelet renews nothing for a while
// (after letting a renewal in flight land) and returns the last renewal.
func assertLeaseFrozen(t *testing.T, c *cluster.Cluster, cs kubernetes.Interface, node string) time.Time {
	t.Helper()
	scaled(c, 5*time.Second)
	before := leaseRenewed(cs, node)
	scaled(c, 40*time.Second)
	if after := leaseRenewed(cs, node); !after.Equal(before) {
		t.Errorf("kubelet of %s renewed its lease while cut off: %s -> %s", node, before, after)
	}
	return before
}

// runPod creates a pod bound to node and waits until it runs.
func runPod(t *testing.T, c *cluster.Cluster, cs kubernetes.Interface, name, node string) {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr.To[int64](5),
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "app", Image: "sim"}}},
	}
	if _, err := cs.CoreV1().Pods("default").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, name+" running", 30*time.Second, func() bool {
		got, err := cs.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		return err == nil && got.Status.Phase == corev1.PodRunning
	})
}

// running is the number of containers running on node.
func running(t *testing.T, c *cluster.Cluster, node string) int {
	t.Helper()
	rt, err := c.Runtime(node)
	if err != nil {
		t.Fatal(err)
	}
	return rt.Running()
}

func seeded() *rand.Rand { return rand.New(rand.NewPCG(1, 2)) }
