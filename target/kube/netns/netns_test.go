package netns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/podsafe/podsafe/target"
)

// TestPartition cuts links between two namespace hosts a and b and a local
// host l, both ways and one way, and heals them. The sections share one
// Network, one after the other: a cut's timeouts are most of the test's
// time, and Networks made for each would only add their set-up.
func TestPartition(t *testing.T) {
	t.Parallel()
	n := newNet(t)
	a, b := startAgent(t, n, "a"), startAgent(t, n, "b")
	l := startLocal(t, n, "l")

	t.Run("connected", func(t *testing.T) {
		for _, p := range [][2]*peer{{a, b}, {b, a}, {l, b}, {b, l}, {a, l}, {l, a}} {
			connect(t, p[0], p[1])
			delivered(t, p[0], p[1], p[0].host.Name+p[1].host.Name)
		}
		// The agents tell a refusal from a timeout.
		if r := a.do(t, "dial %s:1 %d", b.host.Addr, dialMS); r != "refused" {
			t.Fatalf("dialing a closed port: %s, want refused", r)
		}
	})

	// Both ways: new connections time out, established ones stall, other
	// links stay up, and heal restores all.
	t.Run("namespaces both ways", func(t *testing.T) {
		ab := open(t, a, b)
		heal := cut(t, n, link(a, b), link(b, a))
		noConnect(t, a, b, b, a)
		stalls(t, a, ab, "x1")
		connect(t, l, b)
		connect(t, a, l)
		heal()
		connect(t, a, b)
		connect(t, b, a)
		resumes(t, a, ab, "x1")
	})

	t.Run("local both ways", func(t *testing.T) {
		lb := open(t, l, b)
		bl := open(t, b, l)
		heal := cut(t, n, link(l, b), link(b, l))
		noConnect(t, l, b, b, l)
		concurrently(func() { stalls(t, l, lb, "y1") }, func() { stalls(t, b, bl, "y2") })
		connect(t, a, b)
		connect(t, a, l)
		heal()
		connect(t, l, b)
		connect(t, b, l)
		concurrently(func() { resumes(t, l, lb, "y1") }, func() { resumes(t, b, bl, "y2") })
	})

	// One way: the sender's packets to the receiver are dropped, the
	// receiver's datagrams still arrive, and TCP, which needs both
	// directions, connects neither way.
	for _, tc := range []struct {
		name            string
		from, to, other *peer // other: an uncut sender to to
	}{
		{"namespace to namespace one way", a, b, l},
		{"local to namespace one way", l, b, a},
		{"namespace to local one way", b, l, a},
	} {
		t.Run(tc.name, func(t *testing.T) {
			from, to := tc.from, tc.to
			heal := cut(t, n, link(from, to))
			noConnect(t, from, to, to, from)
			dropped(t, from, to, tc.other, "cut-"+from.host.Name+to.host.Name)
			delivered(t, to, from, "back-"+to.host.Name+from.host.Name)
			heal()
			connect(t, from, to)
			connect(t, to, from)
			delivered(t, from, to, "healed-"+from.host.Name+to.host.Name)
		})
	}
}

// TestOverlappingCuts cuts the same link twice and heals each cut on its
// own.
func TestOverlappingCuts(t *testing.T) {
	t.Parallel()
	n := newNet(t)
	a, b := startAgent(t, n, "a"), startAgent(t, n, "b")
	heal1 := cut(t, n, link(a, b))
	heal2, err := n.Cut(t.Context(), []target.Link{link(a, b), link(b, a)})
	if err != nil {
		t.Fatal(err)
	}
	rules := mustRules(t, n)
	if c1, c2 := strings.Count(rules, `"podsafe cut 1: `), strings.Count(rules, `"podsafe cut 2: `); c1 != 1 || c2 != 2 {
		t.Fatalf("%d rules of cut 1 (want 1) and %d of cut 2 (want 2):\n%s", c1, c2, rules)
	}
	heal1()
	heal1() // idempotent
	noConnect(t, a, b, b, a)
	if err := heal2(); err != nil {
		t.Fatal(err)
	}
	connect(t, a, b)
	connect(t, b, a)
	if err := heal2(); err != nil {
		t.Fatalf("second heal: %v", err)
	}
	if rules := mustRules(t, n); strings.Contains(rules, "podsafe cut") {
		t.Fatalf("rules left after heals:\n%s", rules)
	}
}

