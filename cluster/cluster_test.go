package cluster_test

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/cluster"
)

func startCluster(t *testing.T, cfg cluster.Config) *cluster.Cluster {
	t.Helper()
	return cluster.StartForTest(t, cfg)
}

func clientset(t *testing.T, c *cluster.Cluster, identity string, member int) kubernetes.Interface {
	t.Helper()
	cs, err := c.Clientset(identity, cluster.ClientOptions{Host: cluster.ClientHost(member), Member: member})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func TestNodesRegistered(t *testing.T) {
	t.Run("all at once", func(t *testing.T) { testNodesRegistered(t) })
	t.Run("one at a time", func(t *testing.T) {
		// Each kubelet starts once the one before it registered.
		defer cluster.SetKubeletStartWave(1)()
		testNodesRegistered(t)
	})
}

func testNodesRegistered(t *testing.T) {
	c := startCluster(t, cluster.Config{Topology: cluster.DefaultTopology(1, 3, 2)})
	cs := clientset(t, c, apiserver.IdentityAdmin, 0)
	nodes, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range nodes.Items {
		got = append(got, n.Name+"@"+n.Labels[cluster.LabelZone])
		if len(n.Status.Conditions) == 0 || n.Status.Conditions[0].Status != corev1.ConditionTrue {
			t.Errorf("node %s is not Ready: %+v", n.Name, n.Status.Conditions)
		}
	}
	sort.Strings(got)
	if diff := cmp.Diff([]string{"node-0@zone-a", "node-1@zone-b", "node-2@zone-a"}, got); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
}

func TestTopologyValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		top  cluster.Topology
		ok   bool
	}{
		{"three members", cluster.DefaultTopology(3, 2, 1), true},
		{"two members", cluster.Topology{Members: 2}, false},
		{"duplicate node", cluster.Topology{Members: 1, Nodes: []cluster.NodeSpec{{Name: "a"}, {Name: "a"}}}, false},
		{"reserved prefix", cluster.Topology{Members: 1, Nodes: []cluster.NodeSpec{{Name: "cp-9"}}}, false},
		{"not a DNS name", cluster.Topology{Members: 1, Nodes: []cluster.NodeSpec{{Name: "Node_1"}}}, false},
		{"a path", cluster.Topology{Members: 1, Nodes: []cluster.NodeSpec{{Name: "../x"}}}, false},
		{"a DNS subdomain", cluster.Topology{Members: 1, Nodes: []cluster.NodeSpec{{Name: "rack-1.node-2"}}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.top.Validate(); (err == nil) != tc.ok {
				t.Errorf("Validate() = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

// A durable cluster whose members are all killed and restarted keeps every
// acknowledged write.
func TestDurableRestartLosesNoAcknowledgedWrite(t *testing.T) {
	c := startCluster(t, cluster.Config{Topology: cluster.DefaultTopology(3, 0, 1), Durable: true, DataDir: t.TempDir()})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cs := clientset(t, c, apiserver.IdentityWorkload, 0)
	acked := map[string]string{}
	write := func(round int) {
		for i := 0; i < 20; i++ {
			name := fmt.Sprintf("r%d-%d", round, i)
			v := fmt.Sprintf("v%d", i)
			_, err := cs.CoordinationV1().Leases("default").Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: coordinationv1.LeaseSpec{HolderIdentity: &v},
			}, metav1.CreateOptions{})
			if err == nil {
				acked[name] = v
			}
		}
	}
	write(0)
	// Kill the leader alone, write through the survivors, bring it back.
	l := c.LeaderIndex()
	if err := c.CrashMember(l); err != nil {
		t.Fatal(err)
	}
	cs = clientset(t, c, apiserver.IdentityWorkload, (l+1)%3)
	waitWrites(t, ctx, func() { write(1) }, acked, 20)
	if err := c.RestartMember(l); err != nil {
		t.Fatal(err)
	}
	// Kill every member at once and restart them all.
	for i := 0; i < 3; i++ {
		if err := c.CrashMember(i); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		if err := c.RestartMember(i); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	for m := 0; m < 3; m++ {
		cs := clientset(t, c, apiserver.IdentityWorkload, m)
		for name, v := range acked {
			var got *coordinationv1.Lease
			var err error
			for ctx.Err() == nil {
				if got, err = cs.CoordinationV1().Leases("default").Get(ctx, name, metav1.GetOptions{}); err == nil {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err != nil {
				t.Fatalf("member %d: acknowledged write %s lost: %v", m, name, err)
			}
			if *got.Spec.HolderIdentity != v {
				t.Errorf("member %d: %s = %q, want %q", m, name, *got.Spec.HolderIdentity, v)
			}
		}
	}
	if len(acked) < 30 {
		t.Errorf("only %d writes were acknowledged; the test proves little", len(acked))
	}
}

func waitWrites(t *testing.T, ctx context.Context, write func(), acked map[string]string, want int) {
	t.Helper()
	before := len(acked)
	for ctx.Err() == nil && len(acked)-before < want/2 {
		write()
	}
}

// A real client-go informer connected to one member stays in sync while the
// leader is isolated and another takes over.
func TestInformerAcrossLeaderChange(t *testing.T) {
	c := startCluster(t, cluster.Config{Topology: cluster.DefaultTopology(3, 0, 1), DetectTimeout: 500 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	leader := c.LeaderIndex()
	watcher := (leader + 1) % 3
	cs := clientset(t, c, apiserver.IdentityAdmin, watcher)
	factory := informers.NewSharedInformerFactory(cs, 0)
	leases := factory.Coordination().V1().Leases()
	inf := leases.Informer()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer never synced")
	}
	writer := clientset(t, c, apiserver.IdentityWorkload, watcher)
	create := func(name string) {
		t.Helper()
		for ctx.Err() == nil {
			_, err := writer.CoordinationV1().Leases("default").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			if err == nil || isExists(err) {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for i := 0; i < 5; i++ {
		create(fmt.Sprintf("before-%d", i))
	}
	// Isolate the leader from the other members; the watcher's member stays
	// with the majority, which elects a new leader.
	hosts := c.MemberHosts()
	for _, h := range hosts {
		if h != hosts[leader] {
			c.Network().CutBoth(hosts[leader], h)
		}
	}
	for ctx.Err() == nil {
		if l := c.LeaderIndex(); l >= 0 && l != leader {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if l := c.LeaderIndex(); l < 0 || l == leader {
		t.Fatalf("no new leader after isolating %s (leader index %d)", hosts[leader], l)
	}
	for i := 0; i < 5; i++ {
		create(fmt.Sprintf("after-%d", i))
	}
	c.Network().HealAll()
	if err := writer.CoordinationV1().Leases("default").Delete(ctx, "before-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want := listNames(t, ctx, writer)
	for ctx.Err() == nil {
		got, _ := leases.Lister().List(labels.Everything())
		var names []string
		for _, l := range got {
			names = append(names, l.Name)
		}
		sort.Strings(names)
		if cmp.Equal(want, names) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	got, _ := leases.Lister().List(labels.Everything())
	t.Fatalf("informer cache never converged: want %v, have %d objects", want, len(got))
}

func listNames(t *testing.T, ctx context.Context, cs kubernetes.Interface) []string {
	t.Helper()
	l, err := cs.CoordinationV1().Leases("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, x := range l.Items {
		names = append(names, x.Name)
	}
	sort.Strings(names)
	return names
}

func isExists(err error) bool { return apierrors.IsAlreadyExists(err) }

// countingTransport counts the requests of one identity.
type countingTransport struct {
	next http.RoundTripper
	n    *atomic.Int64
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.n.Add(1)
	return t.next.RoundTrip(r)
}

// Config.WrapTransport reaches every component's client, so a recorder sees
// the kubelets' and the scheduler's calls with their identities.
func TestWrapTransportReachesEveryComponent(t *testing.T) {
	var mu sync.Mutex
	counts := map[string]*atomic.Int64{}
	wrap := func(identity string) func(http.RoundTripper) http.RoundTripper {
		mu.Lock()
		defer mu.Unlock()
		if counts[identity] == nil {
			counts[identity] = &atomic.Int64{}
		}
		n := counts[identity]
		return func(rt http.RoundTripper) http.RoundTripper { return countingTransport{next: rt, n: n} }
	}
	startCluster(t, cluster.Config{Topology: cluster.DefaultTopology(1, 1, 1), Kubelets: true, Scheduler: true, WrapTransport: wrap})
	seen := func(id string) bool {
		mu.Lock()
		defer mu.Unlock()
		return counts[id] != nil && counts[id].Load() > 0
	}
	// The scheduler starts its informers in the background: give it time.
	deadline := time.Now().Add(20 * time.Second)
	for _, id := range []string{apiserver.KubeletIdentity("node-0"), apiserver.IdentityScheduler} {
		for !seen(id) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if !seen(id) {
			t.Errorf("no API call of %s went through the wrapper", id)
		}
	}
}
