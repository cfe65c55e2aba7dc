package apiserver

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkFilteredWatchFanout measures what 200 kubelets cost the server:
// each watches the pods of its own node (fieldSelector spec.nodeName), and
// every pod event reaches every watcher to be filtered. One op is one pod
// created and delivered to its node's watcher.
func BenchmarkFilteredWatchFanout(b *testing.B) {
	for _, watchers := range []int{20, 200} {
		b.Run(fmt.Sprintf("watchers=%d", watchers), func(b *testing.B) {
			e := newTestEnv(b)
			ctx, cancel := context.WithCancel(testCtx(b))
			defer cancel()
			rv := strconv.FormatUint(e.storeRevision(), 10)
			var got sync.WaitGroup
			want := make([]int, watchers)
			for i := range b.N {
				want[i%watchers]++
			}
			for i := range watchers {
				path := fmt.Sprintf("/api/v1/pods?watch=1&fieldSelector=spec.nodeName%%3Dnode-%d&resourceVersion=%s", i, rv)
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.http.URL+path, nil)
				if err != nil {
					b.Fatal(err)
				}
				req.Header.Set("Authorization", "Bearer "+tokenOf(IdentityAdmin))
				resp, err := e.http.Client().Do(req)
				if err != nil {
					b.Fatal(err)
				}
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("watch %s: HTTP %d", path, resp.StatusCode)
				}
				got.Add(1)
				go func(n int) {
					defer resp.Body.Close()
					defer got.Done()
					sc := bufio.NewScanner(resp.Body)
					sc.Buffer(make([]byte, 1<<20), 1<<20)
					for seen := 0; seen < n && sc.Scan(); seen++ {
					}
				}(want[i])
			}
			c := e.client(IdentityAdmin)
			b.ReportAllocs()
			b.ResetTimer()
			var next sync.Mutex
			i := 0
			var creators sync.WaitGroup
			for range 8 {
				creators.Add(1)
				go func() {
					defer creators.Done()
					for {
						next.Lock()
						n := i
						i++
						next.Unlock()
						if n >= b.N {
							return
						}
						pod := makePod(fmt.Sprintf("p-%d", n)).node(fmt.Sprintf("node-%d", n%watchers)).obj()
						if _, err := c.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			creators.Wait()
			if b.Failed() {
				cancel()
			}
			got.Wait()
		})
	}
}
