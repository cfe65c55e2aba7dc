package specs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/checker"
	"github.com/podsafe/podsafe/fencing"
	"github.com/podsafe/podsafe/history"
	"github.com/podsafe/podsafe/nemesis"
	"github.com/podsafe/podsafe/report"
	"github.com/podsafe/podsafe/specs"
	"github.com/podsafe/podsafe/target/kube"
	"github.com/podsafe/podsafe/target/kube/binaries"
)

// The conformance suite: one It per guarantee ID, labelled with the ID and
// its family, so `ginkgo --label-filter=PS` (or `go test ./specs/
// -ginkgo.label-filter=PS-11`) proves one family or one guarantee. Most
// guarantees are judged by a checker over the history of a shared
// conformance run (specs.ConformanceRuns, each run once per suite): the It
// asserts that a checker judged the ID, found it held, and had something to
// judge. The others are asserted on the run's history directly or probed on a
// live in-process cluster. Guarantees with no proof yet are pending (PIt), so
// the conformance report shows them as not covered.
//
// PODSAFE_CONFORMANCE_STORE keeps the runs' directories there (default: a
// temporary directory removed after the suite).
//
// PODSAFE_TARGET=kube makes the runs on the kube target instead (real etcd,
// kube-apiserver, kube-scheduler and kube-controller-manager with podsafe's
// kubelets; make kube-binaries first): each run in its kube form
// (specs.ConformanceScenario), which takes minutes rather than seconds. The
// guarantees whose run the kube target cannot make (fencing) are skipped
// with the reason, and so are the suite's other conformance specs, which
// probe podsafe's own cluster in process: the report shows them not covered
// on kube. make conformance-kube runs it.
var conformance = &specs.ConformanceSuite{Target: conformanceTarget}

// conformanceTarget is PODSAFE_TARGET, read once.
var conformanceTarget = os.Getenv("PODSAFE_TARGET")

// conformanceTimeout bounds each conformance spec, the run it may start
// included: a kube run takes up to two minutes plus its control plane's start
// and the checks.
func conformanceTimeout() SpecTimeout {
	if conformanceTarget == specs.TargetKube {
		return SpecTimeout(15 * time.Minute)
	}
	return SpecTimeout(5 * time.Minute)
}

// thisFile is this file's path: the specs in it run on either target.
var thisFile = func() string {
	_, f, _, _ := runtime.Caller(0)
	return f
}()

var _ = BeforeSuite(func() {
	switch conformanceTarget {
	case "", specs.TargetEmbedded:
	case specs.TargetKube:
		if _, err := binaries.Cached(binaries.Options{}); err != nil {
			Fail("PODSAFE_TARGET=kube needs the kube binaries (make kube-binaries): " + err.Error())
		}
	default:
		Fail(fmt.Sprintf("PODSAFE_TARGET=%q: choose %s or %s", conformanceTarget, specs.TargetEmbedded, specs.TargetKube))
	}
	if dir := os.Getenv("PODSAFE_CONFORMANCE_STORE"); dir != "" {
		conformance.StoreDir = dir
		return
	}
	dir, err := os.MkdirTemp("", "podsafe-conformance-")
	Expect(err).NotTo(HaveOccurred())
	conformance.StoreDir = dir
	DeferCleanup(os.RemoveAll, dir)
})

// On the kube target this file's specs judge the kube runs and the probes
// labelled onKube ask a real kube-apiserver; the other conformance specs
// (the other probes, PS-T) drive podsafe's own cluster or its suites'
// definitions, so they would pass on the embedded target in a kube report.
// They are skipped there, saying so.
var _ = BeforeEach(func() {
	if conformanceTarget != specs.TargetKube {
		return
	}
	sp := CurrentSpecReport()
	if !slices.Contains(sp.Labels(), "conformance") || sp.LeafNodeLocation.FileName == thisFile || slices.Contains(sp.Labels(), onKube) {
		return
	}
	Skip("not covered on kube: this spec probes podsafe's embedded control plane in process, not the kube target")
})

// judgedBy is one guarantee proven by the checkers over a conformance run.
type judgedBy struct {
	id, run, what string
	// also asserts more on the run's history, when set.
	also func(h *history.History, res []checker.Result)
	// inputOnly: the checker need only have had input (Stats.Ops); also
	// asserts what was covered.
	inputOnly bool
	// notOnKube, when set, says why the kube form of the run cannot judge
	// the guarantee; the spec is skipped there with that reason.
	notOnKube string
}

