package nemesis_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/cluster"
)

// cutPeers maps each host to the hosts it has a cut link with, either way,
// and reports whether every cut is both ways.
func cutPeers(c *cluster.Cluster) (map[string]map[string]bool, bool) {
	peers := map[string]map[string]bool{}
	cut := map[[2]string]bool{}
	for _, r := range c.Network().Rules() {
		if !r.Cut {
			continue
		}
		cut[[2]string{r.From, r.To}] = true
		for _, p := range [][2]string{{r.From, r.To}, {r.To, r.From}} {
			if peers[p[0]] == nil {
				peers[p[0]] = map[string]bool{}
			}
			peers[p[0]][p[1]] = true
		}
	}
	symmetric := true
	for l := range cut {
		if !cut[[2]string{l[1], l[0]}] {
			symmetric = false
		}
	}
	return peers, symmetric
}

// TestMemberShapes checks the links each control-plane shape cuts, on three
// and five members, and that its heal leaves no cut and a leader.
func TestMemberShapes(t *testing.T) {
	type shape struct {
		name  string
		check func(t *testing.T, c *cluster.Cluster, leader string, cut []string, peers map[string]map[string]bool, symmetric bool)
	}
	degrees := func(peers map[string]map[string]bool, hosts []string) []int {
		var out []int
		for _, h := range hosts {
			out = append(out, len(peers[h]))
		}
		return out
	}
	countDegree := func(peers map[string]map[string]bool, hosts []string, d int) int {
		n := 0
		for _, got := range degrees(peers, hosts) {
			if got == d {
				n++
			}
		}
		return n
	}
	shapes := func(n int) []shape {
		minority, majority := n/2, n-n/2
		return []shape{
			{"majority-minority", func(t *testing.T, c *cluster.Cluster, leader string, cut []string, peers map[string]map[string]bool, sym bool) {
				if len(cut) != 2*minority*majority || !sym {
					t.Errorf("cut %v, want %d links both ways", cut, 2*minority*majority)
				}
				if leader != "" && len(peers[leader]) != majority {
					t.Errorf("leader %s is cut from %d members, want the %d of the majority", leader, len(peers[leader]), majority)
				}
			}},
			{"bridge", func(t *testing.T, c *cluster.Cluster, leader string, cut []string, peers map[string]map[string]bool, sym bool) {
				side := (n - 1) / 2
				if len(cut) != 2*side*side || !sym {
					t.Errorf("cut %v, want %d links both ways", cut, 2*side*side)
				}
				if countDegree(peers, c.MemberHosts(), 0) != 1 || countDegree(peers, c.MemberHosts(), side) != n-1 {
					t.Errorf("cut degrees %v, want one bridge with none and the rest cut from the %d of the other side", degrees(peers, c.MemberHosts()), side)
				}
			}},
			{"one-way-member", func(t *testing.T, c *cluster.Cluster, leader string, cut []string, peers map[string]map[string]bool, sym bool) {
				if len(cut) != n-1 || sym {
					t.Errorf("cut %v, want %d links one way only", cut, n-1)
				}
				if countDegree(peers, c.MemberHosts(), n-1) != 1 {
					t.Errorf("cut degrees %v, want one member cut from all others", degrees(peers, c.MemberHosts()))
				}
			}},
		}
	}
	for _, members := range []int{3, 5} {
		t.Run(fmt.Sprint(members), func(t *testing.T) {
			c := startCluster(t, members)
			tests := shapes(members)
			if members == 5 {
				tests = append(tests, shape{"ring", func(t *testing.T, c *cluster.Cluster, leader string, cut []string, peers map[string]map[string]bool, sym bool) {
					if len(cut) != 10 || !sym {
						t.Errorf("cut %v, want 10 links both ways", cut)
					}
					if countDegree(peers, c.MemberHosts(), 2) != 5 {
						t.Errorf("cut degrees %v, want every member cut from its two non-neighbours", degrees(peers, c.MemberHosts()))
					}
				}})
			} else if fault(t, "ring").Available(cluster.AsTarget(c)) {
				t.Error("ring claims to be available on three members, where it cuts nothing")
			}
			rng := seeded()
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					if err := c.WaitLeader(context.Background()); err != nil {
						t.Fatal(err)
					}
					leader := ""
					if l := c.LeaderIndex(); l >= 0 {
						leader = cluster.MemberHost(l)
					}
					inj := inject(t, c, tt.name, rng)
					cut := cutLinks(c)
					for _, l := range cut {
						if !strings.HasPrefix(l, "cp-") || !strings.Contains(l, "->cp-") {
							t.Errorf("cut a non-member link %s", l)
						}
					}
					peers, sym := cutPeers(c)
					tt.check(t, c, leader, cut, peers, sym)
					heal(t, inj)
					if got := cutLinks(c); len(got) != 0 {
						t.Errorf("after heal, still cut: %v", got)
					}
				})
			}
		})
	}
}

