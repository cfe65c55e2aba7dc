package specs

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/workload"
)

// ConformanceRuns are the scenarios the conformance suite runs, each once
// per suite, shared by every guarantee whose checkers judge its history. Each
// is short, seeded and mixes the faults its guarantees are about.
var ConformanceRuns = map[string]Scenario{
	// The store under partitions and leader changes. Its watch window is
	// small (conformanceWatchWindow) and its watches short (2-3 s), so the
	// watchers resume often and their rewinds reach the window's floor:
	// some get 410 Gone and relist (STORE-WATCH-ORDER).
	"store": {Workload: "register", Nemesis: []string{"partition"}, WatchWindow: conformanceWatchWindow,
		Knobs:           workload.Knobs{"register": {"watchTimeout": "3s"}},
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
	// Deployments scaled and rolled out under node partitions and
	// controller restarts (PS-7 through their ReplicaSets): the final phase
	// rolls each out once more after the heal, and the convergence checker
	// judges that every rollout completed.
	"deployments": {Workload: "deployments", Nemesis: []string{"partition-node", "kill-controller"},
		NemesisInterval: Duration(2 * time.Second), Duration: Duration(10 * time.Second), Seed: 18},
	// Every kind of pod lifecycle: exit codes × restart policies, crash
	// loops, init containers, probes, readiness gates, preStop hooks.
	"lifecycle": {Workload: "lifecycle", Nemesis: []string{"none"}, Duration: Duration(15 * time.Second), Seed: 15},
	// Priority classes, budgets and preemption: long enough for several
	// preemptions whatever the schedule (12 s sometimes had none).
	"priority": {Workload: "priority", Nemesis: []string{"none"}, Duration: Duration(25 * time.Second), Seed: 16},
	// Topology spread, with the scheduler killed now and then, and the
	// hard cases: minDomains beyond the zones, matchLabelKeys, node
	// affinity and taint policies, on a topology with a tainted node.
	"spread": {Workload: "spread", Nemesis: []string{"kill-scheduler"}, Topology: spreadTopology(), Knobs: spreadHardCases,
		NemesisInterval: Duration(3 * time.Second), Duration: Duration(10 * time.Second), Seed: 17},
}

// conformanceWatchWindow is the watch window of the conformance run that
// judges the watch guarantees: a few hundred events, which the register
// workload writes several times over in the run, rather than the default
// 10,000, which a short run never fills.
const conformanceWatchWindow = 256

// ConformanceKube says how each conformance run is made on the kube target
// (ConformanceSuite.Target kube): the same workload, seed and shape as in
// ConformanceRuns, run on a real control plane at time scale 1 for long
// enough that the workloads, paced at one operation per ~2 s there, do
// something worth judging, with only faults the kube target has. Each
// entry is the kube form of the run of that name; a run the kube target
// cannot make is in ConformanceNotOnKube instead.
var ConformanceKube = map[string]Scenario{
	// The registers through two kube-apiservers over three etcd members
	// under every partition shape the target has (ring needs five members
	// and is left out by the schedule). The watchers watch through one API
	// server and read through the other, so read-after-watch and the lists
	// cross API servers. The register workload is not paced: 60 s is
	// thousands of operations.
	"store": {Workload: "register", Nemesis: []string{"partition"},
		Kube:            &KubeScenario{APIServers: 2},
		NemesisInterval: Duration(5 * time.Second), Duration: Duration(60 * time.Second), Seed: 11},
	// Pets under node partitions and kubelet crashes, as embedded, without
	// RWO volumes (the kube target has no storage server). Partitions of
	// 5-15 s straddle the node monitor's 10 s grace, so some nodes go
	// NotReady and their pods are evicted (tolerations of 10 s), others come
	// back first; 90 s is ~45 pet operations.
	"pets": {Workload: "pets", Nemesis: []string{"partition-node", "kill-kubelet"},
		NemesisInterval: Duration(10 * time.Second), Duration: Duration(90 * time.Second), Seed: 12},
	// ReplicaSets under kubelet crashes and kube-controller-manager crashes
	// (kill-controller kills the whole process there).
	"replicas": {Workload: "replicas-grace", Nemesis: []string{"kill-kubelet", "kill-controller"},
		NemesisInterval: Duration(8 * time.Second), Duration: Duration(90 * time.Second), Seed: 14},
	// Deployments through kube-controller-manager's deployment controller,
	// under kubelet crashes and kube-controller-manager crashes.
	"deployments": {Workload: "deployments", Nemesis: []string{"kill-kubelet", "kill-controller"},
		NemesisInterval: Duration(8 * time.Second), Duration: Duration(90 * time.Second), Seed: 18},
	// Every kind of pod lifecycle without faults. The crash loops' back-off
	// runs in real time here (10 s, 20 s, 40 s ...), so 120 s sees a few
	// restarts of each.
	"lifecycle": {Workload: "lifecycle", Nemesis: []string{"none"}, Duration: Duration(120 * time.Second), Seed: 15},
	// Priority classes, budgets and preemption by kube-scheduler, without
	// faults: 120 s is ~60 operations, several preemptions.
	"priority": {Workload: "priority", Nemesis: []string{"none"}, Duration: Duration(120 * time.Second), Seed: 16},
	// Topology spread, with kube-scheduler killed now and then, and the
	// embedded run's hard cases.
	"spread": {Workload: "spread", Nemesis: []string{"kill-scheduler"}, Topology: spreadTopology(), Knobs: spreadHardCases,
		NemesisInterval: Duration(10 * time.Second), Duration: Duration(90 * time.Second), Seed: 17},
	// Pets with podsafe's fencing controller (an ordinary client of the real
	// API servers) and its power agent under node partitions (PS-14). The
	// kube target has no storage server, so the embedded run's storage
	// agent is a power agent here. Partitions of 15-45 s straddle the
	// fence threshold (15 s without a lease renewal): most partitioned nodes
	// are fenced (one at a time: budget 1), the real node lifecycle
	// controller evicts their pets first, and only the fence's force
	// deletion lets the StatefulSet controller replace them.
	"fencing": {Workload: "pets", Nemesis: []string{"partition-node"}, Fencing: true, FenceAgents: []string{"power"},
		NemesisInterval: Duration(30 * time.Second), Duration: Duration(120 * time.Second), Seed: 13},
}

// spreadHardCases are the spread workload's knobs of the conformance runs:
// every field of the topology spread guarantees is in play (TS-1, TS-2's
// minDomains, TS-7, TS-8).
var spreadHardCases = workload.Knobs{"spread": {"minDomains": 3, "matchLabelKeys": true, "nodePolicies": true}}

// spreadTopology is the spread runs' cluster: four nodes in two zones, the
// last tainted NoSchedule, so that it counts for the constraints that
// ignore taints (the default) and not for those that honour them, and only
// pods that tolerate it land there (TS-8, TS-11).
func spreadTopology() cluster.Topology {
	t := cluster.DefaultTopology(3, 4, 2)
	t.Nodes[3].Taints = []corev1.Taint{{Key: "podsafe.io/spread-test", Value: "tainted", Effect: corev1.TaintEffectNoSchedule}}
	return t
}

// ConformanceNotOnKube names the conformance runs the kube target cannot
// make, each with why; the guarantees proven only by them are not covered
// on kube.
var ConformanceNotOnKube = map[string]string{}

// ErrNotOnTarget means a conformance run cannot be made on the suite's
// target; the error says why.
var ErrNotOnTarget = errors.New("not covered on this target")

// ConformanceScenario is the scenario of the conformance run called name on
// target (TargetEmbedded, "" or TargetKube). The error wraps ErrNotOnTarget
// when the target cannot make that run, ErrInvalidScenario when there is no
// such run or target.
func ConformanceScenario(target, name string) (Scenario, error) {
	s, ok := ConformanceRuns[name]
	if !ok {
		return Scenario{}, fmt.Errorf("%w: no conformance run %q", ErrInvalidScenario, name)
	}
	switch target {
	case "", TargetEmbedded:
		s.Name = "conformance-" + name
		return s, nil
	case TargetKube:
		if why, ok := ConformanceNotOnKube[name]; ok {
			return Scenario{}, fmt.Errorf("%w: conformance run %s on kube: %s", ErrNotOnTarget, name, why)
		}
		k, ok := ConformanceKube[name]
		if !ok {
			return Scenario{}, fmt.Errorf("%w: conformance run %s has no kube form (ConformanceKube)", ErrNotOnTarget, name)
		}
		k.Name = "conformance-kube-" + name
		k.Target = TargetKube
		k.TimeScale = 1
		if k.Kube != nil {
			kc := *k.Kube
			k.Kube = &kc
		}
		return k, nil
	default:
		return Scenario{}, fmt.Errorf("%w: target %q: choose embedded or kube", ErrInvalidScenario, target)
	}
}

// ConformanceSuite runs the conformance scenarios on demand, each at most
// once, and remembers their outcomes. It is safe for concurrent use.
type ConformanceSuite struct {
	// StoreDir is where the runs are written.
	StoreDir string
	// Target is the system the runs are made on: TargetEmbedded (or empty)
	// runs ConformanceRuns, TargetKube their kube forms (ConformanceScenario).
	Target string

	mu   sync.Mutex
	runs map[string]*conformanceRun
}

type conformanceRun struct {
	once sync.Once
	out  *Outcome
	err  error
}

// Outcome runs the conformance scenario called name on the suite's target
// unless it ran already, and returns its outcome. The error wraps
// ErrNotOnTarget when the target cannot make that run.
func (cs *ConformanceSuite) Outcome(ctx context.Context, name string) (*Outcome, error) {
	s, err := ConformanceScenario(cs.Target, name)
	if err != nil {
		return nil, err
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

// KubeChaosNemesis are the fault groups make chaos-kube runs every workload
// under on the kube target (3 etcd members, 2 API servers): the Makefile's
// KUBE_CHAOS_NEMESIS default.
var KubeChaosNemesis = []string{"partition", "node-partition", "kill", "pause"}

// KubeChaosShape is the kube target make chaos-kube runs on.
var KubeChaosShape = struct{ Members, APIServers, Nodes int }{3, 2, 3}

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
	{Workload: "deployments", Nemesis: []string{"partition-node", "pause-controller"}},
	{Workload: "priority", Nemesis: []string{"kill-scheduler", "pause-scheduler"}},
	{Workload: "spread", Nemesis: []string{"pause-scheduler", "partition-node"}},
	{Workload: "lifecycle", Nemesis: []string{"kill-kubelet", "pause-kubelet"}},
}