// family is the family of a guarantee ID: LC-3 → LC.
func family(id string) string {
	f, _, _ := strings.Cut(id, "-")
	return f
}

// outcome returns the conformance run called name, running it if needed,
// and its loaded history.
func outcome(ctx context.Context, name string) (*specs.Outcome, *history.History) {
	out, err := conformance.Outcome(context.WithoutCancel(ctx), name)
	if errors.Is(err, specs.ErrNotOnTarget) {
		Skip(err.Error())
	}
	Expect(err).NotTo(HaveOccurred(), "conformance run %s", name)
	h, err := history.Load(filepath.Join(out.Dir, "history.jsonl"))
	Expect(err).NotTo(HaveOccurred())
	outcomeLoad = out.Results.Load
	return out, h
}

// outcomeLoad is the machine's load during the run outcome last returned
// (specs of one process run one at a time).
var outcomeLoad *report.Load

// expectReached asserts that the run reached what a spec judges (it
// partitioned a node, fenced one, preempted pods): a run that did not, on
// a machine loaded beyond twice its CPUs, was starved rather than wrong,
// and the spec says so and judges nothing (Skip) instead of failing. The
// guarantee's own verdict is never excused this way.
func expectReached(ok bool, format string, args ...any) {
	GinkgoHelper()
	if ok {
		return
	}
	what := fmt.Sprintf(format, args...)
	if outcomeLoad.Starved() {
		Skip(fmt.Sprintf("the machine starved the run: it did not reach what this spec judges (%s; %s)", what, outcomeLoad))
	}
	Fail(fmt.Sprintf("%s (%s)", what, outcomeLoad))
}

// expectJudgedOk asserts that some checker of the run judged id, that every
// one that did found it held, and that at least one had something to judge.
func expectJudgedOk(out *specs.Outcome, id string, inputOnly bool) {
	outcomeLoad = out.Results.Load
	var judges []checker.Result
	for _, r := range out.Results.Checks {
		if slices.Contains(r.Guarantees, id) {
			judges = append(judges, r)
		}
	}
	Expect(judges).NotTo(BeEmpty(), "no checker of run %s judges %s (checks: %v)", out.Dir, id, checkerNames(out.Results.Checks))
	for _, r := range judges {
		Expect(r.Verdict).To(Equal(checker.Ok), "%s judged %s %s in %s: %s", r.Checker, id, r.Verdict, out.Dir, r.Summary)
	}
	expectReached(slices.ContainsFunc(judges, func(r checker.Result) bool { return r.Stats.Checked > 0 || inputOnly && r.Stats.Ops > 0 }),
		"the run %s gave the checkers of %s something to judge: %+v", out.Dir, id, judges)
}

func checkerNames(rs []checker.Result) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Checker)
	}
	return out
}

