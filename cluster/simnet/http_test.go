package simnet

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// serveHTTP serves h on addr through n until the test ends.
func serveHTTP(t testing.TB, n *Network, addr string, h http.Handler) {
	t.Helper()
	ln := listen(t, n, addr)
	srv := &http.Server{Handler: h}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
}

// httpClient returns a client that dials from host from through n.
func httpClient(t testing.TB, n *Network, from string) *http.Client {
	t.Helper()
	tr := &http.Transport{DialContext: n.DialContext(from), MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func get(c *http.Client, url string) (string, error) {
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func TestHTTPConcurrentRequests(t *testing.T) {
	n := newNet(t, Options{})
	serveHTTP(t, n, "cp-0:6443", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.Path, body)
	}))
	const clients, requests = 32, 50
	var wg sync.WaitGroup
	errs := make(chan error, clients*requests)
	for i := range clients {
		c := httpClient(t, n, fmt.Sprintf("client-%d", i%4))
		wg.Go(func() {
			for j := range requests {
				path := fmt.Sprintf("/c%d/r%d", i, j)
				resp, err := c.Post("http://cp-0:6443"+path, "text/plain", strings.NewReader("payload"))
				if err != nil {
					errs <- err
					continue
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if want := "POST " + path + " payload"; err != nil || string(b) != want {
					errs <- fmt.Errorf("response %q, %v; want %q", b, err, want)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestHTTPStreamingIsFlushedChunkByChunk(t *testing.T) {
	n := newNet(t, Options{})
	next := make(chan struct{})
	const chunks = 5
	serveHTTP(t, n, "cp-0:6443", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := range chunks {
			fmt.Fprintf(w, "event %d\n", i)
			w.(http.Flusher).Flush()
			select {
			case <-next: // the client saw this chunk
			case <-r.Context().Done():
				return
			}
		}
	}))
	resp, err := httpClient(t, n, "client").Get("http://cp-0:6443/watch")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for i := range chunks {
		line, err := br.ReadString('\n')
		if want := fmt.Sprintf("event %d\n", i); err != nil || line != want {
			t.Fatalf("chunk %d = %q, %v; want %q", i, line, err, want)
		}
		next <- struct{}{}
	}
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
		t.Fatalf("after the last chunk: %q, %v; want a clean end", rest, err)
	}
}

// TestHTTPWatchNoticesPartition checks that a long response across a cut
// fails after the detection timeout, and that the client then reconnects
// once the partition heals, which is what makes watches recover.
func TestHTTPWatchNoticesPartition(t *testing.T) {
	const detect = 100 * time.Millisecond
	n := newNet(t, Options{DetectTimeout: detect})
	serveHTTP(t, n, "cp-0:6443", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/watch" {
			io.WriteString(w, "ok")
			return
		}
		io.WriteString(w, "started\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	c := httpClient(t, n, "node-1")
	resp, err := c.Get("http://cp-0:6443/watch")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || line != "started\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	start := time.Now()
	n.Partition([]string{"node-1"}, []string{"cp-0"})
	_, err = br.ReadString('\n')
	var ne net.Error
	if !errors.Is(err, syscall.ETIMEDOUT) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("watch read across a partition = %v, want connection timed out", err)
	}
	if took := time.Since(start); took < detect {
		t.Errorf("watch failed after %s, before the detection timeout %s", took, detect)
	}
	// While cut, a new request cannot connect.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://cp-0:6443/", nil)
	if resp, err := c.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("request across a partition succeeded")
	}
	n.HealAll()
	if body, err := get(c, "http://cp-0:6443/"); err != nil || body != "ok" {
		t.Fatalf("request after heal = %q, %v; want ok", body, err)
	}
}
