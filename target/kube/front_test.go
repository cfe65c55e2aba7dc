package kube

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
)

func TestWatchedResource(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"/apis/coordination.k8s.io/v1/leases?watch=true&resourceVersion=5", "leases"},
		{"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases?watch=1", "leases"},
		{"/api/v1/pods?watch=true", "pods"},
		{"/api/v1/namespaces/default/pods?watch=true", "pods"},
		{"/api/v1/watch/namespaces/default/pods", "pods"},
		{"/api/v1/watch/nodes", "nodes"},
		{"/api/v1/pods", ""},
		{"/apis/coordination.k8s.io/v1/leases?watch=false", ""},
		{"/api/v1/namespaces/default/pods/p?watch=true", "pods"},
		{"/api/v1/namespaces/watch/pods", ""},
		{"/api/v1/namespaces/watch/pods?watch=true", "pods"},
	} {
		r, err := http.NewRequest("GET", "https://x"+tc.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := watchedResource(r); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.url, got, tc.want)
		}
	}
}

// TestWatchFrontFreeze: through a front, a frozen resource's watch stream
// says nothing while another resource's stream and plain requests go on;
// on release the held events come through, in order, on the same stream.
func TestWatchFrontFreeze(t *testing.T) {
	front := netip.MustParseAddr("127.213.250.1")
	p, err := newPKI(t.TempDir(), []net.IP{front.AsSlice()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The backend streams one line per value sent on the resource's
	// channel, and answers anything else with "ok".
	streams := map[string]chan int{"leases": make(chan int), "pods": make(chan int)}
	backend := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res := watchedResource(r)
		ch, ok := streams[res]
		if !ok {
			fmt.Fprintln(w, "ok")
			return
		}
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for {
			select {
			case n := <-ch:
				fmt.Fprintf(w, "%s %d\n", res, n)
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				return
			}
		}
	}))
	cert, err := tls.LoadX509KeyPair(p.ServingCert, p.ServingKey)
	if err != nil {
		t.Fatal(err)
	}
	backend.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	backend.StartTLS()
	t.Cleanup(backend.Close)

	f, err := startWatchFront("kube-controller-manager-0", front, backend.URL, p, netip.MustParseAddr("127.0.0.1"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.close)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.CAPEM)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	watch := func(path string) chan string {
		resp, err := client.Get(f.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		lines := make(chan string, 16)
		go func() {
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		return lines
	}
	leases := watch("/apis/coordination.k8s.io/v1/leases?watch=true")
	pods := watch("/api/v1/pods?watch=true")
	expect := func(lines chan string, want string) {
		t.Helper()
		if got := <-lines; got != want {
			t.Fatalf("line %q, want %q", got, want)
		}
	}
	streams["leases"] <- 1
	expect(leases, "leases 1")

	release, err := f.freeze("leases")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.freeze("leases"); err == nil {
		t.Error("a second freeze of the same resource was accepted")
	}
	streams["leases"] <- 2
	streams["leases"] <- 3
	streams["pods"] <- 1
	expect(pods, "pods 1")
	resp, err := client.Get(f.URL() + "/apis/coordination.k8s.io/v1/leases")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a list of the frozen resource: %s", resp.Status)
	}
	select {
	case l := <-leases:
		t.Fatalf("the frozen stream said %q", l)
	default:
	}
	release()
	expect(leases, "leases 2")
	expect(leases, "leases 3")
	streams["leases"] <- 4
	expect(leases, "leases 4")
	release() // a second release is harmless

	// A freeze still on when the front closes ends with it, and its
	// release after is harmless too.
	release, err = f.freeze("pods")
	if err != nil {
		t.Fatal(err)
	}
	f.close()
	release()
}
