package kube

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/podsafe/podsafe/target"
)

// gateNet is the network of an existing cluster (the kubeconfig target):
// podsafe owns neither its hosts nor its network, only its own in-harness
// components (kubelets, the fencing controller). Their links are cut where
// podsafe owns them: at their own sockets. A cut host's new connections
// hang until the dial times out, as a dropped SYN does, and what its open
// connections send or receive is held back until the heal, as dropped and
// retransmitted segments are: no reset, no error, only silence, so HTTP/2
// pings and request timeouts notice the partition as they would on a real
// network. Links between two of podsafe's own hosts carry nothing (its
// components talk only to the API server), so cutting them changes nothing
// and is allowed.
type gateNet struct {
	mu    sync.Mutex
	gates map[string]*gate
	cuts  int
}

func newGateNet() *gateNet { return &gateNet{gates: map[string]*gate{}} }

// gate holds one host's traffic while any cut of it is in place.
type gate struct {
	mu      sync.Mutex
	cuts    map[int]bool
	changed chan struct{} // closed and replaced at each change
}

func newGate() *gate { return &gate{cuts: map[int]bool{}, changed: make(chan struct{})} }

// state reports whether the gate is cut and a channel closed at its next
// change.
func (g *gate) state() (bool, <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.cuts) > 0, g.changed
}

func (g *gate) set(id int, cut bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if cut {
		g.cuts[id] = true
	} else {
		delete(g.cuts, id)
	}
	close(g.changed)
	g.changed = make(chan struct{})
}

// hold waits while the gate is cut: until it heals (nil), stop closes or
// the deadline passes (os.ErrDeadlineExceeded; zero: none).
func (g *gate) hold(stop <-chan struct{}, deadline time.Time) error {
	for {
		cut, changed := g.state()
		if !cut {
			return nil
		}
		var t *time.Timer
		var timeout <-chan time.Time
		if !deadline.IsZero() {
			d := time.Until(deadline)
			if d <= 0 {
				return os.ErrDeadlineExceeded
			}
			t = time.NewTimer(d)
			timeout = t.C
		}
		var err error
		select {
		case <-changed:
		case <-stop:
			err = net.ErrClosed
		case <-timeout:
			err = os.ErrDeadlineExceeded
		}
		if t != nil {
			t.Stop()
		}
		if err != nil {
			return err
		}
	}
}

// dialTimeout is how long a dial from a cut host hangs before it fails, as
// a connect whose SYNs are dropped does (client-go's dialers give up about
// then).
const dialTimeout = 3 * time.Second

// dial connects through d unless the gate is cut, in which case it hangs
// until the heal (then connects) or until ctx or dialTimeout end.
func (g *gate) dial(ctx context.Context, d *net.Dialer, network, addr string) (net.Conn, error) {
	if cut, _ := g.state(); cut {
		hctx, cancel := context.WithTimeout(ctx, dialTimeout)
		err := g.hold(hctx.Done(), time.Time{})
		cancel()
		if err != nil {
			return nil, &net.OpError{Op: "dial", Net: network, Err: fmt.Errorf("%w: i/o timeout (link cut)", os.ErrDeadlineExceeded)}
		}
	}
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &gatedConn{Conn: conn, g: g, closed: make(chan struct{})}, nil
}

// gatedConn holds what crosses it while its gate is cut.
type gatedConn struct {
	net.Conn
	g         *gate
	closeOnce sync.Once
	closed    chan struct{}

	mu            sync.Mutex
	readDeadline  time.Time
	writeDeadline time.Time
	pending       []byte // read during a cut, held past a read deadline
}

func (c *gatedConn) deadlines() (time.Time, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.readDeadline, c.writeDeadline
}