// leaseObject is a Lease the tests write to see which members replicate.
func leaseObject(name string) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("test")},
	}
}

// write creates a lease through cs and returns its resourceVersion (the
// raft index), or 0 on failure.
func write(cs kubernetes.Interface, name string, timeout time.Duration) uint64 {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	l, err := cs.CoordinationV1().Leases("default").Create(ctx, leaseObject(name), metav1.CreateOptions{})
	if err != nil {
		return 0
	}
	var rv uint64
	fmt.Sscan(l.ResourceVersion, &rv)
	return rv
}

func memberClient(t *testing.T, c *cluster.Cluster, i int) kubernetes.Interface {
	t.Helper()
	cs, err := c.Clientset(apiserver.IdentityAdmin, cluster.ClientOptions{Host: fmt.Sprintf("test-client-%d", i), Member: i, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func memberIndex(t *testing.T, host string) int {
	t.Helper()
	var i int
	if _, err := fmt.Sscanf(host, "cp-%d", &i); err != nil {
		t.Fatalf("target %q is not a member host", host)
	}
	return i
}

// TestIsolateStopsRaft: an isolated member's replica stops advancing while
// the majority commits, and catches up once healed.
func TestIsolateStopsRaft(t *testing.T) {
	c := startCluster(t, 3)
	inj := inject(t, c, "isolate-one", seeded())
	iso := memberIndex(t, inj.Targets[0])
	other := (iso + 1) % 3
	cs := memberClient(t, c, other)
	var rv uint64
	for i := 0; rv == 0; i++ {
		if i > 100 {
			t.Fatal("the majority commits no write")
		}
		rv = write(cs, fmt.Sprintf("majority-%d", i), 2*time.Second)
	}
	time.Sleep(500 * time.Millisecond)
	if got := c.Store(iso).AppliedIndex(); got >= rv {
		t.Errorf("isolated member applied index %d, at or past the majority's write at %d", got, rv)
	}
	heal(t, inj)
	eventually(t, "the healed member catching up", 20*time.Second, func() bool { return c.Store(iso).AppliedIndex() >= rv })
}

// TestAPIStore: the cut member's API serves no write, its replica keeps
// replicating the others' writes, and the heal gives it its store back.
func TestAPIStore(t *testing.T) {
	c := startCluster(t, 3)
	inj := inject(t, c, "api-store", seeded())
	target := memberIndex(t, inj.Targets[0])
	if target == c.LeaderIndex() {
		t.Fatalf("api-store picked the leader %s", inj.Targets[0])
	}
	if len(c.Network().Rules()) != 0 || len(c.Network().PortRules()) != 2 {
		t.Errorf("api-store rules: host %v, port %v; want two port cuts only", c.Network().Rules(), c.Network().PortRules())
	}
	cut := memberClient(t, c, target)
	if rv := write(cut, "through-cut-api", time.Second); rv != 0 {
		t.Errorf("a write through the cut API server succeeded at %d", rv)
	}
	cs := memberClient(t, c, (target+1)%3)
	var rv uint64
	eventually(t, "a write through another member", 20*time.Second, func() bool {
		rv = write(cs, "through-other", 2*time.Second)
		return rv != 0
	})
	eventually(t, "the cut member's replica applying it", 10*time.Second, func() bool { return c.Store(target).AppliedIndex() >= rv })
	heal(t, inj)
	if len(c.Network().PortRules()) != 0 {
		t.Errorf("port rules after heal: %v", c.Network().PortRules())
	}
	for i := 0; ; i++ {
		if write(cut, fmt.Sprintf("healed-%d", i), 2*time.Second) != 0 {
			break
		}
		if i > 10 {
			t.Fatal("no write through the healed API server")
		}
	}
}
