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
// CPU-second and the errors of all rounds, then the ratios of every other
// system to etcd and of podsafe-api to kube-api: of each round's pair
// (same round, so the same machine weather), min / median / max.
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
	var others []string
	for _, sys := range systems {
		if sys != sysEtcd {
			others = append(others, sys)
		}
	}
	ratios(out, by, sysEtcd, others)
	// The fair pair for the API path: podsafe's API servers and store
	// against kube-apiserver and etcd, both behind the same client-go calls.
	if slices.Contains(systems, sysPodsafeAPI) {
		ratios(out, by, sysKubeAPI, []string{sysPodsafeAPI})
	}
}

// ratios prints each of systems' ratios to anchor, of each round's pair
// (same round, so the same machine weather): min / median / max. Nothing
// when anchor was not measured.
func ratios(out io.Writer, by map[string][]result, anchor string, systems []string) {
	base := map[int]result{}
	for _, r := range by[anchor] {
		base[r.round] = r
	}
	if len(base) == 0 || len(systems) == 0 {
		return
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "ratio to %s\twrites/s (min / median / max)\tper CPU-second (min / median / max)\n", anchor)
	for _, sys := range systems {
		var rate, per []float64
		for _, r := range by[sys] {
			e, ok := base[r.round]
			if !ok || e.rate() == 0 || e.perCPU() == 0 {
				continue
			}
			rate = append(rate, r.rate()/e.rate())
			per = append(per, r.perCPU()/e.perCPU())
		}
		fmt.Fprintf(tw, "%s / %s\t%s\t%s\n", sys, anchor, spreadOf(rate).format("%.2f×"), spreadOf(per).format("%.2f×"))
	}
	tw.Flush()
}
