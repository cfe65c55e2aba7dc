package specs

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/podsafe/podsafe/history"
	"github.com/podsafe/podsafe/report"
)

// loadSample is the machine's load and the process's CPU time at one
// moment.
type loadSample struct {
	at   time.Time
	avg  [3]float64
	cpu  time.Duration
	read bool // avg was read
}

// sampleLoad reads the load averages (Linux's /proc/loadavg; zero
// elsewhere) and the process's CPU time now.
func sampleLoad() loadSample {
	s := loadSample{at: time.Now()}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		f := strings.Fields(string(b))
		for i := 0; i < 3 && i < len(f); i++ {
			s.avg[i], _ = strconv.ParseFloat(f[i], 64)
		}
		s.read = len(f) >= 3
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		s.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return s
}

// logLoad records s in the history, so a history read alone says what the
// machine was doing.
func logLoad(rec *history.Recorder, what string, s loadSample) {
	attrs := map[string]string{"cpus": strconv.Itoa(runtime.GOMAXPROCS(0)),
		"process_cpu_s": strconv.FormatFloat(s.cpu.Seconds(), 'f', 2, 64)}
	if s.read {
		for i, name := range []string{"load1", "load5", "load15"} {
			attrs[name] = strconv.FormatFloat(s.avg[i], 'f', 2, 64)
		}
	}
	rec.Log("machine load "+what, attrs)
}

// loadBetween is the run's Load from its first and last samples.
func loadBetween(start, end loadSample) *report.Load {
	return &report.Load{CPUs: runtime.GOMAXPROCS(0), LoadStart: start.avg, LoadEnd: end.avg,
		ProcessCPUSeconds: (end.cpu - start.cpu).Seconds(), WallSeconds: end.at.Sub(start.at).Seconds()}
}
