package raftstore

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestCluster is a cluster of in-process members on loopback TCP, for tests
// of this package and of its users. Members talk through a TestNetwork, so
// tests can cut links. Index i of Stores, Members and Configs is member i.
type TestCluster struct {
	// Stores holds the running members; an entry is nil while its member is
	// killed.
	Stores []*Store
	// Members is the cluster's membership.
	Members []Member
	// Configs is the configuration each member was last opened with (its
	// listeners are replaced on Restart).
	Configs []Config
	// Net carries all traffic between members.
	Net *TestNetwork

	tb testing.TB
	// crashed are the members killed so far, whose abandoned raft
	// instances Close waits for.
	crashed []*Store
}

// TestOption adjusts a TestCluster.
type TestOption func(*testOptions)

type testOptions struct {
	durable bool
	adjust  []func(*Config)
}

// WithDurable makes every member durable, each with its own temporary
// directory.
func WithDurable() TestOption { return func(o *testOptions) { o.durable = true } }

// WithConfig applies f to every member's Config before it is opened.
func WithConfig(f func(*Config)) TestOption {
	return func(o *testOptions) { o.adjust = append(o.adjust, f) }
}

// WithLogger sends every member's log to log.
func WithLogger(log *slog.Logger) TestOption {
	return WithConfig(func(c *Config) { c.Logger = log })
}

// OpenTestCluster opens an n-member cluster (in memory unless WithDurable),
// waits until it has a leader and closes it when the test ends. Members use
// the default timings, except that a 1-member cluster uses 20 ms ones (it
// elects itself faster and has no peer to lose). A 1-member cluster is the
// simplest Store for tests of code built on it:
//
//	store := raftstore.OpenTestCluster(t, 1).Stores[0]
func OpenTestCluster(tb testing.TB, n int, opts ...TestOption) *TestCluster {
	tb.Helper()
	var o testOptions
	for _, opt := range opts {
		opt(&o)
	}
	c := &TestCluster{Net: NewTestNetwork(), tb: tb}
	raftLns := make([]net.Listener, n)
	fwdLns := make([]net.Listener, n)
	for i := range n {
		id := "m" + strconv.Itoa(i)
		raftLns[i] = listenLoopback(tb, "127.0.0.1:0")
		fwdLns[i] = listenLoopback(tb, "127.0.0.1:0")
		m := Member{ID: id, RaftAddr: raftLns[i].Addr().String(), ForwardAddr: fwdLns[i].Addr().String()}
		c.Members = append(c.Members, m)
		c.Net.addMember(m)
	}
	for i, m := range c.Members {
		cfg := Config{
			ID:              m.ID,
			Members:         c.Members,
			Bootstrap:       true,
			RaftListener:    raftLns[i],
			ForwardListener: fwdLns[i],
			Dial:            c.Net.Dialer(m.ID),
		}
		if n == 1 {
			// A lone voter cannot lose leadership to a slow peer, so short
			// timings only make its first election quicker.
			cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = singleMemberTiming, singleMemberTiming, singleMemberTiming
		}
		if o.durable {
			cfg.Durable = true
			cfg.DataDir = filepath.Join(tb.TempDir(), m.ID)
		}
		for _, f := range o.adjust {
			f(&cfg)
		}
		c.Configs = append(c.Configs, cfg)
	}
	c.Stores = make([]*Store, n)
	tb.Cleanup(c.Close)
	for i := range n {
		s, err := Open(c.Configs[i])
		if err != nil {
			tb.Fatalf("opening member %d: %v", i, err)
		}
		c.Stores[i] = s
	}
	c.Leader()
	return c
}

const singleMemberTiming = 20 * time.Millisecond

func listenLoopback(tb testing.TB, addr string) net.Listener {
	tb.Helper()
	var err error
	// A port just released can take a moment to be free again.
	for range 50 {
		var ln net.Listener
		if ln, err = net.Listen("tcp", addr); err == nil {
			return ln
		}
		time.Sleep(20 * time.Millisecond)
	}
	tb.Fatalf("listening on %s: %v", addr, err)
	return nil
}

// Close closes every running member and waits (up to 10 s) until the
// members it killed have been reaped.
func (c *TestCluster) Close() {
	for i, s := range c.Stores {
		if s != nil {
			if err := s.Close(); err != nil {
				c.tb.Errorf("closing member %d: %v", i, err)
			}
			c.Stores[i] = nil
		}
	}
	deadline := time.After(10 * time.Second)
	for _, s := range c.crashed {
		select {
		case <-s.Reaped():
		case <-deadline:
			c.tb.Errorf("crashed member %s not reaped within 10s", s.ID())
			return
		}
	}
}

