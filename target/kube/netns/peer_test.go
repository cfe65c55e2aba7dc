package netns

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/podsafe/podsafe/target"
)

// dialMS is the connection timeout of the agents' dials: generous for a
// bridge on one machine, where an uncut connection takes microseconds.
const dialMS = 1500

// needRoot skips the test when Check fails.
func needRoot(t *testing.T) {
	t.Helper()
	if err := Check(); err != nil {
		t.Skip(err.Error())
	}
}

// testPrefix is a prefix no other test (of this or another package's test
// process) uses.
func testPrefix(t *testing.T) string {
	t.Helper()
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "t" + hex.EncodeToString(b[:])
}

// newNet makes a Network closed (and checked to leave nothing) at the end
// of the test.
func newNet(t *testing.T) *Network {
	t.Helper()
	needRoot(t)
	prefix := testPrefix(t)
	n, err := New(t.Context(), Options{Prefix: prefix, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
		assertGone(t, prefix)
	})
	return n
}

// assertGone fails the test when anything of prefix remains.
func assertGone(t *testing.T, prefix string) {
	t.Helper()
	ctx := context.Background()
	spaces, err := namespaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range spaces {
		if ownedBy(prefix, ns) {
			t.Errorf("namespace %s remains", ns)
		}
	}
	links, err := linkNames(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for l := range links {
		if strings.HasPrefix(l, prefix+"-") {
			t.Errorf("link %s remains", l)
		}
	}
	tables, err := tableNames(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for tb := range tables {
		if strings.Contains(tb, prefix) {
			t.Errorf("table %s remains", tb)
		}
	}
}

// peer is a host's agent as the test drives it.
type peer struct {
	host Host
	tcp  string // where others connect to its echo server
	udp  string // where others send it datagrams

	mu    sync.Mutex
	local *agent // a local host's agent, in the test process
	cmd   *exec.Cmd
	in    *os.File
	lines chan string
}

// do runs one agent command and returns its answer.
func (p *peer) do(t *testing.T, format string, args ...any) string {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	line := fmt.Sprintf(format, args...)
	if p.local != nil {
		return p.local.handle(line)
	}
	// Errorf, not Fatalf: do runs in goroutines too. The caller sees an
	// answer it does not expect.
	if _, err := fmt.Fprintln(p.in, line); err != nil {
		t.Errorf("%s: sending %q: %v", p.host.Name, line, err)
		return "failed"
	}
	select {
	case l, ok := <-p.lines:
		if !ok {
			t.Errorf("%s: agent ended before answering %q", p.host.Name, line)
			return "failed"
		}
		return l
	case <-time.After(time.Minute):
		t.Errorf("%s: no answer to %q", p.host.Name, line)
		return "failed"
	}
}

// startAgent adds a namespace host and starts an agent in it. It checks
// that the command's pid is the agent's own, in the host's namespace.
func startAgent(t *testing.T, n *Network, name string) *peer {
	t.Helper()
	ctx := t.Context()
	h, err := n.AddHost(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	p := startAgentOn(t, n, h)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pid := p.cmd.Process.Pid
	if got, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err != nil || filepath.Clean(got) != filepath.Clean(exe) {
		t.Fatalf("pid %d of Command runs %q (%v), not the program %q", pid, got, err, exe)
	}
	out, err := exec.CommandContext(ctx, "ip", "netns", "identify", fmt.Sprint(pid)).Output()
	if err != nil || strings.TrimSpace(string(out)) != h.Namespace {
		t.Fatalf("pid %d is in namespace %q (%v), not %q", pid, out, err, h.Namespace)
	}
	return p
}

// startAgentOn starts an agent on namespace host h (already added).
func startAgentOn(t *testing.T, n *Network, h Host) *peer {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := n.Command(context.Background(), h.Name, exe)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(os.Environ(), agentEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	in, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin = in
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	in.Close()
	p := &peer{host: h, cmd: cmd, in: inW, lines: make(chan string, 1),
		tcp: netip.AddrPortFrom(h.Addr, agentPort).String(), udp: netip.AddrPortFrom(h.Addr, agentPort).String()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(p.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		inW.Close() // the agent ends at the end of its input
		<-done
		if err := cmd.Wait(); err != nil && !strings.Contains(err.Error(), "killed") {
			t.Errorf("agent on %s: %v; stderr: %s", h.Name, err, stderr.String())
		}
	})
	select {
	case l := <-p.lines:
		if l != "ready" {
			t.Fatalf("agent on %s: %q; stderr: %s", h.Name, l, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("agent on %s did not start; stderr: %s", h.Name, stderr.String())
	}
	return p
}

// startLocal adds a local host and starts its agent in the test process,
// bound to the host's address.
func startLocal(t *testing.T, n *Network, name string) *peer {
	t.Helper()
	h, err := n.AddLocal(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	a, err := newAgent(h.Addr, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.close)
	return &peer{host: h, local: a, tcp: a.tcpAddr, udp: a.udpAddr}
}

// link is the link from → to.
func link(from, to *peer) target.Link { return target.Link{From: from.host.Name, To: to.host.Name} }

// cut cuts links and returns their heal.
func cut(t *testing.T, n *Network, links ...target.Link) func() {
	t.Helper()
	heal, err := n.Cut(t.Context(), links)
	if err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if err := heal(); err != nil {
			t.Fatal(err)
		}
	}
}

// open connects from → to and checks the echo; it returns the connection.
func open(t *testing.T, from, to *peer) string {
	t.Helper()
	r := from.do(t, "dial %s %d", to.tcp, dialMS)
	id, ok := strings.CutPrefix(r, "ok ")
	if !ok {
		t.Fatalf("%s dialing %s: %s, want a connection", from.host.Name, to.host.Name, r)
	}
	roundTrip(t, from, id, "hello")
	return id
}

// roundTrip sends text on connection id of from and reads its echo.
func roundTrip(t *testing.T, from *peer, id, text string) {
	t.Helper()
	if r := from.do(t, "write %s %s", id, text); r != "ok" {
		t.Fatalf("%s writing on %s: %s", from.host.Name, id, r)
	}
	if r := from.do(t, "read %s %d", id, 30000); r != "ok "+text {
		t.Fatalf("%s reading on %s: %s, want the echo of %s", from.host.Name, id, r, text)
	}
}

// connect checks that from connects to to, then closes the connection.
func connect(t *testing.T, from, to *peer) {
	t.Helper()
	id := open(t, from, to)
	from.do(t, "close %s", id)
}

// noConnect checks that each pair's dial (from, to, from, to…) times out,
// dialing from different peers at once.
func noConnect(t *testing.T, pairs ...*peer) {
	t.Helper()
	res := make([]string, len(pairs)/2)
	var wg sync.WaitGroup
	for i := 0; i+1 < len(pairs); i += 2 {
		wg.Go(func() { res[i/2] = pairs[i].do(t, "dial %s %d", pairs[i+1].tcp, dialMS) })
	}
	wg.Wait()
	for i, r := range res {
		from, to := pairs[2*i], pairs[2*i+1]
		if strings.HasPrefix(r, "ok ") {
			from.do(t, "close %s", strings.TrimPrefix(r, "ok "))
		}
		if r != "timeout" {
			t.Errorf("%s dialing %s across a cut: %s, want a timeout (packets dropped, not refused)", from.host.Name, to.host.Name, r)
		}
	}
}

// stalls checks that connection id of from delivers no data now: what it
// writes is not echoed within a second. The text stays in flight. It may
// run in a goroutine of its own.
func stalls(t *testing.T, from *peer, id, text string) {
	t.Helper()
	if r := from.do(t, "write %s %s", id, text); r != "ok" {
		t.Errorf("%s writing on %s: %s", from.host.Name, id, r)
		return
	}
	if r := from.do(t, "read %s %d", id, 1000); r != "timeout" {
		t.Errorf("%s reading on %s across a cut: %s, want a timeout", from.host.Name, id, r)
	}
}

// resumes checks that the text written while connection id stalled is
// echoed now (when TCP retransmits it), and that the connection goes on.
// It may run in a goroutine of its own.
func resumes(t *testing.T, from *peer, id, text string) {
	t.Helper()
	if r := from.do(t, "read %s %d", id, 30000); r != "ok "+text {
		t.Errorf("%s reading on %s after heal: %s, want %s", from.host.Name, id, r, text)
		return
	}
	if r := from.do(t, "write %s again", id); r != "ok" {
		t.Errorf("%s writing on %s after heal: %s", from.host.Name, id, r)
		return
	}
	if r := from.do(t, "read %s %d", id, 30000); r != "ok again" {
		t.Errorf("%s reading on %s after heal: %s, want again", from.host.Name, id, r)
	}
}

// concurrently runs fs at once (each driving a different peer).
func concurrently(fs ...func()) {
	var wg sync.WaitGroup
	for _, f := range fs {
		wg.Go(f)
	}
	wg.Wait()
}

// delivered checks that a datagram from → to arrives.
func delivered(t *testing.T, from, to *peer, token string) {
	t.Helper()
	if r := from.do(t, "udp %s %s", to.udp, token); r != "ok" {
		t.Fatalf("%s sending to %s: %s", from.host.Name, to.host.Name, r)
	}
	for deadline := time.Now().Add(10 * time.Second); to.do(t, "seen %s", token) != "yes"; {
		if time.Now().After(deadline) {
			t.Fatalf("datagram %s from %s to %s did not arrive", token, from.host.Name, to.host.Name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// dropped checks that a datagram from → to does not arrive: a datagram
// sent after it to the same receiver over an uncut link (marker → to)
// arrives, and a while later the first still has not.
func dropped(t *testing.T, from, to, marker *peer, token string) {
	t.Helper()
	if r := from.do(t, "udp %s %s", to.udp, token); r != "ok" {
		t.Fatalf("%s sending to %s: %s", from.host.Name, to.host.Name, r)
	}
	delivered(t, marker, to, token+"-marker")
	time.Sleep(200 * time.Millisecond)
	if r := to.do(t, "seen %s", token); r != "no" {
		t.Errorf("datagram %s from %s to %s arrived across a cut", token, from.host.Name, to.host.Name)
	}
}
