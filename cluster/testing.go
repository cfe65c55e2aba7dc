package cluster

import (
	"context"
	"testing"
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
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Topology.StartTimeout())
	defer cancel()
	if err := c.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}
