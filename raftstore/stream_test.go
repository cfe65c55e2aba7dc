package raftstore

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// recordHandler keeps every record it handles, flattened to strings.
type recordHandler struct {
	mu      sync.Mutex
	records []map[string]string
	attrs   []slog.Attr
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &recordHandler{attrs: append(append([]slog.Attr{}, h.attrs...), as...)}
}
func (h *recordHandler) WithGroup(string) slog.Handler { return h }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	m := map[string]string{"level": r.Level.String(), "msg": r.Message}
	var add func(prefix string, a slog.Attr)
	add = func(prefix string, a slog.Attr) {
		if a.Value.Kind() == slog.KindGroup {
			for _, g := range a.Value.Group() {
				add(prefix+a.Key+".", g)
			}
			return
		}
		m[prefix+a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool { add("", a); return true })
	h.mu.Lock()
	h.records = append(h.records, m)
	h.mu.Unlock()
	return nil
}

func TestRaftLogIsQuietAndStructured(t *testing.T) {
	h := &recordHandler{}
	l := newRaftLogger(slog.New(h), "raft")
	l.Info("routine chatter")
	l.Warn("failed to contact", "server-id", "m2", "time", 3)
	l.Error("failed to heartbeat")
	want := []map[string]string{
		{"level": "DEBUG", "msg": "raft: failed to contact", "raft_level": "warn", "raft_module": "raft",
			"raft.server-id": "m2", "raft.time": "3"},
		{"level": "DEBUG", "msg": "raft: failed to heartbeat", "raft_level": "error", "raft_module": "raft"},
	}
	if diff := cmp.Diff(want, h.records); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
}

func TestStreamLayer(t *testing.T) {
	ln := listenLoopback(t, "127.0.0.1:0")
	defer ln.Close()
	var dialed []string
	s := newStreamLayer(ln, "m0-raft", func(ctx context.Context, addr string) (net.Conn, error) {
		dialed = append(dialed, addr)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	if got := s.Addr().String(); got != "m0-raft" {
		t.Errorf("Addr() = %q, want the advertised RaftAddr", got)
	}
	start := time.Now()
	_, err := s.Dial("m1-raft", 50*time.Millisecond)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Errorf("Dial into a black hole: err = %v after %v, want a prompt deadline error", err, time.Since(start))
	}
	if diff := cmp.Diff([]string{"m1-raft"}, dialed); diff != "" {
		t.Errorf("dialed (-want +got):\n%s", diff)
	}
}

func TestIntrospection(t *testing.T) {
	// A long transport timeout makes a Close that waited on a black-holed
	// link stand out.
	c := OpenTestCluster(t, 3, WithConfig(func(cfg *Config) { cfg.TransportTimeout = 10 * time.Second }))
	ctx := testCtx(t)
	leader := c.Leader()
	for i, s := range c.Stores {
		if s.ID() != c.Members[i].ID {
			t.Errorf("member %d: ID() = %q, want %q", i, s.ID(), c.Members[i].ID)
		}
		if err := s.WaitLeader(ctx); err != nil {
			t.Errorf("member %s: WaitLeader: %v", s.ID(), err)
		}
		if s.LeaderID() != leader.ID() || s.IsLeader() != (s == leader) {
			t.Errorf("member %s: LeaderID() = %q, IsLeader() = %v; leader is %s", s.ID(), s.LeaderID(), s.IsLeader(), leader.ID())
		}
		st := s.Stats()
		for _, k := range []string{"state", "term", "member", "fsm_applied_index", "objects", "watch_floor", "watch_last", "watchers"} {
			if _, ok := st[k]; !ok {
				t.Errorf("member %s: Stats() lacks %q", s.ID(), k)
			}
		}
	}
	obj := create(ctx, c.Stores[1], podA)
	c.WaitApplied(obj.RV)
	for _, s := range c.Stores {
		if s.AppliedIndex() != obj.RV {
			t.Errorf("member %s: AppliedIndex() = %d, want %d", s.ID(), s.AppliedIndex(), obj.RV)
		}
	}

	if err := leader.TransferLeadership(ctx); err != nil {
		t.Fatalf("TransferLeadership: %v", err)
	}
	if next := c.Leader(); next == leader {
		t.Errorf("leader %s still leads after a transfer", leader.ID())
	}

	// WaitLeader honours its context on a member that can find no leader.
	lone := c.Followers()[0]
	c.IsolateMember(c.Index(lone.ID()))
	deadline := time.Now().Add(5 * time.Second)
	for lone.LeaderID() != "" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := lone.WaitLeader(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitLeader on an isolated member: %v, want a deadline error", err)
	}

	// Killing members with black-holed links is prompt: nothing waits out
	// a transport timeout.
	for _, s := range []*Store{lone, c.Leader()} {
		start := time.Now()
		c.Kill(c.Index(s.ID()))
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("closing member %s took %v", s.ID(), d)
		}
	}
}
