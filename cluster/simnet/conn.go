package simnet

import (
	"io"
	"net"
	"sync/atomic"
	"time"
)

// Addr is a simulated host and port. It implements net.Addr.
type Addr struct {
	Host, Port string
}

// Network returns "tcp": simulated connections behave as TCP ones do.
func (a Addr) Network() string { return "tcp" }

// String returns "host:port".
func (a Addr) String() string { return a.Host + ":" + a.Port }

// Conn is one end of a simulated connection. It implements net.Conn and, like
// *net.TCPConn, CloseWrite. Each direction buffers up to Options.BufferSize
// bytes before Write blocks. Read and Write may be called concurrently with
// each other, with the deadline setters and with Close, from any goroutines.
type Conn struct {
	local, remote Addr
	in, out       *pipe
	pair          *pair
	closed        atomic.Bool
}

// pair is the state shared by the two ends of a connection. The fields below
// the links are guarded by the Network's mutex.
type pair struct {
	n      *Network
	a, b   *Conn // dialling and accepting ends
	ab, ba *link // a->b and b->a

	detect    *time.Timer // running while a cut crosses the connection
	detectGen uint64      // invalidates a detection timer that fired late
	open      int         // ends not yet closed
	done      bool        // no longer tracked: failed or closed on both ends
}

// fail makes every operation on both ends return err.
func (p *pair) fail(err error) {
	p.a.in.fail(err)
	p.a.out.fail(err)
}

// wake lets blocked operations on both ends re-examine the links.
func (p *pair) wake() {
	p.a.in.wake()
	p.a.out.wake()
}

// Read reads bytes the peer sent and the network has delivered. It returns
// io.EOF once the peer closed (or CloseWrite'd) and all its bytes were read.
func (c *Conn) Read(b []byte) (int, error) {
	n, err := c.in.read(b)
	if err != nil && err != io.EOF {
		err = c.opError("read", err)
	}
	return n, err
}

// Write buffers b for the peer, blocking while the direction's buffer is full.
func (c *Conn) Write(b []byte) (int, error) {
	n, err := c.out.write(b)
	if err != nil {
		err = c.opError("write", err)
	}
	return n, err
}

// Close closes both directions: the peer reads io.EOF after the bytes already
// sent, and its later writes fail with a reset unless a cut hides it.
func (c *Conn) Close() error {
	if c.closed.Swap(true) {
		return c.opError("close", net.ErrClosed)
	}
	c.out.closeWriter()
	c.in.closeReader()
	c.pair.n.endClosed(c.pair)
	return nil
}

// CloseWrite closes the sending direction only: the peer reads io.EOF after
// the bytes already sent, and this end can still read.
func (c *Conn) CloseWrite() error {
	if c.closed.Load() {
		return c.opError("close", net.ErrClosed)
	}
	c.out.closeWrite()
	return nil
}

// LocalAddr returns this end's address; a dialling end has a unique port.
func (c *Conn) LocalAddr() net.Addr { return c.local }

// RemoteAddr returns the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

// SetDeadline sets the read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// SetReadDeadline sets the read deadline; it also applies to a Read already
// blocked, so a time in the past aborts it with os.ErrDeadlineExceeded.
func (c *Conn) SetReadDeadline(t time.Time) error {
	if c.closed.Load() {
		return c.opError("set", net.ErrClosed)
	}
	c.in.setReadDeadline(t)
	return nil
}

// SetWriteDeadline sets the write deadline; it also applies to a Write
// already blocked.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	if c.closed.Load() {
		return c.opError("set", net.ErrClosed)
	}
	c.out.setWriteDeadline(t)
	return nil
}

func (c *Conn) opError(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.local, Addr: c.remote, Err: err}
}
