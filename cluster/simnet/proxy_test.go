package simnet

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
)

// startProxy serves a real loopback listener that forwards to toAddr and
// returns its address and a function that stops it and returns its error.
func startProxy(t *testing.T, n *Network, toAddr string) (string, func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no loopback TCP: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.ServeProxy(ctx, ln, "external", toAddr) }()
	stopped := false
	var result error
	stop := func() error {
		if !stopped {
			stopped = true
			cancel()
			result = <-done
		}
		return result
	}
	t.Cleanup(func() { stop() })
	return ln.Addr().String(), stop
}

func TestServeProxyHTTP(t *testing.T) {
	n := newNet(t, Options{})
	serveHTTP(t, n, "cp-0:6443", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "from "+r.RemoteAddr)
	}))
	addr, stop := startProxy(t, n, "cp-0:6443")
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	for range 3 {
		body, err := get(c, "http://"+addr+"/api")
		if err != nil {
			t.Fatalf("Get through the proxy: %v", err)
		}
		if want := "from external:"; len(body) < len(want) || body[:len(want)] != want {
			t.Errorf("body %q, want it to start with %q", body, want)
		}
	}
	if err := stop(); err != nil {
		t.Errorf("ServeProxy = %v, want nil after its context ended", err)
	}
	if _, err := get(c, "http://"+addr+"/api"); err == nil {
		t.Errorf("Get after the proxy stopped succeeded")
	}
}

func TestServeProxyHalfClose(t *testing.T) {
	n := newNet(t, Options{})
	echo(t, listen(t, n, "cp-0:7"))
	addr, _ := startProxy(t, n, "cp-0:7")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "ping"); err != nil {
		t.Fatalf("Write: %v", err)
	}
	c.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "ping" {
		t.Fatalf("ReadAll = %q, %v; want the echo then EOF", got, err)
	}
}

func TestServeProxyUnreachable(t *testing.T) {
	n := newNet(t, Options{})
	addr, _ := startProxy(t, n, "cp-0:6443") // nobody listens
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	defer c.Close()
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatalf("Read from a proxy to nowhere succeeded, want the connection closed")
	}
}

func TestServeProxyListenerFails(t *testing.T) {
	n := newNet(t, Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no loopback TCP: %v", err)
	}
	ln.Close()
	err = n.ServeProxy(context.Background(), ln, "external", "cp-0:1")
	if !errors.Is(err, net.ErrClosed) {
		t.Errorf("ServeProxy on a closed listener = %v, want net.ErrClosed", err)
	}
}
