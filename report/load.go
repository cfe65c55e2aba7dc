package report

import (
	"fmt"
	"strconv"
)

// Load is what the machine was doing while a run ran: its load average at
// the start and the end, and the CPU the run's own process used. A run
// that made little progress on a machine whose load stood at several times
// its CPUs was starved rather than slow, and a reader (or a spec's
// progress floor) can tell the two apart.
type Load struct {
	// CPUs is how many CPUs the process could use (GOMAXPROCS).
	CPUs int `json:"cpus"`
	// LoadStart and LoadEnd are the 1-, 5- and 15-minute load averages
	// (runnable and waiting tasks, the whole machine's) when the run's
	// workload began and when the run ended; zero where the system does
	// not publish them (/proc/loadavg).
	LoadStart [3]float64 `json:"loadStart"`
	LoadEnd   [3]float64 `json:"loadEnd"`
	// ProcessCPUSeconds is the CPU time, user and system, the process used
	// during the run; WallSeconds the wall time the run took.
	ProcessCPUSeconds float64 `json:"processCpuSeconds"`
	WallSeconds       float64 `json:"wallSeconds"`
}

// Starved reports whether the machine was loaded beyond its CPUs for most
// of the run: the 1-minute load average at the end above twice the CPUs.
// The run's own process is part of that load, so a run that keeps every CPU
// busy alone stays below.
func (l *Load) Starved() bool {
	return l != nil && l.CPUs > 0 && l.LoadEnd[0] > 2*float64(l.CPUs)
}

// String is one line for reports: "load 1.2 → 5.3 on 2 CPUs; the run used
// 14.0 CPU-s in 30.2 s".
func (l *Load) String() string {
	if l == nil {
		return ""
	}
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) }
	s := fmt.Sprintf("load %s → %s on %d CPUs; the run used %s CPU-s in %s s", f(l.LoadStart[0]), f(l.LoadEnd[0]), l.CPUs,
		f(l.ProcessCPUSeconds), f(l.WallSeconds))
	if l.Starved() {
		s += " (starved: the machine was loaded beyond twice its CPUs)"
	}
	return s
}
