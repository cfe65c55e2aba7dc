package raftstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	testingclock "k8s.io/utils/clock/testing"
)

// deterministic gives members a fixed clock and counting UIDs.
func deterministic() TestOption {
	var n atomic.Int64
	return WithConfig(func(c *Config) {
		c.Clock = testingclock.NewFakePassiveClock(testTime)
		c.NewUID = func() string { return fmt.Sprintf("uid-%d", n.Add(1)) }
	})
}

// testCtx bounds a test's calls generously: it is there to turn a hang into
// a failure, not to time a busy machine.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestStoreCRUD(t *testing.T) {
	one := OpenTestCluster(t, 1, deterministic())
	three := OpenTestCluster(t, 3, deterministic())
	targets := []struct {
		name  string
		store func() *Store
	}{
		{"single member", func() *Store { return one.Stores[0] }},
		{"leader of three", func() *Store { return three.Leader() }},
		{"follower of three (forwarded)", func() *Store { return three.Followers()[0] }},
	}
	for ti, target := range targets {
		t.Run(target.name, func(t *testing.T) {
			ctx := testCtx(t)
			s := target.store()
			// Each target gets its own namespace so the shared cluster's
			// earlier objects do not interfere.
			ns := fmt.Sprintf("t%d", ti)
			key := Key{Resource: "pods", Namespace: ns, Name: "p"}
			missing := Key{Resource: "pods", Namespace: ns, Name: "missing"}

			created, err := s.Create(ctx, key, []byte(`{"kind":"Pod","metadata":{"name":"p"},"spec":{"n":1}}`))
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			m := metaOf(t, created.Data)
			if m["generation"] != 1.0 || m["creationTimestamp"] != "2026-01-02T03:04:05Z" || m["resourceVersion"] != fmt.Sprint(created.RV) {
				t.Errorf("created metadata = %v (RV %d)", m, created.RV)
			}
			uid := m["uid"].(string)

			steps := []struct {
				name    string
				op      func() (Object, error)
				wantErr error
			}{
				{"create existing", func() (Object, error) { return s.Create(ctx, key, []byte(`{}`)) }, ErrExists},
				{"create invalid", func() (Object, error) { return s.Create(ctx, missing, []byte(`[]`)) }, ErrInvalid},
				{"create with empty name", func() (Object, error) {
					return s.Create(ctx, Key{Resource: "pods"}, []byte(`{}`))
				}, ErrInvalid},
				{"get missing", func() (Object, error) { return s.Get(ctx, missing) }, ErrNotFound},
				{"update missing", func() (Object, error) { return s.Update(ctx, missing, []byte(`{}`), Preconditions{}) }, ErrNotFound},
				{"delete missing", func() (Object, error) { return s.Delete(ctx, missing, Preconditions{}) }, ErrNotFound},
				{"update stale RV", func() (Object, error) {
					return s.Update(ctx, key, []byte(`{}`), Preconditions{ResourceVersion: created.RV - 1})
				}, ErrConflict},
				{"update wrong UID", func() (Object, error) {
					return s.Update(ctx, key, []byte(`{}`), Preconditions{UID: "nope"})
				}, ErrConflict},
				{"delete wrong UID", func() (Object, error) { return s.Delete(ctx, key, Preconditions{UID: "nope"}) }, ErrConflict},
				{"update CAS", func() (Object, error) {
					return s.Update(ctx, key, []byte(`{"metadata":{},"spec":{"n":2}}`), Preconditions{ResourceVersion: created.RV, UID: uid})
				}, nil},
				{"get", func() (Object, error) { return s.Get(ctx, key) }, nil},
			}
			var last Object
			for _, st := range steps {
				obj, err := st.op()
				if !errors.Is(err, st.wantErr) || (err == nil) != (st.wantErr == nil) {
					t.Fatalf("%s: err = %v, want %v", st.name, err, st.wantErr)
				}
				if err == nil {
					last = obj
				}
			}
			if last.RV <= created.RV {
				t.Errorf("RV after update = %d, not above %d", last.RV, created.RV)
			}
			if got := metaOf(t, last.Data)["generation"]; got != 2.0 {
				t.Errorf("generation after spec change = %v, want 2", got)
			}

			objs, rev, err := s.List(ctx, "pods", ns)
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			if diff := cmp.Diff([]Object{last}, objs); diff != "" {
				t.Errorf("List (-want +got):\n%s", diff)
			}
			if rev < last.RV {
				t.Errorf("List rev = %d, below the last write %d", rev, last.RV)
			}

			deleted, err := s.Delete(ctx, key, Preconditions{ResourceVersion: last.RV})
			if err != nil {
				t.Fatalf("Delete: %v", err)
			}
			if deleted.RV <= last.RV || metaOf(t, deleted.Data)["resourceVersion"] != fmt.Sprint(deleted.RV) {
				t.Errorf("deleted object RV %d, metadata %v; want a new deletion index", deleted.RV, metaOf(t, deleted.Data))
			}
			if _, err := s.Get(ctx, key); !errors.Is(err, ErrNotFound) {
				t.Errorf("Get after Delete: err = %v, want ErrNotFound", err)
			}
			objs, _, err = s.List(ctx, "pods", ns)
			if err != nil || objs == nil || len(objs) != 0 {
				t.Errorf("List after Delete = %v, %v; want an empty, non-nil list", objs, err)
			}
		})
	}
}

