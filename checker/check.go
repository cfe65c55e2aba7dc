package checker

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/podsafe/podsafe/history"
)

// Info describes one checker for listings.
type Info struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Guarantees  []string `json:"guarantees"`
}

// checkerDef is one entry of the checker registry: what the checker is
// (its Info), when it applies to a history, and how it judges one. The
// registry is the one list Catalog, Check, the CLI's listing and the
// reports derive from. Both functions read the history through the view
// that Check shares among the checkers of one history.
type checkerDef struct {
	Info
	// applies reports whether the history holds what the checker judges.
	applies func(v *view) bool
	// assumes lists what the checker takes for granted about how the
	// history was recorded: where the history breaks one, it answers
	// Unknown without judging (see validate.go).
	assumes []assumption
	// reads lists the parts of the view the checker reads, which Check
	// starts building as soon as it knows the checker applies.
	reads []viewPart
	check func(ctx context.Context, v *view, opts Options) Result
}

// The assumptions the checkers rest on.
var (
	opsAssumed     = []assumption{assumeOpsWellFormed}
	clientsAssumed = []assumption{assumeOpsWellFormed, assumeOneOutstanding}
	podsAssumed    = []assumption{assumeCallsWellFormed, assumeRecorderClock}
	clockAssumed   = []assumption{assumeCallsWellFormed, assumeRecorderClock, assumeNodeClock}
)

// checkOne runs the named checker of the registry over h on its own, as
// Check would (its assumptions first), for the exported CheckX functions.
func checkOne(ctx context.Context, h *history.History, opts Options, name string) Result {
	v, done := standaloneView(ctx, h)
	defer done()
	for _, d := range registry() {
		if d.Name == name {
			v.warm(d.reads, d.assumes)
			if res, broken := v.unassumed(ctx, &d, opts); broken {
				return res
			}
			return d.check(ctx, v, opts)
		}
	}
	panic("checker: no checker named " + name)
}

// onHistory adapts a checker that reads the history itself rather than
// the view.
func onHistory(check func(context.Context, *history.History, Options) Result) func(context.Context, *view, Options) Result {
	return func(ctx context.Context, v *view, opts Options) Result { return check(ctx, v.h, opts) }
}

// onHistoryIf adapts an applies function that reads the history itself.
func onHistoryIf(applies func(*history.History) bool) func(*view) bool {
	return func(v *view) bool { return applies(v.h) }
}

