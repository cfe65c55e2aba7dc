package simnet

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
)

// BenchmarkHTTP measures small keep-alive requests through the network, with
// loopback TCP as the baseline.
func BenchmarkHTTP(b *testing.B) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"kind":"Pod","metadata":{"name":"p","resourceVersion":"42"}}`)
	})
	run := func(b *testing.B, c *http.Client, url string) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := get(c, url); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
	}
	b.Run("simnet", func(b *testing.B) {
		n := newNet(b, Options{})
		serveHTTP(b, n, "cp-0:6443", handler)
		run(b, httpClient(b, n, "client"), "http://cp-0:6443/api/v1/pods/p")
	})
	b.Run("loopback", func(b *testing.B) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Skipf("no loopback TCP: %v", err)
		}
		srv := &http.Server{Handler: handler}
		go srv.Serve(ln)
		defer srv.Close()
		tr := &http.Transport{MaxIdleConnsPerHost: 64}
		defer tr.CloseIdleConnections()
		run(b, &http.Client{Transport: tr}, "http://"+ln.Addr().String()+"/api/v1/pods/p")
	})
}

// BenchmarkThroughput measures one connection streaming in 32 KiB writes.
func BenchmarkThroughput(b *testing.B) {
	n := newNet(b, Options{})
	ln := listen(b, n, "server:1")
	client, server := connect(b, n, ln, "client")
	buf := make([]byte, 32<<10)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	done := make(chan error, 1)
	go func() {
		_, err := io.CopyN(io.Discard, server, int64(b.N)*int64(len(buf)))
		done <- err
	}()
	for range b.N {
		if _, err := client.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkDial measures connection setup and teardown.
func BenchmarkDial(b *testing.B) {
	n := newNet(b, Options{})
	ln := listen(b, n, "server:1")
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	b.ReportAllocs()
	for b.Loop() {
		c, err := n.Dial(context.Background(), "client", "server:1")
		if err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}
