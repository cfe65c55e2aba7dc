package cluster_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/cluster"
)

// benchClients returns n clientsets spread over the members, each on its own
// network host, as the register workload uses them.
func benchClients(b *testing.B, c *cluster.Cluster, n int) []kubernetes.Interface {
	b.Helper()
	out := make([]kubernetes.Interface, n)
	for i := range out {
		cs, err := c.Clientset(apiserver.IdentityWorkload, cluster.ClientOptions{Host: cluster.ClientHost(i), Member: i % c.Members()})
		if err != nil {
			b.Fatal(err)
		}
		out[i] = cs
	}
	return out
}

func benchCluster(b *testing.B, durable bool) *cluster.Cluster {
	b.Helper()
	cfg := cluster.Config{Topology: cluster.DefaultTopology(3, 0, 1), Durable: durable}
	if durable {
		cfg.DataDir = b.TempDir()
	}
	return cluster.StartForTest(b, cfg)
}

// BenchmarkAPIWrites measures creates per second through client-go, the API
// server and raft on a 3-member cluster, with 32 concurrent clients spread over
// the members (writes to followers are forwarded to the leader).
func BenchmarkAPIWrites(b *testing.B) {
	for _, durable := range []bool{false, true} {
		name := "mem"
		if durable {
			name = "durable"
		}
		b.Run(name, func(b *testing.B) {
			c := benchCluster(b, durable)
			clients := benchClients(b, c, 32)
			var next, seq atomic.Int64
			b.SetParallelism(16) // 16 × GOMAXPROCS goroutines
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				cs := clients[int(next.Add(1))%len(clients)]
				for pb.Next() {
					name := fmt.Sprintf("w%d", seq.Add(1))
					_, err := cs.CoordinationV1().Leases("bench").Create(context.Background(),
						&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
		})
	}
}

// BenchmarkAPILinearizableReads measures gets per second; every get is a
// linearizable read (forwarded to the leader, which confirms its leadership).
func BenchmarkAPILinearizableReads(b *testing.B) {
	c := benchCluster(b, false)
	clients := benchClients(b, c, 32)
	ctx := context.Background()
	for i := 0; i < 100; i++ {
		if _, err := clients[0].CoordinationV1().Leases("bench").Create(ctx,
			&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("r%d", i)}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	var next, seq atomic.Int64
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		cs := clients[int(next.Add(1))%len(clients)]
		for pb.Next() {
			if _, err := cs.CoordinationV1().Leases("bench").Get(ctx, fmt.Sprintf("r%d", seq.Add(1)%100), metav1.GetOptions{}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reads/s")
}