// registry lists every checker, in the order Check runs them and reports
// list them.
func registry() []checkerDef {
	return []checkerDef{{
		Info: Info{
			Name:        RegisterChecker,
			Description: "register workload operations are linearizable, key by key (porcupine)",
			Guarantees:  []string{GuaranteeStoreLin},
		},
		assumes: clientsAssumed,
		applies: func(v *view) bool { return slices.ContainsFunc(v.h.Ops, IsRegisterOp) },
		check:   checkRegisterOrVisualize,
	}, {
		Info: Info{
			Name:        RevisionChecker,
			Description: "from the resourceVersions operations returned: the store's revision never goes back, across crashes and power failures too (a write or list that began after an operation returned R is at R or above, a write above)",
			Guarantees:  []string{GuaranteeStoreLin},
		},
		assumes: opsAssumed,
		applies: onHistoryIf(revisionApplies),
		check: onHistory(func(ctx context.Context, h *history.History, opts Options) Result {
			return CheckRevisions(ctx, h.Ops, opts)
		}),
	}, {
		Info: Info{
			Name:        WatchOrderChecker,
			Description: "from the watch lines and the store's committed history: every watch stream delivers the watched objects' changes in resourceVersion order, with no gap or duplicate, and a resumed watch continues exactly where the watcher left off",
			Guarantees:  watchOrderGuarantees,
		},
		assumes: opsAssumed,
		applies: onHistoryIf(watchApplies),
		check:   checkWatchOrderView,
	}, {
		Info: Info{
			Name:        WatchValueChecker,
			Description: "from the watch lines and the store's committed history: every watch event is the change committed at its resourceVersion (type, key, value)",
			Guarantees:  watchValueGuarantees,
		},
		assumes: opsAssumed,
		applies: onHistoryIf(watchApplies),
		check:   checkWatchValuesView,
	}, {
		Info: Info{
			Name:        ReadAfterWatchChecker,
			Description: "from the watch lines, the reads and the store's committed history: a get or list that began after a watch delivered resourceVersion N reflects every write up to N",
			Guarantees:  readAfterWatchGuarantees,
		},
		assumes: clientsAssumed,
		applies: onHistoryIf(watchApplies),
		check:   checkReadAfterWatchView,
	}, {
		Info: Info{
			Name:        ListChecker,
			Description: "from the lists and the store's committed history: a list returns exactly the state at its resourceVersion",
			Guarantees:  listGuarantees,
		},
		assumes: clientsAssumed,
		applies: onHistoryIf(watchApplies),
		check:   checkListsView,
	}, {
		Info: Info{
			Name:        AtMostOneChecker,
			Description: "from the ledger: the UIDs of one pet never run at once, and a UID runs on one node (ReplicaSet overlap is reported as expected, PS-7)",
			Guarantees:  atMostOneGuarantees,
		},
		assumes: podsAssumed,
		reads:   []viewPart{partRuns, partCreators, partNodes},
		applies: ledgerHas(history.LedgerStart),
		check:   checkAtMostOneWithRecovery,
	}, {
		Info: Info{
			Name:        StorageChecker,
			Description: "from the storage's ledger entries: the writes of two pods to one RWO volume never interleave, and a node refused as fenced writes no more",
			Guarantees:  storageGuarantees,
		},
		applies: ledgerHas(history.LedgerWrite, history.LedgerWriteRefused, history.LedgerWriteStale),
		check:   onHistory(CheckStorage),
	}, {
		Info: Info{
			Name:        GraceChecker,
			Description: "from the ledger and the recorded deletions: TERM and KILL respect the grace period's safety bound (GP-R), also after a kubelet restart",
			Guarantees:  graceGuarantees,
		},
		assumes: clockAssumed,
		reads:   []viewPart{partPods, partNodes},
		applies: ledgerHas(history.LedgerTerm, history.LedgerKill),
		check:   checkGrace,
	}, {
		Info: Info{
			Name:        AuthorityChecker,
			Description: "from the API history, the ledger and the store's record of pods: only admin, the pod's kubelet, pod GC for deleted nodes and the fencing controller for fenced ones force delete running pods, a kubelet deletes or evicts only pods bound to its own node (the node restriction), and on the embedded target the store removes a bound, unterminated pod only after a deletion asking for grace 0",
			Guarantees:  authorityGuarantees,
		},
		assumes: podsAssumed,
		reads:   []viewPart{partPods, partRuns},
		applies: authorityApplies,
		check:   checkAuthority,
	}, {
		Info: Info{
			Name:        PhasesChecker,
			Description: "from the store's record of every pod change and the ledger: phases never go back and terminal phases never change, a pod is bound once, deletions are never undone or lengthened, conditions agree with phase and containers, init containers run in order before app containers",
			Guarantees:  phasesGuarantees,
		},
		assumes: []assumption{assumeRecorderClock},
		reads:   []viewPart{partPods, partRuns, partNodes},
		applies: func(v *view) bool { return poHasPods(v.h.Store) },
		check:   checkPhases,
	}, {
		Info: Info{
			Name:        BackoffChecker,
			Description: "from the ledger: restarts stay on their node, obey restartPolicy and wait the back-off (10 s doubling to 300 s, reset after 10 min), and a restart the policy asks for comes",
			Guarantees:  backoffGuarantees,
		},
		assumes: []assumption{assumeRecorderClock, assumeNodeClock},
		reads:   []viewPart{partRuns, partPods, partNodes},
		applies: backoffApplies,
		check:   checkBackoff,
	}, {
		Info: Info{
			Name:        ProbeChecker,
			Description: "from the ledger's probe answers and kills and the store's record of pods: probes run as the spec has them, after their initial delay and the startup probe's success; a startup or liveness probe failing failureThreshold times in a row kills the container, and nothing else kills for a probe; a container is ready only after its readiness probe succeeded",
			Guarantees:  probeGuarantees,
		},
		assumes: []assumption{assumeRecorderClock, assumeNodeClock},
		reads:   []viewPart{partRuns, partPods, partNodes},
		applies: ledgerHas(history.LedgerProbe),
		check:   checkProbes,
	}, {
		Info: Info{
			Name:        PreemptionChecker,
			Description: "from the API history and the rebuilt store state: each preemption has a pending, higher-priority preemptor (not policy Never) nominated to the victims' node, which fits there once lower-priority pods are gone and surely fit nowhere else; where the state it decided on is certain, the node is the one kube-scheduler's rules pick (fewest budget violations, then the lowest highest-priority victim)",
			Guarantees:  preemptionGuarantees,
		},
		assumes: []assumption{assumeCallsWellFormed},
		applies: onHistoryIf(preemptApplies),
		check:   checkPreemptionView,
	}, {
		Info: Info{
			Name:        SpreadChecker,
			Description: "from the rebuilt store state: every binding keeps its DoNotSchedule topology spread constraints (skew, topology keys, namespace, inclusion policies, minDomains) in every state the scheduler could have seen",
			Guarantees:  spreadGuarantees,
		},
		assumes: []assumption{assumeCallsWellFormed},
		reads:   []viewPart{partSchedAll},
		applies: func(v *view) bool { return v.podText(func(pi *podIndex) bool { return pi.spread }, spreadApplies) },
		check:   checkSpreadView,
	}, {
		Info: Info{
			Name:        NodeHealthChecker,
			Description: "from the store's record of nodes, their Leases and pods: the node controller declares a node's health unknown only after it showed no sign of life (Lease renewal, status heart-beat) for its grace period, and the taint eviction controller evicts a pod only for a NoExecute taint its node has, not before the pod's tolerationSeconds ran out",
			Guarantees:  nodeHealthGuarantees,
		},
		assumes: []assumption{assumeCallsWellFormed},
		reads:   []viewPart{partNodes},
		applies: func(v *view) bool {
			return nodeLeasesRecorded(v.h) || v.podText(func(pi *podIndex) bool { return pi.taintMarked }, nodeHealthApplies)
		},
		check: checkNodeHealth,
	}, {
		Info: Info{
			Name:        ConvergenceChecker,
			Description: "from the store's record of pods, nodes, StatefulSets, ReplicaSets and volume attachments at the history's end: once every fault healed the cluster converged within its stated bound (5 minutes of cluster time plus the longest grace period, and twice the faults' time plus 10 s of wall time, at most 75 s): no pod is left terminating or Pending on a Ready node, none on a fenced node and no attachment to one, every ReplicaSet has its replicas active and a status that says so, every pet is created, replaced and scaled down, and every pending pod was judged by the scheduler and placed once a Ready node has room for it",
			Guarantees:  convergenceGuarantees,
		},
		applies: onHistoryIf(convergenceApplies),
		check:   onHistory(CheckConvergence),
	}}
}

