package heappeak

import (
	"testing"
	"time"
)

var keep [][]byte

func TestStartSeesAnAllocation(t *testing.T) {
	stop := Start(time.Millisecond)
	keep = append(keep, make([]byte, 64<<20))
	time.Sleep(20 * time.Millisecond)
	peak := stop()
	keep = nil
	if peak < 64<<20 {
		t.Errorf("peak %d bytes while 64 MiB were live", peak)
	}
}
