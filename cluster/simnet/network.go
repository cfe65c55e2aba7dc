// Package simnet is an in-memory network of named hosts that every byte
// between in-process components travels through, so that one rule cuts raft
// traffic, HTTP and store forwarding alike.
//
// Connections model TCP rather than pipes: a cut link blackholes (dials stall
// and time out, bytes are held, not refused), a connection cut for longer than
// a detection timeout fails on both ends as keep-alives would make it, and a
// delayed link delivers each byte its latency after it was sent. All timing is
// wall time.
package simnet

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Options configures a Network. The zero value means the defaults.
type Options struct {
	// DetectTimeout is how long a connection may stay cut, in either
	// direction, before it fails on both ends. Default 2s.
	DetectTimeout time.Duration
	// DialTimeout bounds a dial that stalls across a cut when the caller's
	// context does not end it sooner. Default 10s.
	DialTimeout time.Duration
	// BufferSize is the number of bytes one direction of a connection buffers
	// before writes block. Default 4 MiB.
	BufferSize int
	// Logger receives rule changes and connection failures at debug level.
	// Default: discard.
	Logger *slog.Logger

	_ struct{}
}

// Default option values.
const (
	DefaultDetectTimeout = 2 * time.Second
	DefaultDialTimeout   = 10 * time.Second
	DefaultBufferSize    = 4 << 20
)

// Validate reports the first option that is out of range.
func (o Options) Validate() error {
	switch {
	case o.DetectTimeout < 0:
		return fmt.Errorf("simnet: DetectTimeout %s is negative; use 0 for the default", o.DetectTimeout)
	case o.DialTimeout < 0:
		return fmt.Errorf("simnet: DialTimeout %s is negative; use 0 for the default", o.DialTimeout)
	case o.BufferSize < 0:
		return fmt.Errorf("simnet: BufferSize %d is negative; use 0 for the default", o.BufferSize)
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.DetectTimeout == 0 {
		o.DetectTimeout = DefaultDetectTimeout
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.BufferSize == 0 {
		o.BufferSize = DefaultBufferSize
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Network is a simulated network of named hosts. All methods are safe for
// concurrent use, and rules may change at any time from any goroutine.
type Network struct {
	opts Options
	log  *slog.Logger

	mu        sync.Mutex
	closed    bool
	hosts     map[string]struct{}
	listeners map[string]*listener
	links     map[linkKey]*link
	pairs     map[*pair]struct{}
	changed   chan struct{} // closed and replaced whenever rules change
	nextPort  int
	fenced    map[string]bool // hosts cut by FenceHost: no heal reaches them
	ports     portState       // port rules, holds and the flows they act on (ports.go)
}

// New returns a network with no hosts and no rules. It panics if opts fails
// Validate; call Validate first to handle that as an error.
func New(opts Options) *Network {
	if err := opts.Validate(); err != nil {
		panic(err)
	}
	opts = opts.withDefaults()
	return &Network{
		opts:      opts,
		log:       opts.Logger,
		hosts:     map[string]struct{}{},
		listeners: map[string]*listener{},
		links:     map[linkKey]*link{},
		pairs:     map[*pair]struct{}{},
		changed:   make(chan struct{}),
		nextPort:  32768,
		fenced:    map[string]bool{},
	}
}

// Listen listens on addr ("host:port"; port 0 picks a free one). It fails with
// ErrAddressInUse if addr already has a listener. Safe for concurrent use.
func (n *Network) Listen(addr string) (net.Listener, error) {
	a, err := parseAddr(addr)
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: "tcp", Err: err}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, &net.OpError{Op: "listen", Net: "tcp", Addr: a, Err: ErrNetworkClosed}
	}
	if a.Port == "0" {
		a.Port = n.portLocked()
	}
	if n.listeners[a.String()] != nil {
		return nil, &net.OpError{Op: "listen", Net: "tcp", Addr: a, Err: ErrAddressInUse}
	}
	n.addHostLocked(a.Host)
	ln := newListener(n, a)
	n.listeners[a.String()] = ln
	return ln, nil
}

// Dial connects host from to addr. Across a cut link (either direction) it
// stalls until the link heals, ctx ends or DialTimeout passes; a deadline
// fails it with context.DeadlineExceeded, whose Timeout method reports true,
// and a cancellation with context.Canceled. With no listener at addr it fails
// at once with syscall.ECONNREFUSED. A delayed link adds its round trip. The
// returned connection is a *Conn. Safe for concurrent use.
func (n *Network) Dial(ctx context.Context, from, addr string) (net.Conn, error) {
	to, err := parseAddr(addr)
	if err == nil && from == "" {
		err = fmt.Errorf("dialing from an unnamed host: %w", ErrBadAddress)
	}
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: err}
	}
	fail := func(err error) (net.Conn, error) {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: to, Err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, n.opts.DialTimeout)
	defer cancel()
	handshook := false
	for {
		n.mu.Lock()
		if n.closed {
			n.mu.Unlock()
			return fail(ErrNetworkClosed)
		}
		n.addHostLocked(from)
		n.addHostLocked(to.Host)
		ab, ba := n.flowLinksLocked(from, to)
		if ab.held() != 0 || ba.held() != 0 {
			// The SYN (or its answer) is lost; retransmissions get through
			// once the link heals.
			changed := n.changed
			n.mu.Unlock()
			handshook = false
			select {
			case <-changed:
				continue
			case <-ctx.Done():
				return fail(ctx.Err())
			}
		}
		if rtt := ab.latency() + ba.latency(); rtt > 0 && !handshook {
			n.mu.Unlock()
			handshook = true
			if err := sleep(ctx, rtt); err != nil {
				return fail(err)
			}
			continue // the rules may have changed meanwhile
		}
		ln := n.listeners[to.String()]
		if ln == nil {
			n.mu.Unlock()
			return fail(errRefused)
		}
		c := n.connectLocked(from, ab, ba, ln)
		n.mu.Unlock()
		return c, nil
	}
}

