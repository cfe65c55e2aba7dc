package simnet

import (
	"net"
	"sync"
)

// listener accepts simulated connections on one address. Accept and Close are
// safe for concurrent use.
type listener struct {
	n    *Network
	addr Addr

	mu     sync.Mutex
	queue  []*Conn // dialled, not yet accepted
	closed bool

	ready chan struct{} // signalled when the queue grows; capacity 1
	done  chan struct{} // closed by Close
}

var _ net.Listener = (*listener)(nil)

func newListener(n *Network, addr Addr) *listener {
	return &listener{n: n, addr: addr, ready: make(chan struct{}, 1), done: make(chan struct{})}
}

// enqueue hands a dialled connection to Accept. Its dial has already
// succeeded, as a TCP handshake completes before the application accepts.
func (l *listener) enqueue(c *Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.queue = append(l.queue, c)
	l.signal()
}

func (l *listener) signal() {
	select {
	case l.ready <- struct{}{}:
	default:
	}
}

// Accept waits for and returns the next connection. After Close it returns an
// error matching net.ErrClosed.
func (l *listener) Accept() (net.Conn, error) {
	for {
		l.mu.Lock()
		if len(l.queue) > 0 {
			c := l.queue[0]
			l.queue[0] = nil
			l.queue = l.queue[1:]
			if len(l.queue) > 0 {
				l.signal() // another Accept may be waiting
			}
			l.mu.Unlock()
			return c, nil
		}
		if l.closed {
			l.mu.Unlock()
			return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.addr, Err: net.ErrClosed}
		}
		l.mu.Unlock()
		select {
		case <-l.ready:
		case <-l.done:
		}
	}
}

// Close stops listening: Accept returns net.ErrClosed, later dials are refused
// and connections dialled but not yet accepted are reset. Connections already
// accepted keep working.
func (l *listener) Close() error {
	l.n.removeListener(l)
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return &net.OpError{Op: "close", Net: "tcp", Addr: l.addr, Err: net.ErrClosed}
	}
	l.closed = true
	queued := l.queue
	l.queue = nil
	close(l.done)
	l.mu.Unlock()
	for _, c := range queued {
		l.n.failPair(c.pair, errReset)
	}
	return nil
}

// Addr returns the listening address.
func (l *listener) Addr() net.Addr { return l.addr }