var judged = []judgedBy{
	{id: checker.GuaranteeStoreLin, run: "store", what: "register operations stay linearizable under partitions"},
	{id: checker.GuaranteeWatchOrder, run: "store", what: "watch streams follow the committed history without gap or duplicate and resume where they left off"},
	{id: checker.GuaranteeWatchValue, run: "store", what: "every watch event is the change committed at its resourceVersion"},
	{id: checker.GuaranteeReadAfterWatch, run: "store", what: "a read that begins after a watch delivery reflects it"},
	{id: checker.GuaranteeList, run: "store", what: "a list is the committed state at its resourceVersion"},

	{id: "LC-1", run: "lifecycle", what: "every recorded phase is one of the five"},
	{id: "LC-2", run: "lifecycle", what: "phases follow exit codes and restart policies and never go back"},
	{id: "LC-3", run: "pets", what: "a UID is bound once and runs only on its node"},
	{id: "LC-6", run: "lifecycle", what: "restarts wait out the exponential back-off"},
	{id: "LC-7", run: "lifecycle", what: "pod conditions are coherent"},
	{id: "LC-8", run: "lifecycle", what: "Ready needs every readiness gate"},
	{id: "LC-9", run: "lifecycle", what: "probes run as their spec says, after the startup probe; failing ones kill; ready only after readiness succeeded"},
	{id: "LC-10", run: "lifecycle", what: "init containers run one after another, to success, before the app"},
	{id: "LC-11", run: "pets", what: "graceful deletion: preStop, TERM, KILL only when the grace expires"},
	{id: "LC-12", run: "pets", what: "a restarted kubelet gives a terminating pod its full grace again"},

	{id: "PS-1", run: "pets", what: "a pod executes on exactly one node"},
	{id: "PS-2", run: "lifecycle", what: "phases happen in order and never go back"},
	{id: "PS-3", run: "pets", what: "the grace period is honoured and only ever shortened"},
	{id: "PS-4", run: "pets", what: "preStop, TERM, at least 2 s, KILL"},
	{id: "PS-5", run: "pets", what: "a kubelet crash restarts termination with the full grace"},
	{id: "PS-7", run: "replicas", what: "ReplicaSet overlap is reported as expected, never as a violation", inputOnly: true,
		also: func(h *history.History, res []checker.Result) {
			expected := 0
			for _, r := range res {
				for _, ev := range r.Evidence {
					Expect(ev.Expected).To(BeTrue(), "a valid run carries only expected evidence: %+v", ev)
					expected++
				}
			}
			expectReached(expected > 0, "the run overlapped replicas, reported as expected")
		}},
	{id: "PS-8", run: "pets", what: "only the kubelet removes a pod, after its processes ended"},
	{id: "PS-9", run: "pets", what: "controllers only delete gracefully"},
	{id: "PS-10", run: "pets", what: "pod GC force deletes only pods of deleted nodes"},
	{id: "PS-11", run: "pets", what: "at most one process per pet identity"},
	{id: "PS-12", run: "pets", what: "a partitioned pet is not replaced while partitioned",
		also: func(h *history.History, _ []checker.Result) {
			expectReached(faultsNamed(h, "partition-node") > 0, "the run partitioned a node")
		}},
	{id: "PS-14", run: "fencing", what: "the fencing controller force deletes only after the fence",
		also: func(h *history.History, res []checker.Result) {
			expectReached(len(fencedNodes(h)) > 0, "the run fenced a node")
			// The authority checker judged a force deletion by the fencing
			// controller, not only the kubelets' own.
			expectReached(slices.ContainsFunc(res, func(r checker.Result) bool {
				return r.Checker == checker.AuthorityChecker && strings.Contains(r.Summary, "by the fencing controller after a fence")
			}), "the authority checker judged a force deletion by the fencing controller")
		}},
	{id: "PS-15", run: "fencing", what: "no two nodes' writes to one RWO volume interleave; a fenced node's writes are refused",
		also: func(h *history.History, _ []checker.Result) {
			expectReached(ledgerActions(h)[history.LedgerWrite] > 0, "pets wrote their volumes")
		}},

	{id: "GP-1", run: "pets", what: "the kubelet's grace is the deletion's, else the spec's"},
	{id: "GP-2", run: "pets", what: "preStop runs within the grace period"},
	{id: "GP-3", run: "pets", what: "containers get at least 2 s after preStop"},
	{id: "GP-5", run: "pets", what: "the effective grace is the smallest asked for"},
	{id: "GP-R", run: "replicas", what: "TERM and KILL respect the grace period's safety bound"},

	{id: "PR-4", run: "priority", what: "preemption frees a node where the preemptor then fits"},
	{id: "PR-8", run: "priority", what: "a node is a candidate only if removing lower-priority pods makes the preemptor fit"},
	{id: "PR-9", run: "priority", what: "no cross-node preemption"},
	{id: "PR-10", run: "priority", what: "no preemption without a pending preemptor; victims strictly lower"},
	{id: "PR-12", run: "priority", what: "PreemptionPolicy Never never preempts"},

	{id: "TS-2", run: "spread", what: "DoNotSchedule keeps the skew within maxSkew at binding"},
	{id: "TS-4", run: "spread", what: "several constraints are ANDed"},
	{id: "TS-5", run: "spread", what: "only nodes with every topology key are considered"},
	{id: "TS-6", run: "spread", what: "only pods of the pod's namespace count"},
	{id: "TS-7", run: "spread", what: "nodeAffinityPolicy decides which nodes count"},
	{id: "TS-8", run: "spread", what: "nodeTaintsPolicy decides which nodes count"},
	{id: "TS-10", run: "spread", what: "each placement is judged against the state at its binding"},
	{id: "TS-11", run: "spread", what: "pods on tainted nodes are counted"},
	{id: "TS-12", run: "spread", what: "domains are known only from existing nodes"},
}