// Catalog lists the checkers Check may run, in the order it runs them.
func Catalog() []Info {
	defs := registry()
	infos := make([]Info, len(defs))
	for i, d := range defs {
		infos[i] = d.Info
	}
	return infos
}

// ledgerHas returns the applies function of a checker that judges ledger
// entries of the given actions.
func ledgerHas(actions ...history.LedgerAction) func(*view) bool {
	return func(v *view) bool {
		return slices.ContainsFunc(v.h.Ledger, func(e history.LedgerEntry) bool { return slices.Contains(actions, e.Action) })
	}
}

// authorityApplies: the API history records a deletion of pods.
func authorityApplies(v *view) bool {
	return slices.ContainsFunc(v.h.API, func(c history.APICall) bool { return isPodDeletion(&c) || isPodCollectionDeletion(&c) })
}

// podText answers a text test of the pod objects (flag) from the view's
// decoding, or, when that was cancelled, by scanning the history (scan).
func (v *view) podText(flag func(*podIndex) bool, scan func(*history.History) bool) bool {
	if pi, ok := v.pods(v.ctx); ok {
		return flag(pi)
	}
	return scan(v.h)
}

// checkRegisterOrVisualize is the register checker, writing porcupine's
// visualization from the same search when opts asks for it; a failure to
// write it is noted in the summary without changing the verdict.
func checkRegisterOrVisualize(ctx context.Context, v *view, opts Options) Result {
	h := v.h
	if opts.VisualizationPath == "" {
		res, _ := checkRegister(ctx, h.Ops, opts)
		return res
	}
	res, err := WriteVisualization(ctx, opts.VisualizationPath, h, opts)
	if err != nil {
		res.Summary += "; " + err.Error()
	}
	return res
}

