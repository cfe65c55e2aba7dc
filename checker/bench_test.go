package checker

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/podsafe/podsafe/history"
	"github.com/podsafe/podsafe/internal/heappeak"
)

// events counts the events of a history: what a recorder wrote.
func events(h *history.History) int {
	return len(h.Ops) + len(h.API) + len(h.Nemesis) + len(h.Ledger) + len(h.Store) + len(h.Logs)
}

// TestGeneratedRun: a generated run is what a correct cluster records, so
// every checker finds it clean, and it holds every kind of event the
// checkers read.
func TestGeneratedRun(t *testing.T) {
	cfg := runBenchConfig
	cfg.Events, cfg.Sets, cfg.ReplicaSets, cfg.Faults = 20_000, 10, 5, 3
	h := generateRun(cfg)
	if n := events(h); n < cfg.Events*80/100 || n > cfg.Events*120/100 {
		t.Errorf("%d events, want about %d", n, cfg.Events)
	}
	kinds := map[string]int{}
	for _, e := range h.Ledger {
		kinds["ledger "+string(e.Action)]++
	}
	for _, e := range h.Store {
		kinds["store "+e.Resource]++
	}
	for _, c := range h.API {
		kinds["api "+c.Identity+" "+c.Verb]++
	}
	restarts := 0
	for _, e := range h.Ledger {
		if e.Action == history.LedgerExit && e.ExitCode != 0 {
			restarts++
		}
	}
	if restarts == 0 {
		t.Error("no container crashed")
	}
	for _, want := range []string{"ledger start", "ledger term", "ledger kill", "ledger exit", "ledger write",
		"store pods", "store nodes", "store statefulsets.apps", "api pet-controller create", "api replicaset-controller create", "api workload delete"} {
		if kinds[want] == 0 {
			t.Errorf("no %s in %v", want, kinds)
		}
	}
	results := Check(context.Background(), h, Options{})
	if len(results) < 5 {
		t.Errorf("%d checkers ran, want every one", len(results))
	}
	for _, r := range results {
		if r.Verdict != Ok {
			t.Errorf("%s: %s: %s", r.Checker, r.Verdict, r.Summary)
			for _, ev := range r.Evidence {
				t.Logf("  evidence %s: %s", ev.Key, ev.Description)
			}
		}
	}
	rep := Recovery(h)
	if len(rep.Pets) != cfg.Sets*cfg.Replicas || rep.Scale < 49.9 || rep.Scale > 50.1 {
		t.Errorf("recovery: %d pets (want %d), scale %v", len(rep.Pets), cfg.Sets*cfg.Replicas, rep.Scale)
	}
	for _, p := range rep.Pets {
		if len(p.Outages) == 0 || p.Availability() >= 100 || p.Availability() < 50 {
			t.Errorf("pet %s: %d outages, availability %.1f%%", p.Pet, len(p.Outages), p.Availability())
			break
		}
	}
}

var (
	benchRunOnce sync.Once
	benchRun     *history.History
)

// benchRunHistory is the 1,000,000-event run, generated once per process.
func benchRunHistory() *history.History {
	benchRunOnce.Do(func() { benchRun = generateRun(runBenchConfig) })
	return benchRun
}

