package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// result is one system's measurement in one round.
type result struct {
	system    string
	round     int
	writes    int64
	errors    int64
	wall      time.Duration
	cpu       time.Duration
	firstErrs []string
}

// rate is successful writes per second of wall time.
func (r result) rate() float64 { return float64(r.writes) / r.wall.Seconds() }

// perCPU is successful writes per CPU-second of the system's servers.
func (r result) perCPU() float64 {
	if r.cpu <= 0 {
		return 0
	}
	return float64(r.writes) / r.cpu.Seconds()
}

func (r result) errNote() string {
	if len(r.firstErrs) == 0 {
		return ""
	}
	return " (first: " + strings.Join(r.firstErrs, "; ") + ")"
}

// spread is min, median and max.
type spread struct{ min, med, max float64 }

func spreadOf(xs []float64) spread {
	if len(xs) == 0 {
		return spread{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return spread{s[0], med, s[len(s)-1]}
}

func (s spread) format(f string) string {
	return fmt.Sprintf(f+" / "+f+" / "+f, s.min, s.med, s.max)
}

// summarize prints, per system, min/median/max of writes/s and writes per
// CPU-second and the errors of all rounds, then podsafe's ratios to etcd:
// of each round's pair (same round, so the same machine weather), min /
// median / max.
func summarize(out io.Writer, systems []string, results []result) {
	by := map[string][]result{}
	for _, r := range results {
		by[r.system] = append(by[r.system], r)
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "system\trounds\twrites/s (min / median / max)\tper CPU-second (min / median / max)\tcores\terrors")
	for _, sys := range systems {
		rs := by[sys]
		var rate, per, cores []float64
		var errs int64
		for _, r := range rs {
			rate = append(rate, r.rate())
			per = append(per, r.perCPU())
			cores = append(cores, r.cpu.Seconds()/r.wall.Seconds())
			errs += r.errors
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%.2f\t%d\n", sys, len(rs), spreadOf(rate).format("%.0f"), spreadOf(per).format("%.0f"), spreadOf(cores).med, errs)
	}
	tw.Flush()
	etcd := map[int]result{}
	for _, r := range by[sysEtcd] {
		etcd[r.round] = r
	}
	if len(etcd) == 0 {
		return
	}
	fmt.Fprintln(out)
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ratio to etcd\twrites/s (min / median / max)\tper CPU-second (min / median / max)")
	for _, sys := range systems {
		if sys == sysEtcd {
			continue
		}
		var rate, per []float64
		for _, r := range by[sys] {
			e, ok := etcd[r.round]
			if !ok || e.rate() == 0 || e.perCPU() == 0 {
				continue
			}
			rate = append(rate, r.rate()/e.rate())
			per = append(per, r.perCPU()/e.perCPU())
		}
		fmt.Fprintf(tw, "%s / etcd\t%s\t%s\n", sys, spreadOf(rate).format("%.2f×"), spreadOf(per).format("%.2f×"))
	}
	tw.Flush()
}
