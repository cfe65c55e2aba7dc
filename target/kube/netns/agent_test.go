package netns

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The test binary re-executed with agentEnv set runs an agent instead of
// the tests: a TCP echo server and a UDP sink on agentPort, and a client
// driven by one-line commands on stdin, answered one line each on stdout.
// In a namespace (started with Network.Command) it is a host's processes;
// in the test process itself (newAgent with a local host's address) it is a
// local host's.
const (
	agentEnv  = "PODSAFE_NETNS_TEST_AGENT"
	agentPort = 7000
)

func TestMain(m *testing.M) {
	if os.Getenv(agentEnv) == "1" {
		os.Exit(agentMain(os.Stdin, os.Stdout))
	}
	os.Exit(m.Run())
}

// agentMain serves on every address of the namespace and answers the
// commands on in until it ends.
func agentMain(in io.Reader, out io.Writer) int {
	a, err := newAgent(netip.IPv4Unspecified(), agentPort)
	if err != nil {
		fmt.Fprintln(out, "error", err)
		return 1
	}
	fmt.Fprintln(out, "ready")
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		fmt.Fprintln(out, a.handle(sc.Text()))
	}
	return 0
}

// agent is one host's test programs: servers and a client.
type agent struct {
	local   netip.Addr // the address to dial from (unspecified: any)
	tcpAddr string     // where the echo server listens
	udpAddr string     // where the datagram sink listens
	ln      net.Listener
	pc      net.PacketConn

	mu    sync.Mutex
	conns map[int]net.Conn
	next  int
	seen  map[string]bool // datagrams received
}

// newAgent starts the servers on addr:port (port 0: any free port).
func newAgent(addr netip.Addr, port int) (*agent, error) {
	ln, err := net.Listen("tcp4", netip.AddrPortFrom(addr, uint16(port)).String())
	if err != nil {
		return nil, err
	}
	pc, err := net.ListenPacket("udp4", netip.AddrPortFrom(addr, uint16(port)).String())
	if err != nil {
		ln.Close()
		return nil, err
	}
	a := &agent{local: addr, ln: ln, pc: pc, tcpAddr: ln.Addr().String(), udpAddr: pc.LocalAddr().String(),
		conns: map[int]net.Conn{}, seen: map[string]bool{}}
	go a.serveTCP()
	go a.serveUDP()
	return a, nil
}

func (a *agent) close() {
	a.ln.Close()
	a.pc.Close()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range a.conns {
		c.Close()
	}
}

func (a *agent) serveTCP() {
	for {
		c, err := a.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			sc := bufio.NewScanner(c)
			for sc.Scan() {
				if _, err := fmt.Fprintln(c, sc.Text()); err != nil {
					return
				}
			}
		}()
	}
}

func (a *agent) serveUDP() {
	buf := make([]byte, 1500)
	for {
		k, _, err := a.pc.ReadFrom(buf)
		if err != nil {
			return
		}
		a.mu.Lock()
		a.seen[string(buf[:k])] = true
		a.mu.Unlock()
	}
}

// handle runs one command:
//
//	dial ADDR MS        → ok ID | timeout | refused | other …
//	write ID TEXT       → ok | …
//	read ID MS          → ok TEXT | timeout | …
//	close ID            → ok
//	udp ADDR TOKEN      → ok | …
//	seen TOKEN          → yes | no
func (a *agent) handle(line string) string {
	f := strings.Fields(line)
	if len(f) < 2 {
		return "other: bad command " + line
	}
	switch f[0] {
	case "dial":
		ms, _ := strconv.Atoi(f[2])
		d := net.Dialer{Timeout: time.Duration(ms) * time.Millisecond}
		if !a.local.IsUnspecified() {
			d.LocalAddr = &net.TCPAddr{IP: a.local.AsSlice()}
		}
		c, err := d.Dial("tcp4", f[1])
		if err != nil {
			return classify(err)
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		a.next++
		a.conns[a.next] = c
		return fmt.Sprintf("ok %d", a.next)
	case "write", "read", "close":
		id, _ := strconv.Atoi(f[1])
		a.mu.Lock()
		c := a.conns[id]
		if f[0] == "close" {
			delete(a.conns, id)
		}
		a.mu.Unlock()
		if c == nil {
			return "other: no connection " + f[1]
		}
		switch f[0] {
		case "write":
			if _, err := fmt.Fprintln(c, f[2]); err != nil {
				return classify(err)
			}
			return "ok"
		case "read":
			ms, _ := strconv.Atoi(f[2])
			c.SetReadDeadline(time.Now().Add(time.Duration(ms) * time.Millisecond))
			var b [1]byte
			var s []byte
			for {
				// Byte by byte: nothing is kept in a buffer across reads.
				if _, err := c.Read(b[:]); err != nil {
					return classify(err)
				}
				if b[0] == '\n' {
					return "ok " + string(s)
				}
				s = append(s, b[0])
			}
		default:
			c.Close()
			return "ok"
		}
	case "udp":
		var laddr *net.UDPAddr
		if !a.local.IsUnspecified() {
			laddr = &net.UDPAddr{IP: a.local.AsSlice()}
		}
		raddr, err := net.ResolveUDPAddr("udp4", f[1])
		if err != nil {
			return classify(err)
		}
		c, err := net.DialUDP("udp4", laddr, raddr)
		if err != nil {
			return classify(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte(f[2])); err != nil {
			return classify(err)
		}
		return "ok"
	case "seen":
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.seen[f[1]] {
			return "yes"
		}
		return "no"
	}
	return "other: bad command " + line
}

// classify names how a network operation failed.
func classify(err error) string {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	}
	return "other: " + strings.ReplaceAll(err.Error(), "\n", " ")
}