// Read delivers what arrived only once the gate is open: data that came in
// during a cut is held, as a segment dropped and retransmitted after the
// heal would be.
func (c *gatedConn) Read(b []byte) (int, error) {
	c.mu.Lock()
	pending := c.pending
	c.mu.Unlock()
	if len(pending) > 0 {
		// Held at a deadline earlier: delivered once the gate opens.
		rd, _ := c.deadlines()
		if err := c.g.hold(c.closed, rd); err != nil {
			return 0, err
		}
		c.mu.Lock()
		n := copy(b, c.pending)
		c.pending = c.pending[n:]
		c.mu.Unlock()
		return n, nil
	}
	n, err := c.Conn.Read(b)
	if n > 0 {
		rd, _ := c.deadlines()
		if herr := c.g.hold(c.closed, rd); herr != nil {
			// Not lost: a later Read delivers it.
			c.mu.Lock()
			c.pending = append(c.pending, b[:n]...)
			c.mu.Unlock()
			return 0, herr
		}
	}
	return n, err
}

// Write sends only once the gate is open.
func (c *gatedConn) Write(b []byte) (int, error) {
	_, wd := c.deadlines()
	if err := c.g.hold(c.closed, wd); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

func (c *gatedConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

func (c *gatedConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.readDeadline, c.writeDeadline = t, t
	c.mu.Unlock()
	return c.Conn.SetDeadline(t)
}

func (c *gatedConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.readDeadline = t
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}

func (c *gatedConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.writeDeadline = t
	c.mu.Unlock()
	return c.Conn.SetWriteDeadline(t)
}

// gateOf returns host's gate (nil for a host podsafe does not own).
func (n *gateNet) gateOf(host string) *gate {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.gates[host]
}

func (n *gateNet) addHost(_ context.Context, name string) (netip.Addr, error) {
	return netip.Addr{}, fmt.Errorf("host %s: %w (podsafe starts no process on an existing cluster)", name, target.ErrUnsupported)
}

// addLocal gives one of podsafe's own components a gate; it dials from the
// harness's own address.
func (n *gateNet) addLocal(_ context.Context, name string) (netip.Addr, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.gates[name] == nil {
		n.gates[name] = newGate()
	}
	return netip.Addr{}, nil
}

func (n *gateNet) command(context.Context, string, string, ...string) (*exec.Cmd, error) {
	return nil, fmt.Errorf("podsafe starts no process on an existing cluster: %w", target.ErrUnsupported)
}

// cut closes the gates of podsafe's hosts on every link between one of them
// and a host it does not own. A link between two hosts podsafe does not own
// cannot be cut: the whole cut is refused.
func (n *gateNet) cut(_ context.Context, links []target.Link) (func() error, error) {
	var gates []*gate
	for _, l := range links {
		if l.From == l.To {
			return nil, fmt.Errorf("cutting %s: a link from a host to itself", l)
		}
		from, to := n.gateOf(l.From), n.gateOf(l.To)
		switch {
		case from == nil && to == nil:
			return nil, fmt.Errorf("cutting %s: %w (neither end is one of podsafe's own components)", l, target.ErrUnsupported)
		case from != nil && to != nil:
			// Two of podsafe's own hosts: nothing flows between them.
		case from != nil:
			gates = append(gates, from)
		default:
			gates = append(gates, to)
		}
	}
	n.mu.Lock()
	n.cuts++
	id := n.cuts
	n.mu.Unlock()
	for _, g := range gates {
		g.set(id, true)
	}
	var once sync.Once
	return func() error {
		once.Do(func() {
			for _, g := range gates {
				g.set(id, false)
			}
		})
		return nil
	}, nil
}

func (n *gateNet) canCut() bool { return true }

// rules lists the hosts held now.
func (n *gateNet) rules(context.Context) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var held []string
	for h, g := range n.gates {
		if cut, _ := g.state(); cut {
			held = append(held, h)
		}
	}
	slices.Sort(held)
	if len(held) == 0 {
		return ""
	}
	return "held at their sockets: " + strings.Join(held, ", ")
}

// close opens every gate, so nothing waits on them any more.
func (n *gateNet) close() error {
	n.mu.Lock()
	gates := n.gates
	n.gates = map[string]*gate{}
	n.mu.Unlock()
	for _, g := range gates {
		g.mu.Lock()
		clear(g.cuts)
		close(g.changed)
		g.changed = make(chan struct{})
		g.mu.Unlock()
	}
	return nil
}
