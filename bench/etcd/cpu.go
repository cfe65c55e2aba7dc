package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// userHZ is the unit of the times in /proc/PID/stat: USER_HZ, 100 on every
// Linux the Go runtime supports.
const userHZ = 100

// procCPU returns the user+system CPU time process pid has used so far (all
// its threads).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the CPU time of process %d: %w", pid, err)
	}
	// The command name (field 2) may hold spaces; fields count from after
	// its closing parenthesis, where field 3 (state) begins.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("reading the CPU time of process %d: malformed /proc stat", pid)
	}
	f := bytes.Fields(b[i+1:])
	const utime, stime = 14 - 3, 15 - 3
	if len(f) <= stime {
		return 0, fmt.Errorf("reading the CPU time of process %d: short /proc stat", pid)
	}
	u, err1 := strconv.ParseInt(string(f[utime]), 10, 64)
	s, err2 := strconv.ParseInt(string(f[stime]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("reading the CPU time of process %d: malformed /proc stat", pid)
	}
	return time.Duration(u+s) * time.Second / userHZ, nil
}

// procsCPU sums procCPU over pids.
func procsCPU(pids []int) (time.Duration, error) {
	var total time.Duration
	for _, pid := range pids {
		d, err := procCPU(pid)
		if err != nil {
			return 0, err
		}
		total += d
	}
	return total, nil
}

// selfCPU returns the user+system CPU time of this process so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
