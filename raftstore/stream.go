package raftstore

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// streamLayer carries raft's NetworkTransport over the caller's listener and
// dialer, so that the caller's network (and its partitions) carries raft too.
// It tracks its conns so that shutdown can break every one at once: raft's
// goroutines blocked on a black-holed link would otherwise hold up Close for
// a whole TransportTimeout.
type streamLayer struct {
	net.Listener
	addr   raftAddr
	dial   func(ctx context.Context, addr string) (net.Conn, error)
	ctx    context.Context // cancelled by shutdown
	cancel context.CancelFunc

	mu     sync.Mutex
	conns  map[*trackedConn]struct{}
	closed bool
}

var _ raft.StreamLayer = (*streamLayer)(nil)

func newStreamLayer(ln net.Listener, addr string, dial func(context.Context, string) (net.Conn, error)) *streamLayer {
	ctx, cancel := context.WithCancel(context.Background())
	return &streamLayer{Listener: ln, addr: raftAddr(addr), dial: dial, ctx: ctx, cancel: cancel,
		conns: map[*trackedConn]struct{}{}}
}

// Accept waits for the next conn from another member.
func (s *streamLayer) Accept() (net.Conn, error) {
	c, err := s.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return s.track(c)
}

// Dial opens a conn to another member's RaftAddr, giving up after timeout so
// a black-holed link cannot stall raft's replication goroutine for long.
func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx := s.ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	c, err := s.dial(ctx, string(address))
	if err != nil {
		return nil, err
	}
	return s.track(c)
}

func (s *streamLayer) track(c net.Conn) (net.Conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return nil, net.ErrClosed
	}
	tc := &trackedConn{Conn: c, layer: s}
	s.conns[tc] = struct{}{}
	return tc, nil
}

// shutdown aborts pending dials and closes every conn and the listener.
func (s *streamLayer) shutdown() {
	s.mu.Lock()
	s.closed = true
	conns := make([]*trackedConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	s.cancel()
	_ = s.Listener.Close()
	for _, c := range conns {
		c.Close()
	}
}

// Addr returns this member's RaftAddr: what the transport advertises must be
// what the others dial, whatever address the listener reports.
func (s *streamLayer) Addr() net.Addr { return s.addr }

// trackedConn removes itself from its stream layer when closed.
type trackedConn struct {
	net.Conn
	layer *streamLayer
	once  sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.layer.mu.Lock()
		delete(c.layer.conns, c)
		c.layer.mu.Unlock()
	})
	return c.Conn.Close()
}

// raftAddr is a net.Addr naming a member's RaftAddr.
type raftAddr string

func (a raftAddr) Network() string { return "raftstore" }
func (a raftAddr) String() string  { return string(a) }

// newRaftLogger returns an hclog.Logger for raft that passes warnings and
// errors to log at debug level, with raft's fields in a "raft" group.
// Partitions make raft log an error for every failed heartbeat, so anything
// louder would drown the component's own log.
func newRaftLogger(log *slog.Logger, name string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:        name,
		Level:       hclog.Warn,
		Output:      &hclogWriter{log: log},
		JSONFormat:  true,
		DisableTime: true,
	})
}

// hclogWriter receives hclog's JSON lines and re-emits them through slog.
type hclogWriter struct {
	mu  sync.Mutex
	buf []byte
	log *slog.Logger
}

func (w *hclogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.emit(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
}

func (w *hclogWriter) emit(line []byte) {
	var fields map[string]any
	if err := json.Unmarshal(line, &fields); err != nil {
		w.log.Debug("raft log", "raft_line", string(line))
		return
	}
	msg, _ := fields["@message"].(string)
	args := []any{"raft_level", fields["@level"], "raft_module", fields["@module"]}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		if len(k) > 0 && k[0] != '@' {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var group []any
	for _, k := range keys {
		group = append(group, slog.Any(k, fields[k]))
	}
	if len(group) > 0 {
		args = append(args, slog.Group("raft", group...))
	}
	w.log.Debug("raft: "+msg, args...)
}
