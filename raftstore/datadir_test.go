package raftstore

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// reopenConfig is member i's Config with fresh listeners, as a second
// process opening its data directory would have.
func reopenConfig(t *testing.T, c *TestCluster, i int) Config {
	cfg := c.Configs[i]
	cfg.RaftListener = listenLoopback(t, "127.0.0.1:0")
	cfg.ForwardListener = listenLoopback(t, "127.0.0.1:0")
	return cfg
}

// TestDataDirInUse: a second Open of a durable member's data directory is
// refused at once, naming the pid that holds it, instead of waiting out
// bolt's lock timeout; once the member is closed its directory opens again.
func TestDataDirInUse(t *testing.T) {
	c := OpenTestCluster(t, 1, WithDurable())
	start := time.Now()
	s, err := Open(reopenConfig(t, c, 0))
	if err == nil {
		s.Close()
		t.Fatal("a second Open of a data directory in use succeeded")
	}
	if !errors.Is(err, ErrDataDirInUse) || !strings.Contains(err.Error(), fmt.Sprintf("in use by pid %d", os.Getpid())) {
		t.Errorf("second Open: %v, want ErrDataDirInUse naming pid %d", err, os.Getpid())
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("the refusal took %v: it waited for a lock", d)
	}
	c.Kill(0)
	c.Restart(0)
	c.Leader()
}

// TestDataDirMembership: a durable member's data directory records the
// membership it was bootstrapped with, and opening it with another
// membership is refused naming both, rather than bootstrapping a second
// cluster beside the first.
func TestDataDirMembership(t *testing.T) {
	c := OpenTestCluster(t, 1, WithDurable())
	c.Kill(0)
	cfg := reopenConfig(t, c, 0)
	cfg.Members = append(slices.Clone(cfg.Members),
		Member{ID: "m1", RaftAddr: "127.0.0.1:1", ForwardAddr: "127.0.0.1:2"},
		Member{ID: "m2", RaftAddr: "127.0.0.1:3", ForwardAddr: "127.0.0.1:4"})
	s, err := Open(cfg)
	if err == nil {
		s.Close()
		t.Fatal("Open with another membership succeeded")
	}
	var me *MembershipError
	if !errors.As(err, &me) {
		t.Fatalf("Open with another membership: %v, want a *MembershipError", err)
	}
	if !slices.Equal(me.Recorded, []string{"m0"}) || !strings.Contains(err.Error(), "a 1-member cluster (m0), not the 3-member one configured (m0, m1, m2)") {
		t.Errorf("Open with another membership: %v", err)
	}
	// The refusal released the directory: its own membership opens it.
	c.Restart(0)
	c.Leader()
}
