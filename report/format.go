package report

import (
	"fmt"
	"math"
	"time"
)

// fmtT formats a history time (nanoseconds since the recorder started) as
// seconds, or "never" for the unknown return of an operation.
func fmtT(t int64) string {
	if t == math.MaxInt64 {
		return "never"
	}
	return fmt.Sprintf("%.3fs", float64(t)/1e9)
}

// fmtDur formats a duration for people, to the millisecond.
func fmtDur(d time.Duration) string {
	if d <= 0 {
		return "—"
	}
	if d < time.Millisecond {
		return d.Round(time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}
