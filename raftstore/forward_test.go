package raftstore

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// fakeLeader serves the forward protocol's socket with handle.
func fakeLeader(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	ln := listenLoopback(t, "127.0.0.1:0")
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				handle(conn)
			}()
		}
	}()
	return ln.Addr().String()
}

// replyWith answers every request with status and body.
func replyWith(status int, body string) func(net.Conn) {
	return func(conn net.Conn) {
		br := bufio.NewReader(conn)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, req.Body)
			resp := &http.Response{StatusCode: status, ProtoMajor: 1, ProtoMinor: 1,
				Header: http.Header{}, Body: http.NoBody, ContentLength: int64(len(body))}
			resp.Body = readCloser{strings.NewReader(body)}
			if err := resp.Write(conn); err != nil {
				return
			}
		}
	}
}

type readCloser struct{ *strings.Reader }

func (readCloser) Close() error { return nil }

func codeReply(code, msg string) string {
	b, _ := json.Marshal(forwardReply{Code: code, Message: msg})
	return string(b)
}

func TestForwardClientOutcomes(t *testing.T) {
	var dialer net.Dialer
	tcp := func(ctx context.Context, addr string) (net.Conn, error) { return dialer.DialContext(ctx, "tcp", addr) }
	refuse := func(context.Context, string) (net.Conn, error) { return nil, errors.New("connection refused") }
	blackhole := func(ctx context.Context, _ string) (net.Conn, error) { <-ctx.Done(); return nil, ctx.Err() }

	tests := []struct {
		name    string
		handle  func(net.Conn)
		dial    func(context.Context, string) (net.Conn, error)
		wantErr error
		wantMsg string
	}{
		{name: "dial refused: not sent", dial: refuse, handle: replyWith(200, "{}"), wantErr: errRetry},
		{name: "dial black-holed: not sent", dial: blackhole, handle: replyWith(200, "{}"), wantErr: errRetry},
		{name: "hang-up after the request: unknown", dial: tcp, handle: func(conn net.Conn) {
			_, _ = http.ReadRequest(bufio.NewReader(conn))
		}, wantErr: ErrTimeout},
		{name: "no reply before the deadline: unknown", dial: tcp, handle: func(conn net.Conn) {
			_, _ = http.ReadRequest(bufio.NewReader(conn))
			time.Sleep(2 * time.Second)
		}, wantErr: ErrTimeout},
		{name: "server error: unknown", dial: tcp, handle: replyWith(500, ""), wantErr: ErrTimeout},
		{name: "not leader: retry", dial: tcp, handle: replyWith(200, codeReply(codeNotLeader, "m1 does not lead")), wantErr: errRetry},
		{name: "conflict survives", dial: tcp,
			handle:  replyWith(200, codeReply(codeConflict, ErrConflict.Error()+": resourceVersion is 7, precondition 3")),
			wantErr: ErrConflict, wantMsg: "raftstore: precondition failed: resourceVersion is 7, precondition 3"},
		{name: "not found survives", dial: tcp, handle: replyWith(200, codeReply(codeNotFound, ErrNotFound.Error())), wantErr: ErrNotFound},
		{name: "exists survives", dial: tcp, handle: replyWith(200, codeReply(codeExists, ErrExists.Error())), wantErr: ErrExists},
		{name: "leader's unknown outcome survives", dial: tcp, handle: replyWith(200, codeReply(codeTimeout, "x")), wantErr: ErrTimeout},
		{name: "unknown code: unknown outcome", dial: tcp, handle: replyWith(200, codeReply("weird", "x")), wantErr: ErrTimeout},
		{name: "garbage reply: unknown outcome", dial: tcp, handle: replyWith(200, "{"), wantErr: ErrTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := fakeLeader(t, tt.handle)
			cfg := DefaultConfig()
			cfg.Members = []Member{{ID: "leader", RaftAddr: "r", ForwardAddr: addr}}
			cfg.Dial = tt.dial
			cfg.ForwardDialTimeout = 100 * time.Millisecond
			c := newForwardClient(cfg)
			defer c.close()
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			_, err := c.write(ctx, "leader", []byte(`{"op":"create"}`))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if tt.wantMsg != "" && !strings.HasSuffix(err.Error(), tt.wantMsg) {
				t.Errorf("err = %q, want it to end in %q", err, tt.wantMsg)
			}
		})
	}
}

func TestWriteThroughCutOffFollowerIsUnavailable(t *testing.T) {
	c := OpenTestCluster(t, 3, WithConfig(func(cfg *Config) { cfg.LeaderWait = 300 * time.Millisecond }))
	ctx := testCtx(t)
	follower := c.Followers()[0]
	// Use the forwarding connection once so the pool has one to lose.
	create(ctx, follower, Key{Resource: "pods", Name: "warm"})
	c.IsolateMember(c.Index(follower.ID()))
	key := Key{Resource: "pods", Name: "cut"}
	// The forward either never left (unavailable) or went out on the
	// pooled connection the cut then killed (unknown: the leader might have
	// received it). Both are sound; success is not.
	_, err := follower.Create(ctx, key, []byte(`{}`))
	if !errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrTimeout) {
		t.Errorf("Create through a cut-off follower: err = %v, want ErrUnavailable or ErrTimeout (unknown)", err)
	}
	c.Net.Heal()
	if _, gerr := c.Leader().Get(ctx, key); errors.Is(err, ErrUnavailable) && !errors.Is(gerr, ErrNotFound) {
		t.Errorf("Get of the unavailable create: err = %v, want ErrNotFound", gerr)
	}
}

// TestRouteWithNoLeaderForwardsNowhere: a member that knows no leader (cut
// off, campaigning) neither serves an operation itself nor forwards it to an
// empty address; it waits for a leader and, with none, answers unavailable.
func TestRouteWithNoLeaderForwardsNowhere(t *testing.T) {
	c := OpenTestCluster(t, 3, WithConfig(func(cfg *Config) { cfg.LeaderWait = 300 * time.Millisecond }))
	ctx := testCtx(t)
	cut := c.Followers()[0]
	c.IsolateMember(c.Index(cut.ID()))
	for cut.LeaderID() != "" || cut.IsLeader() {
		select {
		case <-ctx.Done():
			t.Fatalf("the cut-off member still names leader %q", cut.LeaderID())
		case <-time.After(10 * time.Millisecond):
		}
	}
	var forwarded []string
	err := cut.route(ctx,
		func(context.Context) error {
			t.Error("a member that does not lead served the operation itself")
			return errRetry
		},
		func(_ context.Context, leader string) error { forwarded = append(forwarded, leader); return errRetry })
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("route with no leader = %v, want ErrUnavailable", err)
	}
	for _, l := range forwarded {
		if l == "" {
			t.Fatalf("forwarded to no leader (%d forwards: %q)", len(forwarded), forwarded)
		}
	}
}
