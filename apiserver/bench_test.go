package apiserver

import (
	"fmt"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsafe/podsafe/raftstore"
)

// benchEnvs returns the server setups benchmarks run on: a 1-member store,
// and a 3-member store reached through the leader's and a follower's
// member.
func benchEnvs(b *testing.B) map[string]func(*testing.B) *testEnv {
	return map[string]func(*testing.B) *testEnv{
		"members=1": func(b *testing.B) *testEnv { return newTestEnv(b) },
		"members=3/leader": func(b *testing.B) *testEnv {
			c := raftstore.OpenTestCluster(b, 3)
			return newTestEnvOn(b, c.Leader())
		},
		"members=3/follower": func(b *testing.B) *testEnv {
			c := raftstore.OpenTestCluster(b, 3)
			return newTestEnvOn(b, c.Followers()[0])
		},
	}
}

// BenchmarkCreatePods creates pods through a real clientset (protobuf
// bodies) from parallel goroutines.
func BenchmarkCreatePods(b *testing.B) {
	for _, name := range []string{"members=1", "members=3/leader", "members=3/follower"} {
		b.Run(name, func(b *testing.B) {
			e := benchEnvs(b)[name](b)
			c := e.client(IdentityWorkload)
			ctx := testCtx(b)
			var n atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					pod := makePod(fmt.Sprintf("p-%d", n.Add(1))).obj()
					if _, err := c.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkGetPods reads pods (linearizable reads) through a real clientset
// from parallel goroutines.
func BenchmarkGetPods(b *testing.B) {
	const pods = 100
	for _, name := range []string{"members=1", "members=3/leader", "members=3/follower"} {
		b.Run(name, func(b *testing.B) {
			e := benchEnvs(b)[name](b)
			for i := range pods {
				e.seedPod(makePod(fmt.Sprintf("p-%d", i)).obj())
			}
			c := e.client(IdentityWorkload)
			ctx := testCtx(b)
			var n atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					name := fmt.Sprintf("p-%d", n.Add(1)%pods)
					if _, err := c.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