var _ = Describe("conformance", Label("conformance"), func() {
	for _, j := range judged {
		It(j.id+": "+j.what, Label(j.id, family(j.id)), func(ctx SpecContext) {
			if j.notOnKube != "" && conformanceTarget == specs.TargetKube {
				Skip("not covered on kube: " + j.notOnKube)
			}
			out, h := outcome(ctx, j.run)
			expectJudgedOk(out, j.id, j.inputOnly)
			if j.also != nil {
				j.also(h, out.Results.Checks)
			}
		}, conformanceTimeout())
	}

	It("PS-7: Deployments act through their ReplicaSets, and every rollout completes once faults heal", Label("PS-7", "PS"), func(ctx SpecContext) {
		out, h := outcome(ctx, "deployments")
		expectJudgedOk(out, "PS-7", false)
		rollouts := 0
		for _, op := range h.Ops {
			if op.Func == "deployments:rollout" && op.Status == history.StatusOK {
				rollouts++
			}
		}
		expectReached(rollouts > 0, "the run rolled a Deployment out")
		expectReached(slices.ContainsFunc(out.Results.Checks, func(r checker.Result) bool {
			return r.Checker == checker.ConvergenceChecker && strings.Contains(r.Summary, "Deployment")
		}), "the convergence checker judged the Deployments")
	}, conformanceTimeout())

	It("LC-5: terminated containers carry reason, exit code, start and finish", Label("LC-5", "LC"), func(ctx SpecContext) {
		_, h := outcome(ctx, "lifecycle")
		terminated := 0
		for _, p := range storePods(h) {
			for _, cs := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
				if t := cs.State.Terminated; t != nil {
					terminated++
					Expect(t.Reason).NotTo(BeEmpty(), "pod %s container %s terminated without a reason", p.Name, cs.Name)
					Expect(t.StartedAt.IsZero() || t.FinishedAt.IsZero()).To(BeFalse(), "pod %s container %s: start %v finish %v", p.Name, cs.Name, t.StartedAt, t.FinishedAt)
					Expect(t.FinishedAt.Before(&t.StartedAt)).To(BeFalse(), "pod %s container %s finished before it started", p.Name, cs.Name)
				}
				if r := cs.State.Running; r != nil {
					Expect(r.StartedAt.IsZero()).To(BeFalse(), "pod %s container %s running without a start time", p.Name, cs.Name)
				}
				set := 0
				for _, s := range []bool{cs.State.Waiting != nil, cs.State.Running != nil, cs.State.Terminated != nil} {
					if s {
						set++
					}
				}
				Expect(set).To(BeNumerically("<=", 1), "pod %s container %s is in %d states at once", p.Name, cs.Name, set)
			}
		}
		expectReached(terminated > 0, "the run terminated containers")
	}, conformanceTimeout())

	It("PR-15: every preempted pod gets an event", Label("PR-15", "PR"), func(ctx SpecContext) {
		_, h := outcome(ctx, "priority")
		victims, events := 0, 0
		for _, c := range h.API {
			if c.Identity != apiserver.IdentityScheduler || c.Outcome != history.StatusOK {
				continue
			}
			switch {
			case c.Verb == "delete" && c.Resource == "pods":
				victims++
			case c.Verb == "create" && c.Resource == "events":
				events++
			}
		}
		expectReached(victims > 0, "the run preempted pods")
		Expect(events).To(BeNumerically(">=", victims), "%d victims, %d events", victims, events)
	}, conformanceTimeout())
})

// storePods decodes every recorded store change of a pod.
func storePods(h *history.History) []corev1.Pod {
	var out []corev1.Pod
	for _, ev := range h.Store {
		if ev.Resource != "pods" || len(ev.Object) == 0 {
			continue
		}
		var p corev1.Pod
		Expect(json.Unmarshal(ev.Object, &p)).To(Succeed(), "pod %s at rv %s", ev.Name, ev.RV)
		out = append(out, p)
	}
	return out
}

// fencedNodes names the nodes the store recorded with the Fenced condition
// True.
func fencedNodes(h *history.History) []string {
	var out []string
	for _, ev := range h.Store {
		if ev.Resource != "nodes" || len(ev.Object) == 0 {
			continue
		}
		var n corev1.Node
		Expect(json.Unmarshal(ev.Object, &n)).To(Succeed())
		for _, c := range n.Status.Conditions {
			if c.Type == fencing.FencedCondition && c.Status == corev1.ConditionTrue && !slices.Contains(out, n.Name) {
				out = append(out, n.Name)
			}
		}
	}
	return out
}

func faultsNamed(h *history.History, name string) int {
	n := 0
	for _, f := range h.Nemesis {
		if f.Name == name {
			n++
		}
	}
	return n
}

func ledgerActions(h *history.History) map[history.LedgerAction]int {
	out := map[history.LedgerAction]int{}
	for _, e := range h.Ledger {
		out[e.Action]++
	}
	return out
}