// Leader waits (up to 10 s) until exactly one running member leads and every
// running member that can reach it agrees, and returns it.
func (c *TestCluster) Leader() *Store {
	c.tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var leaders []*Store
		for _, s := range c.Stores {
			if s != nil && s.IsLeader() {
				leaders = append(leaders, s)
			}
		}
		if len(leaders) == 1 && c.agree(leaders[0].ID()) {
			return leaders[0]
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.tb.Fatalf("no single leader within 10s")
	return nil
}

func (c *TestCluster) agree(leader string) bool {
	for _, s := range c.Stores {
		if s != nil && !c.Net.Cut(s.ID(), leader) && s.LeaderID() != leader {
			return false
		}
	}
	return true
}

// Index returns the position of the member with the given ID.
func (c *TestCluster) Index(id string) int {
	for i, m := range c.Members {
		if m.ID == id {
			return i
		}
	}
	c.tb.Fatalf("no member %q", id)
	return -1
}

// Followers returns the running members other than the current leader.
func (c *TestCluster) Followers() []*Store {
	c.tb.Helper()
	leader := c.Leader()
	var out []*Store
	for _, s := range c.Stores {
		if s != nil && s != leader {
			out = append(out, s)
		}
	}
	return out
}

// Kill crashes member i (Store.Crash): no shutdown path runs, and a durable
// member keeps only what it had synced.
func (c *TestCluster) Kill(i int) {
	c.tb.Helper()
	s := c.Stores[i]
	if err := s.Crash(); err != nil {
		c.tb.Errorf("killing member %d: %v", i, err)
	}
	c.crashed = append(c.crashed, s)
	c.Stores[i] = nil
}

// Stop closes member i cleanly (Store.Close), for comparison with Kill.
func (c *TestCluster) Stop(i int) {
	c.tb.Helper()
	if err := c.Stores[i].Close(); err != nil {
		c.tb.Errorf("stopping member %d: %v", i, err)
	}
	c.Stores[i] = nil
}

// Restart opens member i again on its old addresses with its old Config. A
// durable member keeps Bootstrap (skipped because state exists); an in-memory
// member comes back empty, without Bootstrap, and catches up from the leader.
// (An in-memory restart is an amnesia fault: the member forgets its votes.)
func (c *TestCluster) Restart(i int) *Store {
	c.tb.Helper()
	if c.Stores[i] != nil {
		c.tb.Fatalf("restarting member %d: it is running", i)
	}
	cfg := c.Configs[i]
	cfg.RaftListener = listenLoopback(c.tb, c.Members[i].RaftAddr)
	cfg.ForwardListener = listenLoopback(c.tb, c.Members[i].ForwardAddr)
	if !cfg.Durable {
		cfg.Bootstrap = false
	}
	c.Configs[i] = cfg
	s, err := Open(cfg)
	if err != nil {
		c.tb.Fatalf("restarting member %d: %v", i, err)
	}
	c.Stores[i] = s
	return s
}

// WaitApplied waits (up to 10 s) until every running member's objects
// reflect index (Store.Reflects): index may be a list's resourceVersion,
// which can name one of raft's own entries.
func (c *TestCluster) WaitApplied(index uint64) {
	c.tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		done := true
		for _, s := range c.Stores {
			if s != nil && !s.Reflects(index) {
				done = false
			}
		}
		if done {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.tb.Fatalf("members did not apply index %d within 10s", index)
}

// TestNetwork is loopback TCP between members with links that can be cut. A
// cut link black-holes new dials (they hang until their context ends) and
// closes the connections already open across it.
type TestNetwork struct {
	mu     sync.Mutex
	owner  map[string]string // address -> member ID
	cut    map[[2]string]bool
	conns  map[[2]string]map[*testConn]struct{}
	dialer net.Dialer
}

// NewTestNetwork returns a network with every link up.
func NewTestNetwork() *TestNetwork {
	return &TestNetwork{owner: map[string]string{}, cut: map[[2]string]bool{}, conns: map[[2]string]map[*testConn]struct{}{}}
}

func (n *TestNetwork) addMember(m Member) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.owner[m.RaftAddr] = m.ID
	n.owner[m.ForwardAddr] = m.ID
}

func link(a, b string) [2]string {
	if a > b {
		a, b = b, a
	}
	return [2]string{a, b}
}

// Dialer returns the Dial function of member from.
func (n *TestNetwork) Dialer(from string) func(ctx context.Context, addr string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		n.mu.Lock()
		to, ok := n.owner[addr]
		l := link(from, to)
		blocked := ok && n.cut[l]
		n.mu.Unlock()
		if blocked {
			<-ctx.Done()
			return nil, fmt.Errorf("dialing %s from %s: link cut: %w", addr, from, ctx.Err())
		}
		raw, err := n.dialer.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		c := &testConn{Conn: raw, net: n, link: l}
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.cut[l] {
			raw.Close()
			return nil, fmt.Errorf("dialing %s from %s: link cut", addr, from)
		}
		if n.conns[l] == nil {
			n.conns[l] = map[*testConn]struct{}{}
		}
		n.conns[l][c] = struct{}{}
		return c, nil
	}
}

// Cut reports whether the link between members a and b is cut.
func (n *TestNetwork) Cut(a, b string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cut[link(a, b)]
}

// Isolate cuts every link between member id and the others.
func (n *TestNetwork) Isolate(id string, others ...string) {
	n.mu.Lock()
	var conns []*testConn
	for _, o := range others {
		l := link(id, o)
		n.cut[l] = true
		for c := range n.conns[l] {
			conns = append(conns, c)
		}
	}
	n.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// Heal restores every link.
func (n *TestNetwork) Heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.cut)
}

type testConn struct {
	net.Conn
	net  *TestNetwork
	link [2]string
	once sync.Once
}

func (c *testConn) Close() error {
	c.once.Do(func() {
		c.net.mu.Lock()
		delete(c.net.conns[c.link], c)
		c.net.mu.Unlock()
	})
	return c.Conn.Close()
}

// IsolateMember cuts member i off from every other member.
func (c *TestCluster) IsolateMember(i int) {
	var others []string
	for j, m := range c.Members {
		if j != i {
			others = append(others, m.ID)
		}
	}
	c.Net.Isolate(c.Members[i].ID, others...)
}