// checkAtMostOneWithRecovery is the at-most-one checker with availability
// beside it: measured, not judged (per pet, time unavailable and time to
// recovery after each fault).
func checkAtMostOneWithRecovery(ctx context.Context, v *view, opts Options) Result {
	res := checkAtMostOne(ctx, v, opts)
	if rep, ok := recovery(ctx, v); ok {
		res.Figures = append(res.Figures, RecoveryFigures(rep)...)
	}
	return res
}

// Check runs every checker of the registry that applies to h (and that
// opts.Checkers names, when it names any) and returns their results in
// Catalog order: the register checker when h holds register operations, the
// four watch checkers (order, values, read-after-watch, lists) when h
// records watches, the at-most-one checker when the ledger records container starts, the storage
// checker when it records storage writes, the grace-period checker when it
// records TERM or KILL, the authority checker when the API history
// records deletions of pods, the phases checker when the store events
// record pods, the restart back-off checker when the ledger records a
// restart, the preemption checker when the scheduler deleted a pod, the
// topology-spread checker when a recorded pod has spread constraints, and
// the node-health checker when the node controller declared a node whose
// Lease the record follows unknown. When opts.Workload names the workload
// that ran, a checker every run of it feeds that found nothing to judge
// answers Unknown (see Expected), so a history stripped of its ledger or
// its completions is never called valid. Before a checker judges, the
// history is validated against what it assumes of the recording (see
// validate.go: well-formed operations and calls, one operation outstanding
// per client, clocks that run forward): a checker resting on an assumption
// the history breaks answers Unknown, naming it, with the places that break
// it as evidence. The checkers run concurrently and decode h once, into a
// view they share. It is bounded (see Options) and reads h without
// changing it; its only effect is the visualization file when
// opts.VisualizationPath is set, whose failure is noted in the register
// result's Summary without changing the verdict. Combine the verdicts with
// Merge.
func Check(ctx context.Context, h *history.History, opts Options) []Result {
	results, _ := check(ctx, h, opts)
	return results
}

// check is Check, returning also the view the checkers shared (which says
// how long building each of its parts took).
func check(ctx context.Context, h *history.History, opts Options) ([]Result, *view) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	v := newView(ctx, h)
	var defs []checkerDef
	for _, d := range registry() {
		if len(opts.Checkers) == 0 || slices.Contains(opts.Checkers, d.Name) {
			defs = append(defs, d)
		}
	}

	// The checkers only read h, through v: they run side by side, as many
	// at once as there are processors (a checker waiting for a part of the
	// view that another is building counts), and their results keep
	// Catalog order. Whether a checker applies may depend on a part of the
	// view, so each finds out on its own goroutine. A checker that panics
	// answers Unknown with the panic as its evidence (Jepsen's
	// check-safe): one broken checker never takes the others' verdicts
	// with it.
	results := make([]Result, len(defs))
	ran := make([]bool, len(defs))
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	var wg sync.WaitGroup
	for i, d := range defs {
		wg.Go(func() {
			res := checkSafe(d.Name, func() Result {
				if !d.applies(v) {
					return Result{}
				}
				v.warm(d.reads, d.assumes)
				if res, broken := v.unassumed(ctx, &d, opts); broken {
					return res
				}
				sem <- struct{}{}
				defer func() { <-sem }()
				return d.check(ctx, v, opts)
			})
			// A checker that does not apply leaves no result (a crash of
			// its applies function does, naming it).
			results[i], ran[i] = res, res.Checker != ""
		})
	}
	wg.Wait()
	var out []Result
	for i := range defs {
		if ran[i] {
			out = append(out, results[i])
		}
	}
	return holdToEvidence(opts, out), v
}

// checkSafe runs check; a panic becomes an Unknown result of the named
// checker, with the panic and its stack as evidence.
func checkSafe(name string, check func() Result) (res Result) {
	start := time.Now()
	defer func() {
		if p := recover(); p != nil {
			res = Result{
				Checker:    name,
				Verdict:    Unknown,
				Guarantees: catalogGuarantees(name),
				Summary:    fmt.Sprintf("the checker crashed (%v): no verdict; this is a bug in podsafe, not in the system under test", p),
				Evidence:   []Evidence{{Description: fmt.Sprintf("panic: %v\n\n%s", p, debug.Stack())}},
				Stats:      Stats{Duration: time.Since(start)},
			}
		}
	}()
	return check()
}