// benchHistory runs check over h b.N times and reports events/s, the heap
// one check needs above h itself (peak-MiB, garbage included; live-peak-MiB,
// what it keeps live), and the slowest single check; it logs the
// slowest run of each checker, and of building each part of the view the
// checkers shared when check returns it.
func benchHistory(b *testing.B, h *history.History, check func(context.Context, *history.History) ([]Result, *view)) {
	n := events(h)
	// Memory is measured on one check each, before the timed ones: with the
	// collector paced as usual (garbage included: what a podsafe check
	// holds at worst), and with the collector run almost continuously (what
	// the check itself keeps live). Timed checks run back to back, so the
	// garbage of one piles onto the next until the collector runs: a
	// figure of the loop, not of a check.
	peak := checkPeak(h, check, 100)
	live := checkPeak(h, check, 2)
	cpu0 := cpuTime()
	var slowest time.Duration
	each := map[string]time.Duration{}
	var names []string
	parts := map[string]time.Duration{}
	var partNames []string
	b.ReportAllocs()
	for b.Loop() {
		results, v := check(context.Background(), h)
		if v != nil {
			for _, p := range v.partTimes() {
				if _, ok := parts[p.name]; !ok {
					partNames = append(partNames, p.name)
				}
				parts[p.name] = max(parts[p.name], p.took)
			}
		}
		for _, r := range results {
			slowest = max(slowest, r.Stats.Duration)
			if _, ok := each[r.Checker]; !ok {
				names = append(names, r.Checker)
			}
			each[r.Checker] = max(each[r.Checker], r.Stats.Duration)
			if r.Verdict != Ok {
				b.Errorf("%s: %s: %s", r.Checker, r.Verdict, r.Summary)
			}
		}
	}
	cpu := cpuTime() - cpu0
	for _, name := range names {
		b.Logf("%s: slowest %v over %d events", name, each[name], n)
	}
	if len(partNames) > 0 {
		var built []string
		for _, name := range partNames {
			built = append(built, fmt.Sprintf("%s %v", name, parts[name].Round(time.Millisecond)))
		}
		b.Logf("shared view, built at the slowest in (within the checks above that waited for it): %s", strings.Join(built, ", "))
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	// On a shared machine wall time depends on the neighbours; CPU time
	// (all threads, GC included) much less.
	b.ReportMetric(float64(n)*float64(b.N)/cpu.Seconds(), "events/cpu-s")
	b.ReportMetric(float64(peak)/(1<<20), "peak-MiB")
	b.ReportMetric(float64(live)/(1<<20), "live-peak-MiB")
	b.ReportMetric(slowest.Seconds(), "slowest-check-s")
}

// checkPeak runs check over h once, the collector at gcPercent, and
// returns the largest heap (live objects and garbage not yet collected)
// above what was live before it, sampled every millisecond.
func checkPeak(h *history.History, check func(context.Context, *history.History) ([]Result, *view), gcPercent int) uint64 {
	defer debug.SetGCPercent(debug.SetGCPercent(gcPercent))
	runtime.GC()
	base := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(base)
	stop := heappeak.Start(time.Millisecond)
	check(context.Background(), h)
	peak := stop()
	return peak - min(peak, base[0].Value.Uint64())
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCheck1M runs Check over a generated run of 1,000,000 events. The
// target is 1,000,000 events/s on two cores, no check over 10 s, and a peak
// heap no higher than the 425 MiB the checkers needed before they shared
// one decoded view. It logs each checker's time and how long the shared
// view's parts took to build.
func BenchmarkCheck1M(b *testing.B) {
	h := benchRunHistory()
	writes := 0
	for _, e := range h.Ledger {
		if e.Action == history.LedgerWrite {
			writes++
		}
	}
	b.Logf("%d events: %d register operations, %d API calls, %d ledger entries (%d writes), %d store changes, %d faults",
		events(h), len(h.Ops), len(h.API), len(h.Ledger), writes, len(h.Store), len(h.Nemesis))
	benchHistory(b, h, func(ctx context.Context, h *history.History) ([]Result, *view) {
		return check(ctx, h, Options{Timeout: time.Minute})
	})
}

// BenchmarkCheckers runs each checker alone over the 1,000,000-event run,
// and Recovery.
func BenchmarkCheckers(b *testing.B) {
	opts := Options{Timeout: time.Minute}
	for _, c := range []struct {
		name  string
		check func(context.Context, *history.History) Result
	}{
		{RegisterChecker, func(ctx context.Context, h *history.History) Result { return CheckRegister(ctx, h.Ops, opts) }},
		{AtMostOneChecker, func(ctx context.Context, h *history.History) Result { return CheckAtMostOne(ctx, h, opts) }},
		{StorageChecker, func(ctx context.Context, h *history.History) Result { return CheckStorage(ctx, h, opts) }},
		{GraceChecker, func(ctx context.Context, h *history.History) Result { return CheckGrace(ctx, h, opts) }},
		{AuthorityChecker, func(ctx context.Context, h *history.History) Result { return CheckAuthority(ctx, h, opts) }},
		{"phases", func(ctx context.Context, h *history.History) Result { return CheckPhases(ctx, h, opts) }},
		{"restart-backoff", func(ctx context.Context, h *history.History) Result { return CheckBackoff(ctx, h, opts) }},
		{"preemption", func(ctx context.Context, h *history.History) Result { return CheckPreemption(ctx, h, opts) }},
		{"topology-spread", func(ctx context.Context, h *history.History) Result { return CheckSpread(ctx, h, opts) }},
		{ConvergenceChecker, func(ctx context.Context, h *history.History) Result { return CheckConvergence(ctx, h, opts) }},
		{"recovery", func(ctx context.Context, h *history.History) Result {
			start := time.Now()
			figs := RecoveryFigures(Recovery(h))
			return Result{Checker: "recovery", Verdict: Ok, Figures: figs, Stats: Stats{Duration: time.Since(start)}}
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			h := benchRunHistory()
			benchHistory(b, h, func(ctx context.Context, h *history.History) ([]Result, *view) { return []Result{c.check(ctx, h)}, nil })
		})
	}
}

// BenchmarkRegisterVsPorcupine runs the register checker over the register
// operations of the 1,000,000-event run, and porcupine alone (its plain
// check, with RegisterModel) over the same porcupine operations, each
// reporting operations per CPU-second: the checker's share of the ratio is
// what its budget, conversion and evidence machinery cost.
func BenchmarkRegisterVsPorcupine(b *testing.B) {
	ops := benchRunHistory().Ops
	// Porcupine alone gets its operations as a user of RegisterModel
	// writes them: values.
	var stats Stats
	pops := registerOperations(ops, &stats)
	for i := range pops {
		pops[i].Input, pops[i].Output, pops[i].Metadata = opInput(pops[i]), opOutput(pops[i]), opMetadata(pops[i])
	}
	for _, c := range []struct {
		name  string
		check func() bool
	}{
		{"checker", func() bool {
			return CheckRegister(context.Background(), ops, Options{Timeout: time.Minute}).Verdict == Ok
		}},
		{"porcupine", func() bool { return porcupine.CheckOperations(RegisterModel, pops) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			runtime.GC()
			cpu0 := cpuTime()
			for b.Loop() {
				if !c.check() {
					b.Fatal("not linearizable")
				}
			}
			b.ReportMetric(float64(len(ops))*float64(b.N)/(cpuTime()-cpu0).Seconds(), "ops/cpu-s")
		})
	}
}