// DialContext returns a dial function for host from, in the shape of
// http.Transport.DialContext and rest.Config.Dial. It accepts the networks
// "tcp", "tcp4" and "tcp6". Safe for concurrent use.
func (n *Network) DialContext(from string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		switch network {
		case "tcp", "tcp4", "tcp6":
			return n.Dial(ctx, from, addr)
		}
		return nil, &net.OpError{Op: "dial", Net: network, Err: net.UnknownNetworkError(network)}
	}
}

// AddHost makes host known, so that Isolate of another host cuts it too.
// Hosts become known on their own when they listen, dial, are dialled or are
// named in a rule. Safe for concurrent use.
func (n *Network) AddHost(host string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.addHostLocked(host)
}

// Hosts returns the known hosts, sorted. Safe for concurrent use.
func (n *Network) Hosts() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	hosts := make([]string, 0, len(n.hosts))
	for h := range n.hosts {
		hosts = append(hosts, h)
	}
	slices.Sort(hosts)
	return hosts
}

// Close closes every listener and fails every connection with
// ErrNetworkClosed; later Listen and Dial calls fail the same way. It is
// idempotent and safe for concurrent use.
func (n *Network) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	lns := make([]*listener, 0, len(n.listeners))
	for _, ln := range n.listeners {
		lns = append(lns, ln)
	}
	pairs := make([]*pair, 0, len(n.pairs))
	for p := range n.pairs {
		pairs = append(pairs, p)
	}
	for _, p := range pairs {
		n.dropLocked(p)
	}
	close(n.changed)
	n.mu.Unlock()
	for _, p := range pairs {
		p.fail(ErrNetworkClosed)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return nil
}

// connectLocked creates a connection from host from to ln and queues its
// accepting end.
func (n *Network) connectLocked(from string, ab, ba *link, ln *listener) *Conn {
	local := Addr{Host: from, Port: n.portLocked()}
	toB, toA := newPipe(ab, ba, n.opts.BufferSize), newPipe(ba, ab, n.opts.BufferSize)
	p := &pair{n: n, ab: ab, ba: ba, open: 2}
	p.a = &Conn{local: local, remote: ln.addr, in: toA, out: toB, pair: p}
	p.b = &Conn{local: ln.addr, remote: local, in: toB, out: toA, pair: p}
	n.pairs[p] = struct{}{}
	n.watchLocked(p)
	ln.enqueue(p.b)
	return p.a
}

// dropLocked stops tracking a connection that has failed or been closed on
// both ends.
func (n *Network) dropLocked(p *pair) {
	if p.done {
		return
	}
	p.done = true
	delete(n.pairs, p)
	if p.detect != nil {
		p.detect.Stop()
		p.detect = nil
	}
	p.detectGen++
}

// failPair makes both ends of p fail with err and stops tracking it.
func (n *Network) failPair(p *pair, err error) {
	n.mu.Lock()
	n.dropLocked(p)
	n.mu.Unlock()
	p.fail(err)
}

// endClosed records that one end of p closed.
func (n *Network) endClosed(p *pair) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if p.open--; p.open == 0 {
		n.dropLocked(p)
	}
}

func (n *Network) removeListener(ln *listener) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.listeners[ln.addr.String()] == ln {
		delete(n.listeners, ln.addr.String())
	}
}

func (n *Network) addHostLocked(host string) {
	if host == "" {
		return
	}
	if _, known := n.hosts[host]; known {
		return
	}
	n.hosts[host] = struct{}{}
	// A fenced host is cut from hosts that appear after its fence too.
	for f := range n.fenced {
		n.setCutLocked(host, f, true)
		n.setCutLocked(f, host, true)
	}
}

// portLocked returns a port no connection or listener of this network has used.
func (n *Network) portLocked() string {
	n.nextPort++
	return strconv.Itoa(n.nextPort - 1)
}

// parseAddr splits "host:port", requiring a non-empty host without colons and
// a numeric port.
func parseAddr(addr string) (Addr, error) {
	host, port, ok := strings.Cut(addr, ":")
	if !ok || host == "" || port == "" || strings.Trim(port, "0123456789") != "" {
		return Addr{}, fmt.Errorf("address %q: %w", addr, ErrBadAddress)
	}
	return Addr{Host: host, Port: port}, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
