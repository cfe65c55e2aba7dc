package simnet

import (
	"io"
	"net"
	"os"
	"sync"
	"time"
)

const (
	// minBuffer is the first allocation of a pipe's ring buffer; it doubles as
	// data arrives, up to the configured maximum.
	minBuffer = 4 << 10
	// keepBuffer is the largest ring buffer an idle pipe keeps; a larger one is
	// released once drained so thousands of idle connections stay cheap.
	keepBuffer = 64 << 10
)

// mark describes a run of bytes written under the same link conditions, so a
// reader can tell which buffered bytes it may see yet.
type mark struct {
	end     uint64    // stream offset one past the run's last byte
	readyAt time.Time // when the run becomes readable; zero means at once
	held    uint64    // cut generation the run was written under; 0 if the link was up
}

// pipe is one direction of a connection: an in-memory ring buffer with one
// writing end and one reading end. All fields are guarded by mu; blocked
// readers and writers wait on cond, which is broadcast on every change of
// state, by deadline and delay timers, and by the Network when rules change.
type pipe struct {
	mu   sync.Mutex
	cond sync.Cond
	wake func() // broadcasts under mu; allocated once for the timers

	link *link // the direction data flows in
	back *link // the opposite direction, which carries resets
	max  int   // capacity in bytes; a writer blocks when it is full

	buf   []byte
	head  int    // index in buf of the first unread byte
	size  int    // unread bytes
	rOff  uint64 // stream offset of the next byte to read
	marks []mark // runs covering [rOff, rOff+size), oldest first

	fin     bool // the writer half-closed; EOF follows the data
	finMark mark // when and under which cut the FIN was sent
	wClosed bool // the writing end's connection is closed
	rClosed bool // the reading end's connection is closed; data is discarded
	err     error

	rDeadline, wDeadline  time.Time
	rTimer, wTimer, delay *time.Timer
}

func newPipe(l, back *link, max int) *pipe {
	p := &pipe{link: l, back: back, max: max}
	p.cond.L = &p.mu
	p.wake = func() {
		p.mu.Lock()
		p.cond.Broadcast()
		p.mu.Unlock()
	}
	return p
}

// read copies deliverable bytes into b, blocking until there are some, the
// stream ends, the connection fails or the read deadline passes.
func (p *pipe) read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		switch {
		case p.rClosed:
			return 0, net.ErrClosed
		case p.err != nil:
			return 0, p.err
		case expired(p.rDeadline):
			return 0, os.ErrDeadlineExceeded
		case len(b) == 0:
			return 0, nil
		}
		avail, wakeAt := p.deliverable()
		if avail > 0 {
			n := p.pop(b[:min(len(b), avail)])
			p.cond.Broadcast() // room for blocked writers
			return n, nil
		}
		if p.size == 0 && p.fin {
			ready, at := p.markReady(p.finMark, time.Time{})
			if ready {
				return 0, io.EOF
			}
			wakeAt = at
		}
		if !wakeAt.IsZero() {
			p.armDelay(wakeAt)
		}
		p.cond.Wait()
	}
}

// deliverable returns how many buffered bytes the reader may take now and, if
// the next run is only waiting for its delay, when it becomes readable.
func (p *pipe) deliverable() (int, time.Time) {
	var now time.Time
	avail := 0
	for _, m := range p.marks {
		ready, at := p.markReady(m, now)
		if !ready {
			return avail, at
		}
		now = at
		avail = int(m.end - p.rOff)
	}
	return avail, time.Time{}
}

// markReady reports whether the run m may be read. When m waits only for its
// delay it also returns the instant it becomes readable; otherwise the instant
// it was judged at (now, read lazily so undelayed runs never read the clock).
func (p *pipe) markReady(m mark, now time.Time) (bool, time.Time) {
	if m.held != 0 && m.held == p.link.held() {
		return false, time.Time{}
	}
	if m.readyAt.IsZero() {
		return true, now
	}
	if now.IsZero() {
		now = time.Now()
	}
	if now.Before(m.readyAt) {
		return false, m.readyAt
	}
	return true, now
}

// write buffers b, blocking while the pipe is full.
func (p *pipe) write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for {
		switch {
		case p.wClosed:
			return n, net.ErrClosed
		case p.err != nil:
			return n, p.err
		case p.fin:
			return n, errPipe
		case expired(p.wDeadline):
			return n, os.ErrDeadlineExceeded
		case len(b) == 0:
			return n, nil
		case p.rClosed:
			// The peer is gone. Its reset only arrives over a working link;
			// across a cut the bytes vanish as into a blackhole.
			if p.link.held() != 0 || p.back.held() != 0 {
				return n + len(b), nil
			}
			return n, errReset
		}
		if room := p.max - p.size; room > 0 {
			k := min(room, len(b))
			p.push(b[:k])
			n += k
			b = b[k:]
			p.cond.Broadcast()
			continue
		}
		p.cond.Wait()
	}
}

// conditions returns the mark fields for bytes sent now.
func (p *pipe) conditions() (readyAt time.Time, held uint64) {
	if d := p.link.latency(); d > 0 {
		readyAt = time.Now().Add(d)
	}
	return readyAt, p.link.held()
}

