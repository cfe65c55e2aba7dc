package workload

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/podsafe/podsafe/history"
)

// Needs says which parts of the control plane a workload needs besides the
// store and API servers; a scenario builds its cluster accordingly.
type Needs struct {
	// Kubelets: a kubelet with a simulated runtime on every node (and the
	// shared storage server).
	Kubelets bool
	// Scheduler binds the workload's pods.
	Scheduler bool
	// Controllers: node lifecycle, pod GC, pet, ReplicaSet, attach/detach
	// (and disruption) controllers.
	Controllers bool
	// Fencing: the fencing controller with the default agents.
	Fencing bool
	// MinNodes is the fewest nodes the workload makes sense with (0: any).
	MinNodes int
	// Zones wants nodes spread over at least this many zones (0: any).
	Zones int
}

// Env is what a workload runs with.
type Env struct {
	// Clients are clientsets of the workload identity, one per process,
	// each recording its API calls in the history; a process may use only
	// its own.
	Clients []kubernetes.Interface
	// Recorder receives the workload's operations (Invoke/Complete).
	Recorder *history.Recorder
	// Seed makes every choice reproducible; derive one stream per process.
	Seed uint64
	// Stats counts completed operations by outcome.
	Stats *Stats
	// Clock is the cluster's scaled clock: durations the workload waits for
	// (grace periods, scripts) are on it.
	Clock clock.WithTicker
	// TimeScale is how many times faster than wall time Clock runs.
	TimeScale float64
	// Nodes names the cluster's nodes, Zones maps each node to its zone
	// ("" when the topology has none).
	Nodes []string
	Zones map[string]string
	// Concurrency is len(Clients).
	Concurrency int
	// Limiter bounds the operations the workload's processes start per
	// second, all together (nil: no bound). Watches are not operations.
	Limiter *Limiter
	// Processes maps the workload's own process numbers to the ones the
	// history records (zero: as they are), so workloads run together
	// (Mix) never share one.
	Processes Processes
}

// Processes interleaves the process numbers of workloads run together:
// process n of one is recorded as n×Stride+Offset.
type Processes struct {
	Stride, Offset int
}

// of is the number process n is recorded under.
func (p Processes) of(n int) int {
	if p.Stride == 0 {
		return n
	}
	return n*p.Stride + p.Offset
}

// Workload generates client operations against a cluster. Implementations
// record every operation they perform (Env.Recorder) before it starts and
// when it ends, so an operation of unknown outcome is visible as such.
type Workload interface {
	// Name is the workload's name on the command line.
	Name() string
	// Describe is one line for `podsafe list`.
	Describe() string
	// Needs says what the cluster must run for this workload.
	Needs() Needs
	// Run drives the workload until ctx ends and then returns; operations
	// in flight when ctx ends are recorded with the outcome known then.
	Run(ctx context.Context, env Env) error
}

// Finisher is a workload with a final phase, as Jepsen's final generator:
// once the run's time is up and every fault has healed, Finish makes a few
// more recorded operations, and the run then waits for their effects to
// settle, which the convergence checker judges. A workload whose faults
// healed only then shows whether what it broke comes back: a ReplicaSet
// that replaces a pod, a kubelet that finishes a deletion. ctx bounds it;
// an operation that fails is recorded as such and is no error of Finish.
type Finisher interface {
	Finish(ctx context.Context, env Env) error
}

// ErrUnknownWorkload: no workload has that name.
var ErrUnknownWorkload = errors.New("unknown workload")

var registry = map[string]func() Workload{}

// Add makes a workload available under its name; new builds a fresh,
// default-configured value for each run. It panics on a duplicate name.
func Add(name string, new func() Workload) {
	if _, dup := registry[name]; dup {
		panic("workload " + name + " registered twice")
	}
	registry[name] = new
}

// Lookup returns a fresh workload called name; names joined by "+" are a
// Mix of those workloads.
func Lookup(name string) (Workload, error) {
	if strings.Contains(name, MixSeparator) {
		return lookupMix(name)
	}
	mk, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("%w %q; choose one of %s", ErrUnknownWorkload, name, strings.Join(Names(), ", "))
	}
	return mk(), nil
}

// Names lists the registered workloads, sorted.
func Names() []string {
	var names []string
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Describe maps every workload to its one-line description.
func Describe() map[string]string {
	out := map[string]string{}
	for n, mk := range registry {
		out[n] = mk().Describe()
	}
	return out
}

func init() {
	Add("register", func() Workload { return &Register{} })
}

// Name implements Workload.
func (w *Register) Name() string { return "register" }

// Describe implements Workload.
func (w *Register) Describe() string {
	return "create/get/compare-and-swap/delete on a small rotating key set through the API; checked for linearizability"
}

// Needs implements Workload: the store and API servers only.
func (w *Register) Needs() Needs { return Needs{} }

// Placer is a workload whose pods can be placed by the harness: on an
// existing cluster, podsafe's pods must tolerate the taint of podsafe's own
// nodes and select them, so that they land nowhere else.
type Placer interface {
	SetPlacement(func(*corev1.PodSpec))
}

// place applies placement (when set) to spec.
func place(placement func(*corev1.PodSpec), spec *corev1.PodSpec) {
	if placement != nil {
		placement(spec)
	}
}

// SetPlacement implements Placer.
func (k *SetKnobs) SetPlacement(p func(*corev1.PodSpec)) { k.Placement = p }

// SetPlacement implements Placer.
func (w *Lifecycle) SetPlacement(p func(*corev1.PodSpec)) { w.Placement = p }

// SetPlacement implements Placer.
func (w *Priority) SetPlacement(p func(*corev1.PodSpec)) { w.Placement = p }

// SetPlacement implements Placer.
func (w *Spread) SetPlacement(p func(*corev1.PodSpec)) { w.Placement = p }
