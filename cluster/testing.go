package cluster

import (
	"context"
	"testing"
	"time"
)

// StartForTest builds and starts a cluster from cfg for a test or benchmark,
// failing it if the cluster cannot start, and closes the cluster when the test
// ends.
func StartForTest(tb testing.TB, cfg Config) *Cluster {
	tb.Helper()
	c, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	// A generous bound, growing with the nodes that must register.
	ctx, cancel := context.WithTimeout(context.Background(), max(30*time.Second, time.Duration(len(cfg.Topology.Nodes))*100*time.Millisecond))
	defer cancel()
	if err := c.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}
