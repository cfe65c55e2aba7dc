package storage

import (
	"context"
	"errors"
	"net/http/httptest"
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
