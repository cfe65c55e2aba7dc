package framework

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
)

// Parallelism is how many goroutines Parallelize uses by default: one per
// processor the Go runtime may use.
func Parallelism() int { return runtime.GOMAXPROCS(0) }

// Parallelize calls fn(i) for every i in [0, n) on up to workers goroutines
// and returns when all calls have returned. Indexes are handed out in
// small chunks so uneven work still spreads; once ctx ends no new chunk is
// started. fn must be safe for concurrent use; results are best written to
// a slice slot per index, so the caller can read them back in order.
func Parallelize(ctx context.Context, workers, n int, fn func(i int)) {
	if n <= 0 {
		return
	}
	workers = min(max(workers, 1), n)
	if workers == 1 {
		for i := 0; i < n && ctx.Err() == nil; i++ {
			fn(i)
		}
		return
	}
	chunk := max(1, min(16, n/(workers*4)))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				lo := int(next.Add(int64(chunk))) - chunk
				if lo >= n {
					return
				}
				for i := lo; i < min(lo+chunk, n); i++ {
					fn(i)
				}
			}
		})
	}
	wg.Wait()
}