// push appends b to the ring buffer and records its conditions. The caller
// ensures it fits.
func (p *pipe) push(b []byte) {
	need := p.size + len(b)
	if need > len(p.buf) {
		p.grow(need)
	}
	tail := (p.head + p.size) % len(p.buf)
	if k := copy(p.buf[tail:], b); k < len(b) {
		copy(p.buf, b[k:])
	}
	p.size = need
	end := p.rOff + uint64(p.size)
	readyAt, held := p.conditions()
	if i := len(p.marks) - 1; i >= 0 && p.marks[i].held == held && p.marks[i].readyAt.Equal(readyAt) {
		p.marks[i].end = end
		return
	}
	p.marks = append(p.marks, mark{end: end, readyAt: readyAt, held: held})
}

// grow reallocates the ring buffer to hold at least need bytes, unwrapping the
// unread data to the front.
func (p *pipe) grow(need int) {
	n := max(2*len(p.buf), minBuffer)
	for n < need {
		n *= 2
	}
	nb := getBuffer(min(n, p.max))
	if p.size > 0 {
		k := copy(nb, p.buf[p.head:min(p.head+p.size, len(p.buf))])
		copy(nb[k:], p.buf[:p.size-k])
	}
	putBuffer(p.buf)
	p.buf, p.head = nb, 0
}

// pop moves len(b) unread bytes into b; the caller ensures they are there.
func (p *pipe) pop(b []byte) int {
	n := len(b)
	k := copy(b, p.buf[p.head:min(p.head+n, len(p.buf))])
	copy(b[k:], p.buf[:n-k])
	p.head = (p.head + n) % len(p.buf)
	p.size -= n
	p.rOff += uint64(n)
	i := 0
	for i < len(p.marks) && p.marks[i].end <= p.rOff {
		i++
	}
	p.marks = p.marks[i:]
	if p.size == 0 {
		p.head = 0
		p.marks = p.marks[:0]
		if len(p.buf) > keepBuffer {
			putBuffer(p.buf)
			p.buf = nil
		}
	}
	return n
}

// discard drops all buffered data.
func (p *pipe) discard() {
	p.rOff += uint64(p.size)
	putBuffer(p.buf)
	p.buf, p.head, p.size, p.marks = nil, 0, 0, nil
}

// armDelay makes sure the pipe is woken at t.
func (p *pipe) armDelay(t time.Time) {
	d := time.Until(t)
	if p.delay == nil {
		p.delay = time.AfterFunc(d, p.wake)
		return
	}
	p.delay.Reset(d)
}

// closeWrite sends a FIN: the reader gets io.EOF after the buffered data.
func (p *pipe) closeWrite() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sendFIN()
}

// closeWriter closes the writing end: a FIN, and later writes fail.
func (p *pipe) closeWriter() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sendFIN()
	p.wClosed = true
	stopTimer(&p.wTimer)
}

func (p *pipe) sendFIN() {
	if !p.fin {
		p.fin = true
		readyAt, held := p.conditions()
		p.finMark = mark{end: p.rOff + uint64(p.size), readyAt: readyAt, held: held}
	}
	p.cond.Broadcast()
}

// closeReader closes the reading end: buffered and later data is discarded
// and the writer is reset.
func (p *pipe) closeReader() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rClosed = true
	p.discard()
	stopTimer(&p.rTimer)
	stopTimer(&p.delay)
	p.cond.Broadcast()
}

// fail makes both ends return err from now on.
func (p *pipe) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = err
	}
	p.discard()
	stopTimer(&p.rTimer)
	stopTimer(&p.wTimer)
	stopTimer(&p.delay)
	p.cond.Broadcast()
}

func (p *pipe) setReadDeadline(t time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rDeadline = t
	p.rTimer = rearm(p.rTimer, t, p.wake)
	p.cond.Broadcast()
}

func (p *pipe) setWriteDeadline(t time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.wDeadline = t
	p.wTimer = rearm(p.wTimer, t, p.wake)
	p.cond.Broadcast()
}

// rearm points tm at deadline t, creating it if needed. A deadline already
// past needs no timer: the caller's broadcast wakes the waiters.
func rearm(tm *time.Timer, t time.Time, f func()) *time.Timer {
	if tm != nil {
		tm.Stop()
	}
	if t.IsZero() {
		return tm
	}
	d := time.Until(t)
	if d <= 0 {
		return tm
	}
	if tm == nil {
		return time.AfterFunc(d, f)
	}
	tm.Reset(d)
	return tm
}

func stopTimer(tm **time.Timer) {
	if *tm != nil {
		(*tm).Stop()
		*tm = nil
	}
}

func expired(deadline time.Time) bool {
	return !deadline.IsZero() && !time.Now().Before(deadline)
}

// bufferPools recycle ring buffers of the power-of-two sizes pipes grow
// through, so a busy connection that drains and refills its buffer does not
// allocate each time. Pool i holds buffers of minBuffer<<i bytes.
var bufferPools [11]sync.Pool

func bufferPool(size int) *sync.Pool {
	for i := range bufferPools {
		if minBuffer<<i == size {
			return &bufferPools[i]
		}
	}
	return nil
}

func getBuffer(size int) []byte {
	if pool := bufferPool(size); pool != nil {
		if b, ok := pool.Get().(*[]byte); ok {
			return *b
		}
	}
	return make([]byte, size)
}

func putBuffer(b []byte) {
	if pool := bufferPool(len(b)); pool != nil {
		pool.Put(&b)
	}
}
