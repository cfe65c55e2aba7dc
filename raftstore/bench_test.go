package raftstore

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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

// benchPod1K is a pod as the API server stores it, padded to about 1 KiB.
var benchPod1K = []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"annotations":{"pad":"` + strings.Repeat("x", 420) +
	`"},"creationTimestamp":null,"labels":{"app":"storebench","release":"r1","tier":"backend"},"name":"p","namespace":"bench"},` +
	`"spec":{"containers":[{"args":["--serve","--port=8080"],"env":[{"name":"MODE","value":"bench"},{"name":"LEVEL","value":"info"}],` +
	`"image":"registry.example/storebench/main:1.0","imagePullPolicy":"IfNotPresent","name":"main","resources":{"requests":{"cpu":"100m","memory":"64Mi"}},` +
	`"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File"}],"dnsPolicy":"ClusterFirst","enableServiceLinks":true,` +
	`"preemptionPolicy":"PreemptLowerPriority","priority":0,"restartPolicy":"Always","schedulerName":"default-scheduler","securityContext":{},` +
	`"terminationGracePeriodSeconds":30},"status":{"phase":"Pending","qosClass":"Burstable"}}`)

// BenchmarkApplyCreate measures one member's state machine applying a
// create of a 1 KiB pod: decoding the command and storing the object.
// path=canonical is what every member runs; path=general is the map-based
// decode and re-encode it replaces (still taken by documents that are not
// canonical).
func BenchmarkApplyCreate(b *testing.B) {
	key := Key{Resource: "pods", Namespace: "bench", Name: "p"}
	prepared, err := prepareCreate(key, benchPod1K, newUUID(), time.Now())
	if err != nil {
		b.Fatal(err)
	}
	body, err := json.Marshal(command{Op: opCreate, Key: key, Data: prepared})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("path=canonical", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for i := 0; b.Loop(); i++ {
			cmd, err := decodeCommand(body)
			if err != nil {
				b.Fatal(err)
			}
			if _, _, err := createdDoc(cmd.Key, cmd.Data, uint64(i+1)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("path=general", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for i := 0; b.Loop(); i++ {
			var cmd command
			if err := json.Unmarshal(body, &cmd); err != nil {
				b.Fatal(err)
			}
			if _, _, err := createdDocGeneral(cmd.Key, cmd.Data, uint64(i+1)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkPrepareCreate measures what the proposing member does to a
// created object before proposing it (see BenchmarkApplyCreate for the
// paths).
func BenchmarkPrepareCreate(b *testing.B) {
	key := Key{Resource: "pods", Namespace: "bench", Name: "p"}
	now := time.Now()
	b.Run("path=canonical", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := prepareCreate(key, benchPod1K, "uid", now); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("path=general", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := prepareCreateGeneral(key, benchPod1K, "uid", "2026-01-02T03:04:05Z"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// hog runs n goroutines that only burn CPU, as a busy harness process or
// machine does, until the returned stop is called.
func hog(n int) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := 0
			for {
				select {
				case <-done:
					return
				default:
				}
				for i := range 1 << 16 {
					x += i
				}
			}
		}()
	}
	return func() { close(done); wg.Wait() }
}

// term returns the highest raft term any running member has seen.
func (c *TestCluster) term() uint64 {
	var t uint64
	for _, s := range c.Stores {
		if s != nil {
			n, _ := strconv.ParseUint(s.Stats()["term"], 10, 64)
			t = max(t, n)
		}
	}
	return t
}

// BenchmarkLeaderStability writes to a 3-member durable cluster from 32
// goroutines, with and without goroutines that burn every CPU twice over,
// and reports the elections the cluster held (a stable leader holds none)
// and the writes that failed. Run with -benchtime of some seconds.
func BenchmarkLeaderStability(b *testing.B) {
	for _, hogs := range []int{0, 2 * runtime.GOMAXPROCS(0)} {
		b.Run(fmt.Sprintf("hogs=%d", hogs), func(b *testing.B) {
			c := OpenTestCluster(b, 3, WithDurable())
			ctx := context.Background()
			stop := hog(hogs)
			defer stop()
			first := c.term()
			var n, failed atomic.Int64
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					s := c.Stores[i%int64(len(c.Stores))]
					if _, err := s.Create(ctx, Key{Resource: "pods", Namespace: "bench", Name: fmt.Sprint("p", i)}, benchPod); err != nil {
						failed.Add(1)
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(c.term()-first), "elections")
			b.ReportMetric(float64(failed.Load()), "errors")
		})
	}
}

// BenchmarkFailover isolates the leader of a 3-member durable cluster and
// reports how long the other two take to elect a new one (ms/op is the
// failover time), with and without CPU hogs (see BenchmarkLeaderStability).
func BenchmarkFailover(b *testing.B) {
	for _, hogs := range []int{0, 2 * runtime.GOMAXPROCS(0)} {
		b.Run(fmt.Sprintf("hogs=%d", hogs), func(b *testing.B) {
			c := OpenTestCluster(b, 3, WithDurable())
			stop := hog(hogs)
			defer stop()
			var total time.Duration
			for b.Loop() {
				b.StopTimer()
				old := c.Index(c.Leader().ID())
				b.StartTimer()
				start := time.Now()
				c.IsolateMember(old)
				for elected := false; !elected; {
					for i, s := range c.Stores {
						if i != old && s.IsLeader() {
							elected = true
						}
					}
					time.Sleep(time.Millisecond)
				}
				total += time.Since(start)
				b.StopTimer()
				c.Net.Heal()
				c.Leader()
				b.StartTimer()
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "failover-ms")
		})
	}
}