// TestHostFirewallDoesNotCut: a host firewall dropping forwarded packets
// of the subnet (as Docker's FORWARD policy DROP does, with br_netfilter
// passing bridged packets through it) does not separate namespaces,
// because the bridge is not in the host namespace.
func TestHostFirewallDoesNotCut(t *testing.T) {
	t.Parallel()
	n := newNet(t)
	a, b := startAgent(t, n, "a"), startAgent(t, n, "b")
	l := startLocal(t, n, "l")
	table := "podsafe_test_fw_" + n.Prefix()
	sub := n.Subnet().String()
	script := ""
	for _, family := range []string{"inet", "bridge"} {
		script += fmt.Sprintf("table %s %s {\n\tchain forward {\n\t\ttype filter hook forward priority -300; policy accept;\n\t\tip saddr %s drop\n\t\tip daddr %s drop\n\t}\n}\n", family, table, sub, sub)
	}
	if _, err := run(t.Context(), nil, script, "nft", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, family := range []string{"inet", "bridge"} {
			if _, err := run(context.Background(), nil, "", "nft", "delete", "table", family, table); err != nil {
				t.Error(err)
			}
		}
	})
	connect(t, a, b)
	connect(t, b, a)
	connect(t, l, a)
	connect(t, a, l)
}

// TestCloseLeavesNothing closes a Network with hosts, a running process
// and a cut in force.
func TestCloseLeavesNothing(t *testing.T) {
	t.Parallel()
	needRoot(t)
	prefix := testPrefix(t)
	n, err := New(t.Context(), Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Cleanup(context.Background(), prefix) })
	a, err := n.AddHost(t.Context(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.AddHost(t.Context(), "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := n.AddLocal(t.Context(), "l"); err != nil {
		t.Fatal(err)
	}
	if _, err := New(t.Context(), Options{Prefix: prefix}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("a second network with prefix %s: %v, want in use", prefix, err)
	}
	heal, err := n.Cut(t.Context(), []target.Link{{From: "a", To: "b"}, {From: "l", To: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	sleeper := startSleeper(t, n, a.Name)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	assertGone(t, prefix)
	assertNoAddr(t, n)
	waitKilled(t, sleeper)
	if err := n.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := heal(); err != nil {
		t.Fatalf("heal after Close: %v", err)
	}
	if _, err := n.AddHost(t.Context(), "c"); !errors.Is(err, ErrClosed) {
		t.Fatalf("AddHost after Close: %v, want ErrClosed", err)
	}
}

// TestCleanup removes a Network that was never closed, as a killed run
// leaves it.
func TestCleanup(t *testing.T) {
	t.Parallel()
	needRoot(t)
	prefix := testPrefix(t)
	n, err := New(t.Context(), Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	for _, h := range []string{"a", "b"} {
		if _, err := n.AddHost(t.Context(), h); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.AddLocal(t.Context(), "l"); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Cut(t.Context(), []target.Link{{From: "a", To: "l"}, {From: "l", To: "b"}}); err != nil {
		t.Fatal(err)
	}
	sleeper := startSleeper(t, n, "b")
	if err := Cleanup(t.Context(), prefix); err != nil {
		t.Fatal(err)
	}
	assertGone(t, prefix)
	assertNoAddr(t, n)
	waitKilled(t, sleeper)
	if err := Cleanup(t.Context(), prefix); err != nil {
		t.Fatalf("Cleanup with nothing to remove: %v", err)
	}
	if err := Cleanup(t.Context(), "bad-prefix"); err == nil {
		t.Fatal("Cleanup took a bad prefix")
	}
}

// TestCutUnknownHost: a link naming no host is an error naming it, and no
// rule is left.
func TestCutUnknownHost(t *testing.T) {
	t.Parallel()
	n := newNet(t)
	for _, h := range []string{"a", "b"} {
		if _, err := n.AddHost(t.Context(), h); err != nil {
			t.Fatal(err)
		}
	}
	_, err := n.Cut(t.Context(), []target.Link{{From: "a", To: "b"}, {From: "b", To: "nosuch"}})
	if !errors.Is(err, ErrUnknownHost) || !strings.Contains(err.Error(), `"nosuch"`) {
		t.Fatalf("cut to an unknown host: %v, want ErrUnknownHost naming nosuch", err)
	}
	t.Log(err)
	if _, err := n.Cut(t.Context(), []target.Link{{From: "a", To: "a"}}); err == nil {
		t.Fatal("cut a link from a host to itself")
	}
	if rules := mustRules(t, n); strings.Contains(rules, "podsafe cut") {
		t.Fatalf("rules left after failed cuts:\n%s", rules)
	}
	if _, err := n.Command(t.Context(), "nosuch", "true"); !errors.Is(err, ErrUnknownHost) {
		t.Fatalf("command on an unknown host: %v", err)
	}
}

// TestCutAllOrNothing: when a rule cannot be added, the rules of the same
// cut already added in other namespaces are removed.
func TestCutAllOrNothing(t *testing.T) {
	t.Parallel()
	n := newNet(t)
	var hosts []Host
	for _, name := range []string{"a", "b"} {
		h, err := n.AddHost(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, h)
	}
	// b's table is gone: the rule of b→a goes into a (whose namespace
	// sorts first), then the one of a→b fails.
	if _, err := run(t.Context(), nil, "", "ip", "netns", "exec", hosts[1].Namespace, "nft", "delete", "table", "inet", nsTable); err != nil {
		t.Fatal(err)
	}
	_, err := n.Cut(t.Context(), []target.Link{{From: "b", To: "a"}, {From: "a", To: "b"}})
	if err == nil {
		t.Fatal("cut succeeded without b's table")
	}
	t.Log(err)
	out, err := run(t.Context(), nil, "", "ip", "netns", "exec", hosts[0].Namespace, "nft", "list", "ruleset")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "podsafe cut") {
		t.Fatalf("a keeps a rule of the failed cut:\n%s", out)
	}
}

// TestHosts covers the accessors and adding a name twice.
func TestHosts(t *testing.T) {
	t.Parallel()
	n := newNet(t)
	a, err := n.AddHost(t.Context(), "kubelet/node-1")
	if err != nil {
		t.Fatal(err)
	}
	l, err := n.AddLocal(t.Context(), "l")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := n.AddHost(t.Context(), "kubelet/node-1"); err != nil || again != a {
		t.Fatalf("adding a host again: %v, %v; want %v", again, err, a)
	}
	if _, err := n.AddHost(t.Context(), "l"); err == nil {
		t.Fatal("a namespace host took a local host's name")
	}
	if got := n.Hosts(); len(got) != 2 || got[0] != a || got[1] != l {
		t.Fatalf("Hosts = %v", got)
	}
	if h, ok := n.Host("l"); !ok || !h.Local() || h.Namespace != "" {
		t.Fatalf("Host(l) = %v, %v", h, ok)
	}
	if !n.Subnet().Contains(n.BridgeAddr()) || !n.Subnet().Contains(a.Addr) || !n.Subnet().Contains(l.Addr) ||
		n.BridgeAddr() == a.Addr || a.Addr == l.Addr {
		t.Fatalf("addresses: bridge %s, a %s, l %s in %s", n.BridgeAddr(), a.Addr, l.Addr, n.Subnet())
	}
	// No IPv6 address goes around the IPv4 drops.
	out, err := run(t.Context(), nil, "", "ip", "-n", a.Namespace, "-6", "addr", "show", "dev", hostIf)
	if err != nil || strings.TrimSpace(out) != "" {
		t.Fatalf("IPv6 on %s's %s: %q, %v", a.Name, hostIf, out, err)
	}
	cmd, err := n.Command(t.Context(), "l", "true")
	if err != nil || cmd.Args[0] != "true" {
		t.Fatalf("local command: %v, %v", cmd, err)
	}
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
}

func mustRules(t *testing.T, n *Network) string {
	t.Helper()
	r, err := n.Rules(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// startSleeper starts a long sleep on host.
func startSleeper(t *testing.T, n *Network, host string) *exec.Cmd {
	t.Helper()
	cmd, err := n.Command(context.Background(), host, "sleep", "600")
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	return cmd
}

// waitKilled waits for cmd to end by SIGKILL.
func waitKilled(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "killed") {
			t.Fatalf("process in a removed namespace ended with %v, want killed", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("process in a removed namespace still runs")
	}
}

// assertNoAddr fails when an address of n's subnet remains in the host
// namespace.
func assertNoAddr(t *testing.T, n *Network) {
	t.Helper()
	// Only the network's own links count: once freed, its /24 may be taken
	// at once by another network of another process (go test runs
	// packages in parallel).
	out, err := exec.Command("ip", "-j", "-4", "addr", "show").Output()
	if err != nil {
		t.Fatal(err)
	}
	var links []struct {
		Name  string `json:"ifname"`
		Addrs []struct {
			Local string `json:"local"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if !strings.HasPrefix(l.Name, n.Prefix()+"-") {
			continue
		}
		for _, a := range l.Addrs {
			t.Errorf("%s of the closed network remains on %s", a.Local, l.Name)
		}
	}
}

// TestCutPort: a link narrowed to a port drops only TCP traffic to that
// port; another port of the same host stays reachable, and a bad port is
// refused before any rule is added.
func TestCutPort(t *testing.T) {
	t.Parallel()
	n := newNet(t)
	a, b := startAgent(t, n, "a"), startAgent(t, n, "b")
	other := link(a, b)
	other.Port = strconv.Itoa(agentPort + 1)
	heal := cut(t, n, other)
	connect(t, a, b)
	heal()
	l := link(a, b)
	l.Port = strconv.Itoa(agentPort)
	// A connection opened before the cut (an etcd watch stream) stalls
	// both ways: what b sends back from the port is dropped at a too, so
	// a stream cannot go on delivering through a one-way hole.
	id := open(t, a, b)
	roundTrip(t, a, id, "before")
	heal = cut(t, n, l)
	noConnect(t, a, b)
	connect(t, b, a)
	if rules := mustRules(t, n); !strings.Contains(rules, "tcp sport "+l.Port) {
		t.Errorf("no rule drops what b sends back from port %s:\n%s", l.Port, rules)
	}
	stalls(t, a, id, "during")
	heal()
	resumes(t, a, id, "during")
	connect(t, a, b)
	bad := link(a, b)
	bad.Port = "http"
	if _, err := n.Cut(t.Context(), []target.Link{bad}); err == nil || !strings.Contains(err.Error(), "port") {
		t.Fatalf("cut with port %q: %v, want an error naming the port", bad.Port, err)
	}
	if rules := mustRules(t, n); strings.Contains(rules, "podsafe cut") {
		t.Fatalf("rules left:\n%s", rules)
	}
}

// TestSweepStale: a network whose owner process died (a SIGKILLed run) is
// removed by the next New, whatever its prefix; a live one is not.
func TestSweepStale(t *testing.T) {
	needRoot(t)
	dead := testPrefix(t)
	n, err := New(t.Context(), Options{Prefix: dead})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.AddHost(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	// Its owner "dies": a process that has exited.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ownerDir(), dead), []byte(fmt.Sprintf("%d 1\n", cmd.Process.Pid)), 0o600); err != nil {
		t.Fatal(err)
	}
	live := newNet(t) // its New sweeps the dead network
	assertGone(t, dead)
	if _, err := os.Stat(filepath.Join(ownerDir(), dead)); !os.IsNotExist(err) {
		t.Errorf("the dead network's owner file is still there: %v", err)
	}
	body, err := os.ReadFile(filepath.Join(ownerDir(), live.Prefix()))
	if err != nil || !ownerAlive(string(body)) {
		t.Errorf("the live network's owner %q (%v) is not this process", body, err)
	}
	n.mu.Lock()
	n.closed = true // already removed by the sweep
	n.mu.Unlock()
}
