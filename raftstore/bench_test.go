package raftstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
)

var benchPod = []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"labels":{"app":"bench"}},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`)

func benchCreate(b *testing.B, opts ...TestOption) {
	c := OpenTestCluster(b, 3, opts...)
	ctx := context.Background()
	var n atomic.Int64
	stores := c.Stores
	b.SetParallelism(4)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			// Spread over all members: two thirds are forwarded.
			s := stores[i%int64(len(stores))]
			if _, err := s.Create(ctx, Key{Resource: "pods", Namespace: "bench", Name: fmt.Sprint("p", i)}, benchPod); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkCreate3Mem measures creates on a 3-member in-memory cluster.
func BenchmarkCreate3Mem(b *testing.B) { benchCreate(b) }

// BenchmarkCreate3Durable measures creates on a 3-member durable cluster
// (every entry fsynced by bbolt).
func BenchmarkCreate3Durable(b *testing.B) { benchCreate(b, WithDurable()) }

// BenchmarkGet3 measures linearizable Gets on a 3-member cluster, served by
// the leader or forwarded by a follower.
func BenchmarkGet3(b *testing.B) {
	c := OpenTestCluster(b, 3)
	ctx := context.Background()
	const keys = 100
	for i := range keys {
		if _, err := c.Leader().Create(ctx, Key{Resource: "pods", Namespace: "bench", Name: fmt.Sprint(i)}, benchPod); err != nil {
			b.Fatal(err)
		}
	}
	for _, target := range []struct {
		name  string
		store *Store
	}{{"leader", c.Leader()}, {"follower", c.Followers()[0]}} {
		b.Run(target.name, func(b *testing.B) {
			var n atomic.Int64
			b.SetParallelism(4)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					key := Key{Resource: "pods", Namespace: "bench", Name: fmt.Sprint(n.Add(1) % keys)}
					if _, err := target.store.Get(ctx, key); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