// With PODSAFE_CONFORMANCE_STORE set, the suite leaves its runs there and
// writes the conformance report over them (conformance.html, .json and a
// JUnit file): for every guarantee ID, covered or not, by which runs and by
// which specs (the spec results go to specs.json beside the runs).
var _ = ReportAfterSuite("conformance report", func(r Report) {
	store := os.Getenv("PODSAFE_CONFORMANCE_STORE")
	if store == "" {
		return
	}
	var results []report.SpecResult
	for _, sp := range r.SpecReports {
		if sp.LeafNodeType != types.NodeTypeIt {
			continue
		}
		var ids []string
		for _, l := range sp.Labels() {
			if _, ok := report.LookupGuarantee(l); ok {
				ids = append(ids, l)
			}
		}
		if len(ids) == 0 {
			continue
		}
		res := report.SpecResult{Name: sp.FullText(), IDs: ids, State: "skipped"}
		switch {
		case sp.State.Is(types.SpecStatePassed):
			res.State = report.StatusPassed
		case sp.State.Is(types.SpecStateFailureStates):
			res.State, res.Failure = report.StatusFailed, sp.Failure.Message
		case sp.State.Is(types.SpecStateSkipped):
			res.Reason = sp.Failure.Message
		}
		results = append(results, res)
	}
	b, err := json.MarshalIndent(results, "", "  ")
	Expect(err).NotTo(HaveOccurred())
	Expect(os.WriteFile(filepath.Join(store, report.SpecsFile), b, 0o644)).To(Succeed())
	_, err = report.ConformanceDir(store)
	Expect(err).NotTo(HaveOccurred())
})

// TestConformanceScenarios: every conformance run has a kube form or a
// reason it has none; each kube form is valid, keeps its run's workload and
// seed, runs at time scale 1 for at least a minute, and names only faults
// the kube target of its shape offers (with network namespaces; a group such
// as partition needs one of its faults offered, the schedule leaves the
// others out). The embedded forms are ConformanceRuns as they are.
func TestConformanceScenarios(t *testing.T) {
	for name, run := range specs.ConformanceRuns {
		s, err := specs.ConformanceScenario(specs.TargetEmbedded, name)
		if err != nil || s.Name != "conformance-"+name || s.Duration != run.Duration || s.Target != "" {
			t.Errorf("%s on embedded: %+v, %v; want ConformanceRuns[%q] named conformance-%s", name, s, err, name, name)
		}
		k, err := specs.ConformanceScenario(specs.TargetKube, name)
		if why, ok := specs.ConformanceNotOnKube[name]; ok {
			if !errors.Is(err, specs.ErrNotOnTarget) || !strings.Contains(err.Error(), why) {
				t.Errorf("%s on kube: %v, want ErrNotOnTarget saying %q", name, err, why)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s on kube: %v", name, err)
			continue
		}
		if k.Target != specs.TargetKube || k.TimeScale != 1 || k.Workload != run.Workload || k.Seed != run.Seed ||
			time.Duration(k.Duration) < time.Minute || k.Name != "conformance-kube-"+name {
			t.Errorf("%s on kube: %+v", name, k)
		}
		k.Defaults()
		if err := k.Validate(); err != nil {
			t.Errorf("%s on kube: %v", name, err)
			continue
		}
		var nodes []string
		for _, n := range k.Topology.Nodes {
			nodes = append(nodes, n.Name)
		}
		plan, err := kube.Plan(kube.Config{Etcd: k.Topology.Members, APIServers: k.Kube.APIServers, Network: kube.NetworkNamespaces}, nodes, k.Fencing)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range k.Nemesis {
			if n == "none" {
				continue
			}
			faults, err := nemesis.Lookup(n)
			if err != nil {
				t.Fatal(err)
			}
			offered := 0
			for _, f := range faults {
				if f.Available(plan) {
					offered++
				}
			}
			if offered == 0 || len(faults) == 1 && offered != 1 {
				t.Errorf("%s on kube: fault %s: %d of %d offered by the kube target", name, n, offered, len(faults))
			}
		}
	}
	if _, err := specs.ConformanceScenario("elsewhere", "pets"); !errors.Is(err, specs.ErrInvalidScenario) {
		t.Errorf("an unknown target: %v", err)
	}
	if _, err := specs.ConformanceScenario(specs.TargetKube, "nope"); !errors.Is(err, specs.ErrInvalidScenario) {
		t.Errorf("an unknown run: %v", err)
	}
}
