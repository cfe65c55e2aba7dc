package storage

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/podsafe/podsafe/kubelet"
)

// TestWritesAndFence: writes are accepted from anyone until the writer's
// node is fenced, then refused; both are in the ledger with the node the
// connection came from (not the one the body claims), the volume and the
// token; unfencing accepts writes again.
func TestWritesAndFence(t *testing.T) {
	ledger := &kubelet.MemoryLedger{}
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	srv := NewServer(ledger, clk)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	c := &Client{BaseURL: ts.URL, HTTP: ts.Client()}
	ctx := context.Background()
	w := kubelet.StorageWrite{Volume: "default.data-db-0", Node: "liar", Namespace: "default", Pod: "db-0", UID: "u1", Container: "app", Token: 7, Seq: 1}

	if err := c.Write(ctx, w); err != nil {
		t.Fatalf("write before the fence: %v", err)
	}
	if err := c.Fence(ctx, "127.0.0.1", 3); err != nil {
		t.Fatal(err)
	}
	if err := c.Write(ctx, w); !errors.Is(err, ErrFenced) {
		t.Fatalf("write after the fence = %v, want ErrFenced", err)
	}
	if got := srv.Fences(); !cmp.Equal(got, map[string]int64{"127.0.0.1": 3}) {
		t.Errorf("fences = %v", got)
	}
	srv.Fence("127.0.0.1", 2) // an older token never replaces a newer one
	if got := srv.Fences()["127.0.0.1"]; got != 3 {
		t.Errorf("fence token after an older fence = %d, want 3", got)
	}
	if err := c.Unfence(ctx, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if err := c.Write(ctx, w); err != nil {
		t.Fatalf("write after unfence: %v", err)
	}
	var got []string
	for _, e := range ledger.Entries() {
		if e.Node != "127.0.0.1" || e.Volume != w.Volume || e.Token != 7 || e.UID != "u1" || !e.Scaled.Equal(clk.Now()) {
			t.Errorf("ledger entry %+v: wrong node, volume, token, uid or time", e)
		}
		got = append(got, string(e.Action))
	}
	if diff := cmp.Diff([]string{"write", "write-refused", "write"}, got); diff != "" {
		t.Errorf("ledger actions (-want +got):\n%s", diff)
	}
	if n := srv.Writes(w.Volume); n != 2 {
		t.Errorf("accepted writes = %d, want 2", n)
	}
}

// TestBadRequests: malformed bodies get 400 and one clear error.
func TestBadRequests(t *testing.T) {
	srv := NewServer(nil, nil)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	c := &Client{BaseURL: ts.URL, HTTP: ts.Client()}
	if err := c.Write(context.Background(), kubelet.StorageWrite{}); !errors.Is(err, ErrBadRequest) {
		t.Errorf("write without a volume = %v, want ErrBadRequest", err)
	}
	if err := c.Fence(context.Background(), "", 1); !errors.Is(err, ErrBadRequest) {
		t.Errorf("fence without a node = %v, want ErrBadRequest", err)
	}
}

// TestCompareTokens: a storage comparing fencing tokens accepts any token
// at or above the volume's highest and refuses a lower one (409,
// ErrStaleToken, recorded write-stale), per volume; without CompareTokens
// the same writes are all accepted.
func TestCompareTokens(t *testing.T) {
	for _, compare := range []bool{true, false} {
		ledger := &kubelet.MemoryLedger{}
		srv := NewServer(ledger, clocktesting.NewFakeClock(time.Unix(1000, 0)))
		srv.CompareTokens(compare)
		ts := httptest.NewServer(srv.Handler())
		c := &Client{BaseURL: ts.URL, HTTP: ts.Client()}
		ctx := context.Background()
		write := func(volume, uid string, token int64) error {
			return c.Write(ctx, kubelet.StorageWrite{Volume: volume, Pod: "db-0", UID: uid, Container: "app", Token: token})
		}
		steps := []struct {
			volume, uid string
			token       int64
			stale       bool
		}{
			{"v0", "old", 5, false},
			{"v0", "old", 5, false},   // the same attachment again
			{"v0", "new", 9, false},   // the successor's attachment
			{"v0", "old", 5, true},    // the superseded one: refused
			{"v1", "other", 1, false}, // another volume has its own highest
			{"v0", "new", 9, false},
		}
		var got []string
		for i, s := range steps {
			err := write(s.volume, s.uid, s.token)
			switch {
			case s.stale && compare:
				if !errors.Is(err, ErrStaleToken) {
					t.Errorf("compare=%v step %d: err = %v, want ErrStaleToken", compare, i, err)
				}
			case err != nil:
				t.Errorf("compare=%v step %d: %v", compare, i, err)
			}
		}
		for _, e := range ledger.Entries() {
			got = append(got, string(e.Action))
		}
		want := []string{"write", "write", "write", "write", "write", "write"}
		if compare {
			want[3] = "write-stale"
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("compare=%v: ledger actions (-want +got):\n%s", compare, diff)
		}
		if n := srv.Writes("v0"); n != int64(4+map[bool]int{true: 0, false: 1}[compare]) {
			t.Errorf("compare=%v: %d writes accepted on v0", compare, n)
		}
		ts.Close()
	}
}

// TestClientErrors: the client tells the server's answers apart — a 400
// is ErrBadRequest, any other unexpected status is a plain error naming it.
func TestClientErrors(t *testing.T) {
	srv := NewServer(nil, nil)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	c := &Client{BaseURL: ts.URL, HTTP: ts.Client()}
	ctx := context.Background()
	if err := c.Write(ctx, kubelet.StorageWrite{}); !errors.Is(err, ErrBadRequest) {
		t.Errorf("a write without a volume: %v, want ErrBadRequest", err)
	}
	err := c.post(ctx, "/v1/nowhere", struct{}{})
	if err == nil || errors.Is(err, ErrBadRequest) || errors.Is(err, ErrFenced) || errors.Is(err, ErrStaleToken) ||
		!strings.Contains(err.Error(), "HTTP 404") {
		t.Errorf("an unknown path: %v, want a plain error naming HTTP 404", err)
	}
}

// TestServerWriteReportsAcceptance: Server.Write says true for a write it
// accepted and false for one it refused.
func TestServerWriteReportsAcceptance(t *testing.T) {
	srv := NewServer(nil, clocktesting.NewFakeClock(time.Unix(1000, 0)))
	w := kubelet.StorageWrite{Volume: "v0", Node: "n1", Pod: "db-0", UID: "u1", Container: "app", Token: 1}
	if !srv.Write(w) {
		t.Error("a write from an unfenced node was reported refused")
	}
	srv.Fence("n1", 1)
	if srv.Write(w) {
		t.Error("a write from a fenced node was reported accepted")
	}
	if n := srv.Writes("v0"); n != 1 {
		t.Errorf("accepted writes = %d, want 1", n)
	}
}

// TestServeEndsCleanly: Serve answers on its listener, and returns nil
// once the listener is closed (the cluster closes it to stop the storage
// server); any other failure would be an error.
func TestServeEndsCleanly(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(&kubelet.MemoryLedger{}, clocktesting.NewFakeClock(time.Unix(1000, 0)))
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	c := &Client{BaseURL: "http://" + l.Addr().String(), HTTP: &http.Client{Timeout: 10 * time.Second}}
	w := kubelet.StorageWrite{Volume: "default.data-db-0", Namespace: "default", Pod: "db-0", UID: "u1", Container: "app", Token: 1, Seq: 1}
	if err := c.Write(context.Background(), w); err != nil {
		t.Fatalf("write: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve after its listener closed = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return once its listener closed")
	}
}