func TestRVStrictlyIncreasing(t *testing.T) {
	c := OpenTestCluster(t, 3)
	ctx := testCtx(t)
	var prev uint64
	for i := range 30 {
		s := c.Stores[i%3]
		key := Key{Resource: "pods", Namespace: "ns", Name: fmt.Sprint(i % 4)}
		var obj Object
		var err error
		if i < 4 {
			obj, err = s.Create(ctx, key, []byte(`{}`))
		} else {
			obj, err = s.Update(ctx, key, []byte(`{"spec":{}}`), Preconditions{})
		}
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		if obj.RV <= prev {
			t.Fatalf("write %d: RV %d not above previous %d", i, obj.RV, prev)
		}
		prev = obj.RV
	}
	// Every member's applied index reaches the last RV, and a List on any
	// member reflects it.
	for _, s := range c.Stores {
		if _, rev, err := s.List(ctx, "pods", ""); err != nil || rev < prev {
			t.Errorf("member %s: List rev = %d, err %v; want >= %d", s.ID(), rev, err, prev)
		}
	}
}

func TestListSortedAcrossNamespaces(t *testing.T) {
	s := OpenTestCluster(t, 1).Stores[0]
	ctx := testCtx(t)
	keys := []Key{
		{Resource: "pods", Namespace: "b", Name: "z"},
		{Resource: "pods", Namespace: "a", Name: "y"},
		{Resource: "pods", Namespace: "b", Name: "a"},
		{Resource: "nodes", Name: "n1"},
	}
	for _, k := range keys {
		if _, err := s.Create(ctx, k, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		resource, namespace string
		want                []Key
	}{
		{"pods", "", []Key{keys[1], keys[2], keys[0]}},
		{"pods", "b", []Key{keys[2], keys[0]}},
		{"nodes", "", []Key{keys[3]}},
		{"leases.coordination.k8s.io", "", nil},
	}
	for _, tt := range tests {
		objs, _, err := s.List(ctx, tt.resource, tt.namespace)
		if err != nil {
			t.Fatal(err)
		}
		var got []Key
		for _, o := range objs {
			got = append(got, o.Key)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("List(%q, %q) (-want +got):\n%s", tt.resource, tt.namespace, diff)
		}
	}
}

func TestClosedStore(t *testing.T) {
	c := OpenTestCluster(t, 1)
	s := c.Stores[0]
	ctx := testCtx(t)
	c.Kill(0)
	if _, err := s.Create(ctx, podA, []byte(`{}`)); !errors.Is(err, ErrClosed) {
		t.Errorf("Create after Close: err = %v, want ErrClosed", err)
	}
	if _, err := s.Get(ctx, podA); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Close: err = %v, want ErrClosed", err)
	}
	if _, err := s.Watch(ctx, "pods", 0); !errors.Is(err, ErrClosed) {
		t.Errorf("Watch after Close: err = %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	ln := listenLoopback(t, "127.0.0.1:0")
	defer ln.Close()
	members := []Member{{ID: "a", RaftAddr: "ra", ForwardAddr: "fa"}, {ID: "b", RaftAddr: "rb", ForwardAddr: "fb"}}
	valid := func() Config {
		return Config{ID: "a", Members: members, RaftListener: ln, ForwardListener: ln, Dial: NewTestNetwork().Dialer("a")}
	}
	tests := []struct {
		name   string
		adjust func(*Config)
		ok     bool
	}{
		{"valid", func(*Config) {}, true},
		{"no ID", func(c *Config) { c.ID = "" }, false},
		{"ID not a member", func(c *Config) { c.ID = "z" }, false},
		{"no members", func(c *Config) { c.Members = nil }, false},
		{"duplicate member", func(c *Config) { c.Members = []Member{members[0], members[0]} }, false},
		{"missing address", func(c *Config) { c.Members = []Member{{ID: "a", RaftAddr: "x"}} }, false},
		{"durable without dir", func(c *Config) { c.Durable = true }, false},
		{"no dialer", func(c *Config) { c.Dial = nil }, false},
		{"no listener", func(c *Config) { c.RaftListener = nil }, false},
		{"lease above heartbeat", func(c *Config) { c.LeaderLeaseTimeout = time.Second }, false},
		{"heartbeat above election", func(c *Config) {
			c.HeartbeatTimeout, c.ElectionTimeout = 200*time.Millisecond, 100*time.Millisecond
		}, false},
		{"slow timings", func(c *Config) {
			c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = time.Second, time.Second, 500*time.Millisecond
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			tt.adjust(&c)
			if err := c.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate() = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestOpenFailureClosesListeners(t *testing.T) {
	raftLn := listenLoopback(t, "127.0.0.1:0")
	fwdLn := listenLoopback(t, "127.0.0.1:0")
	_, err := Open(Config{ID: "a", RaftListener: raftLn, ForwardListener: fwdLn})
	if err == nil {
		t.Fatal("Open without members succeeded")
	}
	for _, ln := range []net.Listener{raftLn, fwdLn} {
		if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
			t.Errorf("Accept on %s after a failed Open: %v, want net.ErrClosed", ln.Addr(), err)
		}
	}
}

// warnSink keeps the message of every record at Warn or above logged
// through a warnHandler, whatever attributes its loggers add.
type warnSink struct {
	mu   sync.Mutex
	msgs []string
}

type warnHandler struct{ sink *warnSink }

func (h warnHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h warnHandler) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h warnHandler) WithGroup(string) slog.Handler                { return h }
func (h warnHandler) Handle(_ context.Context, r slog.Record) error {
	h.sink.mu.Lock()
	defer h.sink.mu.Unlock()
	h.sink.msgs = append(h.sink.msgs, r.Message)
	return nil
}

// TestCloseStopsForwardServerQuietly: the forward server stopped by Close is
// no failure to warn of.
func TestCloseStopsForwardServerQuietly(t *testing.T) {
	sink := &warnSink{}
	c := OpenTestCluster(t, 1, WithLogger(slog.New(warnHandler{sink})))
	c.Close() // returns once the forward server's goroutine has ended
	sink.mu.Lock()
	defer sink.mu.Unlock()
	for _, m := range sink.msgs {
		if m == "forward server stopped" {
			t.Errorf("Close logged the warning %q", m)
		}
	}
}
