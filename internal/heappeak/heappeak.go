// Package heappeak measures the peak live heap of a stretch of work, for
// benchmarks that report memory beside time.
package heappeak

import (
	"runtime/metrics"
	"time"
)

// Start samples the live heap every interval until the returned stop is
// called, which returns the largest sample in bytes.
func Start(interval time.Duration) (stop func() uint64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	done, out := make(chan struct{}), make(chan uint64)
	go func() {
		var peak uint64
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			metrics.Read(sample)
			peak = max(peak, sample[0].Value.Uint64())
			select {
			case <-done:
				out <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return func() uint64 { close(done); return <-out }
}
