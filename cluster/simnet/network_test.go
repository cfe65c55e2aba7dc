package simnet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestMain fails the package if any test leaves goroutines behind.
func TestMain(m *testing.M) {
	before := runtime.NumGoroutine()
	code := m.Run()
	if code == 0 {
		if err := waitGoroutines(before, 5*time.Second); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// waitGoroutines waits until at most want goroutines run.
func waitGoroutines(want int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		got := runtime.NumGoroutine()
		if got <= want {
			return nil
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			return fmt.Errorf("%d goroutines leaked:\n%s", got-want, buf)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func newNet(t testing.TB, opts Options) *Network {
	t.Helper()
	n := New(opts)
	t.Cleanup(func() { n.Close() })
	return n
}

// connect dials from host from to addr (which must be listened on by ln) and
// returns both ends.
func connect(t testing.TB, n *Network, ln net.Listener, from string) (client, server net.Conn) {
	t.Helper()
	client, err := n.Dial(context.Background(), from, ln.Addr().String())
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	server, err = ln.Accept()
	if err != nil {
		t.Fatalf("Accept: %v", err)
	}
	t.Cleanup(func() {
		client.Close()
		server.Close()
	})
	return client, server
}

func listen(t testing.TB, n *Network, addr string) net.Listener {
	t.Helper()
	ln, err := n.Listen(addr)
	if err != nil {
		t.Fatalf("Listen(%q): %v", addr, err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// echo serves ln, copying every connection's input back until EOF.
func echo(t testing.TB, ln net.Listener) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
}

func TestEcho(t *testing.T) {
	tests := []struct {
		name  string
		size  int
		chunk int
	}{
		{name: "one byte", size: 1, chunk: 1},
		{name: "small", size: 1000, chunk: 100},
		{name: "one big write", size: 256 << 10, chunk: 256 << 10},
		{name: "beyond the buffer", size: 10 << 20, chunk: 1 << 20},
	}
	n := newNet(t, Options{})
	ln := listen(t, n, "server:7")
	echo(t, ln)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := n.Dial(context.Background(), "client", "server:7")
			if err != nil {
				t.Fatalf("Dial: %v", err)
			}
			defer c.Close()
			want := make([]byte, tt.size)
			for i := range want {
				want[i] = byte(i * 7)
			}
			errc := make(chan error, 1)
			go func() {
				for b := want; len(b) > 0; b = b[min(tt.chunk, len(b)):] {
					if _, err := c.Write(b[:min(tt.chunk, len(b))]); err != nil {
						errc <- err
						return
					}
				}
				errc <- c.(*Conn).CloseWrite()
			}()
			got, err := io.ReadAll(c)
			if err != nil {
				t.Fatalf("ReadAll: %v", err)
			}
			if err := <-errc; err != nil {
				t.Fatalf("writing: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("echoed %d bytes, want %d identical ones", len(got), len(want))
			}
		})
	}
}

func TestAddrs(t *testing.T) {
	n := newNet(t, Options{})
	ln := listen(t, n, "server:6443")
	c1, s1 := connect(t, n, ln, "client")
	c2, _ := connect(t, n, ln, "client")
	type addrs struct{ Local, Remote string }
	got := []addrs{
		{c1.LocalAddr().String(), c1.RemoteAddr().String()},
		{s1.LocalAddr().String(), s1.RemoteAddr().String()},
	}
	want := []addrs{
		{c1.LocalAddr().String(), "server:6443"},
		{"server:6443", c1.LocalAddr().String()},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("addresses (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(c1.LocalAddr().String(), "client:") {
		t.Errorf("dialer address %s, want client:<port>", c1.LocalAddr())
	}
	if c1.LocalAddr().String() == c2.LocalAddr().String() {
		t.Errorf("two dials share the ephemeral address %s", c1.LocalAddr())
	}
	if got := c1.LocalAddr().Network(); got != "tcp" {
		t.Errorf("Network() = %q, want tcp", got)
	}
}

func TestListen(t *testing.T) {
	n := newNet(t, Options{})
	listen(t, n, "server:80")
	tests := []struct {
		addr string
		want error
	}{
		{addr: "server:80", want: ErrAddressInUse},
		{addr: "server:81"},
		{addr: "other:80"},
		{addr: "noport", want: ErrBadAddress},
		{addr: ":80", want: ErrBadAddress},
		{addr: "host:", want: ErrBadAddress},
		{addr: "host:8a", want: ErrBadAddress},
		{addr: "a:b:1", want: ErrBadAddress},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			ln, err := n.Listen(tt.addr)
			if err == nil {
				ln.Close()
			}
			if !errors.Is(err, tt.want) {
				t.Errorf("Listen(%q) = %v, want %v", tt.addr, err, tt.want)
			}
		})
	}
	ln := listen(t, n, "server:0")
	if got := ln.Addr().String(); got == "server:0" || !strings.HasPrefix(got, "server:") {
		t.Errorf("Listen(server:0) address %s, want server:<a free port>", got)
	}
}

func TestDialRefused(t *testing.T) {
	n := newNet(t, Options{})
	listen(t, n, "server:80")
	for _, addr := range []string{"server:81", "nobody:80"} {
		start := time.Now()
		_, err := n.Dial(context.Background(), "client", addr)
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("Dial(%s) = %v, want connection refused", addr, err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("refused dial took %s, want at once", d)
		}
	}
	if _, err := n.Dial(context.Background(), "client", "bad"); !errors.Is(err, ErrBadAddress) {
		t.Errorf("Dial(bad) = %v, want ErrBadAddress", err)
	}
	if _, err := n.DialContext("client")(context.Background(), "udp", "server:80"); err == nil {
		t.Errorf("DialContext over udp succeeded, want an error")
	}
}

func TestListenerClose(t *testing.T) {
	n := newNet(t, Options{})
	ln := listen(t, n, "server:80")
	client, server := connect(t, n, ln, "client")
	queued, err := n.Dial(context.Background(), "client", "server:80")
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	defer queued.Close()

	accepted := make(chan error, 1)
	go func() {
		_, err := ln.Accept()
		accepted <- err
	}()
	<-accepted // takes the queued connection
	go func() {
		_, err := ln.Accept()
		accepted <- err
	}()
	time.Sleep(10 * time.Millisecond)
	queued2, err := n.Dial(context.Background(), "client", "server:80")
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	defer queued2.Close()
	<-accepted
	queued3, err := n.Dial(context.Background(), "client", "server:80")
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	defer queued3.Close()

	if err := ln.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close = %v, want net.ErrClosed", err)
	}
	if _, err := n.Dial(context.Background(), "client", "server:80"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("Dial after Close = %v, want connection refused", err)
	}
	if _, err := queued3.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("Read on a connection never accepted = %v, want connection reset", err)
	}
	// Accepted connections survive their listener.
	roundTrip(t, client, server, "still here")
	if err := ln.Close(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("second Close = %v, want net.ErrClosed", err)
	}
	// The address is free again.
	listen(t, n, "server:80")
}

// roundTrip sends msg from a to b and back.
func roundTrip(t *testing.T, a, b net.Conn, msg string) {
	t.Helper()
	for _, dir := range [][2]net.Conn{{a, b}, {b, a}} {
		if _, err := dir[0].Write([]byte(msg)); err != nil {
			t.Fatalf("Write: %v", err)
		}
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(dir[1], got); err != nil {
			t.Fatalf("Read: %v", err)
		}
		if string(got) != msg {
			t.Fatalf("read %q, want %q", got, msg)
		}
	}
}

func TestHosts(t *testing.T) {
	n := newNet(t, Options{})
	ln := listen(t, n, "cp-0:6443")
	connect(t, n, ln, "node-1")
	n.Cut("client-1", "cp-2")
	n.AddHost("external")
	want := []string{"client-1", "cp-0", "cp-2", "external", "node-1"}
	if diff := cmp.Diff(want, n.Hosts()); diff != "" {
		t.Errorf("Hosts (-want +got):\n%s", diff)
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		ok   bool
	}{
		{name: "zero", opts: Options{}, ok: true},
		{name: "set", opts: Options{DetectTimeout: time.Second, DialTimeout: time.Second, BufferSize: 1}, ok: true},
		{name: "negative detect", opts: Options{DetectTimeout: -1}},
		{name: "negative dial", opts: Options{DialTimeout: -1}},
		{name: "negative buffer", opts: Options{BufferSize: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.opts.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate() = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

// TestClose checks that closing the network unblocks everything and leaves no
// goroutine behind.
func TestNetworkClose(t *testing.T) {
	before := runtime.NumGoroutine()
	n := New(Options{BufferSize: 1024})
	ln, err := n.Listen("server:80")
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 64)
	var conns []net.Conn
	for range 4 {
		c, err := n.Dial(context.Background(), "client", "server:80")
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		go func() { _, err := c.Read(make([]byte, 1)); errs <- err }()
		go func() { _, err := c.Write(make([]byte, 4096)); errs <- err }()
	}
	go func() { _, err := ln.Accept(); errs <- err }() // takes one queued conn
	n.Cut("client", "other")
	go func() { _, err := n.Dial(context.Background(), "client", "other:80"); errs <- err }()
	go func() { _, err := ln.Accept(); errs <- err }()
	time.Sleep(20 * time.Millisecond)
	n.Close()
	for range 11 {
		<-errs
	}
	for _, c := range conns {
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
			t.Errorf("Read after network Close = %v, want net.ErrClosed", err)
		}
		c.Close()
	}
	if _, err := n.Listen("server:81"); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Listen after Close = %v, want net.ErrClosed", err)
	}
	if _, err := n.Dial(context.Background(), "client", "server:80"); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Dial after Close = %v, want net.ErrClosed", err)
	}
	if err := waitGoroutines(before, 5*time.Second); err != nil {
		t.Error(err)
	}
}
