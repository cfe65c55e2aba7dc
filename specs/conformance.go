package specs

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

// ConformanceRuns are the scenarios the conformance suite runs, each once
// per suite, shared by every guarantee whose checkers judge its history. Each
// is short, seeded and mixes the faults its guarantees are about.
var ConformanceRuns = map[string]Scenario{
	// The store under partitions and leader changes.
	"store": {Workload: "register", Nemesis: []string{"partition"},
		NemesisInterval: Duration(2 * time.Second), Duration: Duration(8 * time.Second), Seed: 11},
	// Pets under node partitions and kubelet crashes, no fencing (PS-12:
	// a partitioned pet is not replaced).
	"pets": {Workload: "pets", Nemesis: []string{"partition-node", "kill-kubelet"},
		NemesisInterval: Duration(1500 * time.Millisecond), Duration: Duration(10 * time.Second), Seed: 12},
	// Pets with a storage-only fencing controller under node partitions
	// (PS-14, PS-15): a fenced pet keeps running but cannot write.
	"fencing": {Workload: "pets", Nemesis: []string{"partition-node"}, Fencing: true, FenceAgents: []string{"storage"},
		NemesisInterval: Duration(3 * time.Second), Duration: Duration(12 * time.Second), Seed: 13},
	// ReplicaSets under kubelet crashes and controller restarts (PS-7):
	// containers that ignore TERM and long graces, so a replacement starts
	// while its predecessor still runs.
	"replicas": {Workload: "replicas-grace", Nemesis: []string{"kill-kubelet", "kill-controller"},
		NemesisInterval: Duration(2 * time.Second), Duration: Duration(10 * time.Second), Seed: 14},
	// Every kind of pod lifecycle: exit codes × restart policies, crash
	// loops, init containers, probes, readiness gates, preStop hooks.
	"lifecycle": {Workload: "lifecycle", Nemesis: []string{"none"}, Duration: Duration(15 * time.Second), Seed: 15},
	// Priority classes, budgets and preemption: long enough for several
	// preemptions whatever the schedule (12 s sometimes had none).
	"priority": {Workload: "priority", Nemesis: []string{"none"}, Duration: Duration(25 * time.Second), Seed: 16},
	// Topology spread, with the scheduler killed now and then.
	"spread": {Workload: "spread", Nemesis: []string{"kill-scheduler"},
		NemesisInterval: Duration(3 * time.Second), Duration: Duration(10 * time.Second), Seed: 17},
}

// ConformanceSuite runs the conformance scenarios on demand, each at most
// once, and remembers their outcomes. It is safe for concurrent use.
type ConformanceSuite struct {
	// StoreDir is where the runs are written.
	StoreDir string

	mu   sync.Mutex
	runs map[string]*conformanceRun
}

type conformanceRun struct {
	once sync.Once
	out  *Outcome
	err  error
}

// Outcome runs the conformance scenario called name unless it ran already,
// and returns its outcome.
func (cs *ConformanceSuite) Outcome(ctx context.Context, name string) (*Outcome, error) {
	s, ok := ConformanceRuns[name]
	if !ok {
		return nil, fmt.Errorf("%w: no conformance run %q", ErrInvalidScenario, name)
	}
	cs.mu.Lock()
	if cs.runs == nil {
		cs.runs = map[string]*conformanceRun{}
	}
	r, ok := cs.runs[name]
	if !ok {
		r = &conformanceRun{}
		cs.runs[name] = r
	}
	cs.mu.Unlock()
	r.once.Do(func() {
		s.Name = "conformance-" + name
		r.out, r.err = Run(ctx, s, RunOptions{StoreDir: cs.StoreDir})
	})
	return r.out, r.err
}

// Dirs returns the run directories of the conformance runs made so far, in
// name order.
func (cs *ConformanceSuite) Dirs() []string {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	var names []string
	for n, r := range cs.runs {
		if r.out != nil {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	dirs := make([]string, len(names))
	for i, n := range names {
		dirs[i] = filepath.Clean(cs.runs[n].out.Dir)
	}
	return dirs
}

// ChaosEntry is one cell of the chaos matrix: a workload under a nemesis.
type ChaosEntry struct {
	Workload string
	Nemesis  []string
	// Durable keeps raft's log on disk, so that members can be killed.
	Durable bool
}

// ChaosMatrix is the workload × nemesis matrix of the chaos suite. Together
// with the conformance runs it covers the faults PS-T asks for:
// control-plane↔node partitions (partition-node), node↔node partitions
// (partition-node-node), API↔store partitions (api-store), concurrent
// controller execution (pause-controller: a paused controller resumes on
// stale state while its work went on), kubelet failures (kill-kubelet,
// pause-kubelet) and controller failures (kill-controller).
var ChaosMatrix = []ChaosEntry{
	{Workload: "register", Nemesis: []string{"kill-member", "kill-leader"}, Durable: true},
	{Workload: "register", Nemesis: []string{"api-store", "clock"}},
	{Workload: "pets", Nemesis: []string{"partition-node-node", "pause-kubelet"}},
	{Workload: "pets", Nemesis: []string{"pause-controller", "kill-controller"}},
	{Workload: "replicas", Nemesis: []string{"clock", "kill-kubelet"}},
	{Workload: "priority", Nemesis: []string{"kill-scheduler", "pause-scheduler"}},
	{Workload: "spread", Nemesis: []string{"pause-scheduler", "partition-node"}},
	{Workload: "lifecycle", Nemesis: []string{"kill-kubelet", "pause-kubelet"}},
}
