package kube

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/podsafe/podsafe/target"
)

// echoServer echoes every connection until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

// TestGateNet: a cut of one of podsafe's own hosts silences its traffic
// without an error, as dropped packets do, and the heal lets it through
// again; links between hosts podsafe does not own are refused.
func TestGateNet(t *testing.T) {
	addr := echoServer(t)
	n := newGateNet()
	if _, err := n.addLocal(context.Background(), "node-0"); err != nil {
		t.Fatal(err)
	}
	n.addLocal(context.Background(), "node-1")
	g := n.gateOf("node-0")
	d := &net.Dialer{}
	conn, err := g.dial(context.Background(), d, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	echo := func(msg string) error {
		if _, err := conn.Write([]byte(msg)); err != nil {
			return err
		}
		buf := make([]byte, len(msg))
		_, err := io.ReadFull(conn, buf)
		if err == nil && string(buf) != msg {
			return errors.New("echo garbled: " + string(buf))
		}
		return err
	}
	if err := echo("before"); err != nil {
		t.Fatal(err)
	}

	if _, err := n.cut(context.Background(), []target.Link{{From: ExternalHost, To: "elsewhere"}}); !errors.Is(err, target.ErrUnsupported) {
		t.Errorf("cutting a link of hosts podsafe does not own: %v, want ErrUnsupported", err)
	}
	// node-0 to the cluster: node-0's traffic is held; node-1 is not.
	heal, err := n.cut(context.Background(), []target.Link{{From: "node-0", To: ExternalHost}, {From: "node-0", To: "node-1"}})
	if err != nil {
		t.Fatal(err)
	}
	if n.rules(context.Background()) == "" {
		t.Error("no rule described while node-0 is cut")
	}
	conn.SetDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := conn.Write([]byte("during")); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("a write across the cut: %v, want it held until its deadline", err)
	}
	// A new connection hangs until its context ends.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	if c, err := g.dial(ctx, d, "tcp", addr); err == nil {
		c.Close()
		t.Error("dialed across the cut")
	}
	cancel()
	// node-1 still talks.
	c1, err := n.gateOf("node-1").dial(context.Background(), d, "tcp", addr)
	if err != nil {
		t.Fatalf("node-1 dial: %v", err)
	}
	c1.Close()

	if err := heal(); err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Time{})
	// What the server answers during a cut is held past a read deadline
	// and delivered after the heal, not lost.
	if _, err := conn.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the echo is back in the socket
	heal, _ = n.cut(context.Background(), []target.Link{{From: ExternalHost, To: "node-0"}})
	conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	buf := make([]byte, 4)
	if n, err := conn.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("a read across the cut: %d bytes, %v; want it held until its deadline", n, err)
	}
	heal()
	conn.SetReadDeadline(time.Time{})
	if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "held" {
		t.Errorf("after the heal: %q, %v; want the held echo", buf, err)
	}
	if err := heal(); err != nil {
		t.Errorf("a second heal: %v", err)
	}
	if r := n.rules(context.Background()); r != "" {
		t.Errorf("rules after the heal: %q", r)
	}
	c2, err := g.dial(context.Background(), d, "tcp", addr)
	if err != nil {
		t.Fatalf("dial after the heal: %v", err)
	}
	c2.Close()

	// A blocked writer is released when the connection closes.
	heal, _ = n.cut(context.Background(), []target.Link{{From: ExternalHost, To: "node-0"}})
	conn.SetDeadline(time.Time{})
	done := make(chan error, 1)
	go func() { _, err := conn.Write([]byte("held")); done <- err }()
	time.Sleep(50 * time.Millisecond)
	conn.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Errorf("held write after Close: %v, want net.ErrClosed", err)
	}
	heal()
	if err := n.close(); err != nil {
		t.Error(err)
	}
}
