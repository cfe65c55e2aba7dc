package checker

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/podsafe/podsafe/history"
)

// Assumptions checked before judging, as etcd's robustness validation
// checks its own: what the checkers take for granted about how a history
// was recorded. A checker judges a history only on the premise that it
// was recorded right; where the history shows that it was not, a verdict
// would rest on a broken premise, so each checker that rests on it answers
// Unknown, naming the assumption and showing where the history breaks it,
// never Ok and never Illegal.

// assumption names one premise of the checkers.
type assumption string

// The assumptions. Each checker of the registry lists those it rests on.
const (
	// assumeOpsWellFormed: the client operations of the register workload
	// are well formed: every completion matches its invocation (it returns
	// no earlier than it was invoked, an operation ID is used once, a
	// known outcome has a return time) and each client's invocations come
	// in the order it made them (their IDs).
	assumeOpsWellFormed assumption = "every completion matches its invocation and each client's times do not go back"
	// assumeOneOutstanding: each client of the register workload has one
	// operation outstanding at a time: a judged operation is invoked only
	// once the client's previous judged one returned. An operation of
	// unknown outcome does not count as outstanding: its client gave up on
	// it (and took a new identity, as Jepsen's clients do), and the checkers
	// let it take effect at any later time anyway; nor does one that
	// carries no information, which no checker judges.
	assumeOneOutstanding assumption = "each client has at most one operation outstanding"
	// assumeCallsWellFormed: every recorded API call returns no earlier
	// than it was invoked, and every fault ends no earlier than it began.
	assumeCallsWellFormed assumption = "every API call returns and every fault ends no earlier than it began"
	// assumeRecorderClock: the recorder's clock runs forward: the entries
	// the runtime records of one container come in recorder-time order
	// (within recorderClockSlack, the race of two writers for the
	// recorder). The checkers place a container's entries among the API
	// calls and the store's changes by it.
	assumeRecorderClock assumption = "the recorder's clock runs forward along each container's entries"
	// assumeNodeClock: each node's clock runs forward: the entries of one
	// container come in the order of its node's clock (within
	// GraceTolerance), except across a fault that moves that node's clock.
	// The checkers measure a container's durations on it.
	assumeNodeClock assumption = "each node's clock runs forward along each container's entries, between clock faults"
)

// recorderClockSlack is how far back the recorder time of a ledger entry or
// store line may be from an earlier one: a writer takes its time before it
// takes the recorder's lock, so two writers racing may be recorded in the
// other order, a scheduling delay apart.
const recorderClockSlack = time.Second

// assumptions is what validating one history found: per assumption it
// breaks, the evidence (the first few places) and how many there were.
type assumptions struct {
	broken map[assumption][]Evidence
	counts map[assumption]int
}

// assumptions validates the view's history once.
// The validation is in three parts, each built on first use, so that a
// checker waits only for the parts its assumptions need.
func (v *view) assumptions(ctx context.Context, what []assumption) (*assumptions, bool) {
	all := &assumptions{broken: map[assumption][]Evidence{}, counts: map[assumption]int{}}
	for i, p := range validations {
		if !slices.ContainsFunc(what, func(a assumption) bool { return slices.Contains(p.checks, a) }) {
			continue
		}
		a, ok := v.assumeParts[i].get(ctx, v, "validation of "+p.name, func(context.Context) (*assumptions, bool) {
			a := newAssumptions()
			p.validate(a, v.h)
			return a, true
		})
		if !ok {
			return nil, false
		}
		maps.Copy(all.broken, a.broken)
		maps.Copy(all.counts, a.counts)
	}
	return all, true
}

// validations are the parts of the validation: what each checks, and how.
var validations = [...]struct {
	name     string
	checks   []assumption
	validate func(*assumptions, *history.History)
}{
	{"operations", []assumption{assumeOpsWellFormed, assumeOneOutstanding}, (*assumptions).ops},
	{"calls", []assumption{assumeCallsWellFormed}, (*assumptions).calls},
	{"clocks", []assumption{assumeRecorderClock, assumeNodeClock}, (*assumptions).clocks},
}

func newAssumptions() *assumptions {
	return &assumptions{broken: map[assumption][]Evidence{}, counts: map[assumption]int{}}
}

// maxAssumptionEvidence bounds the evidence kept per broken assumption.
const maxAssumptionEvidence = DefaultMaxEvidence

func (a *assumptions) add(what assumption, ev Evidence) {
	a.counts[what]++
	if len(a.broken[what]) < maxAssumptionEvidence {
		a.broken[what] = append(a.broken[what], ev)
	}
}

// clientOp reports an operation of the register workload's clients, the
// operations whose timing the checkers judge.
func clientOp(op *history.Op) bool {
	switch op.Func {
	case FuncCreate, FuncGet, FuncCAS, FuncDelete, FuncList:
		return true
	}
	return false
}

// judgedOp reports an operation a checker judges: a register operation
// that can constrain or change the state, or a list that answered.
func judgedOp(op *history.Op) bool {
	if op.Func == FuncList {
		return op.Status == history.StatusOK
	}
	return informative(registerIO(*op))
}

// ops checks the operations of the register workload's clients.
func (a *assumptions) ops(h *history.History) {
	// The client operations in ID order: the recorder numbers operations
	// as they are invoked, so that is the order in which each client made
	// its own. A loaded history holds them in that order already.
	var order []int
	for i := range h.Ops {
		if clientOp(&h.Ops[i]) {
			order = append(order, i)
		}
	}
	byID := func(x, y int) int { return cmp.Compare(h.Ops[x].ID, h.Ops[y].ID) }
	if !slices.IsSortedFunc(order, byID) {
		slices.SortStableFunc(order, byID)
	}
	last := map[int]int{} // client → its previous operation
	for k, i := range order {
		op := &h.Ops[i]
		if k > 0 && h.Ops[order[k-1]].ID == op.ID {
			other := &h.Ops[order[k-1]]
			a.add(assumeOpsWellFormed, Evidence{Key: op.Key, Ops: []history.Op{*other, *op},
				Description: fmt.Sprintf("operation ID %d is recorded twice: %s and %s", op.ID, opRef(other), opRef(op))})
		}
		switch {
		case op.Status != history.StatusOK && op.Status != history.StatusFail && op.Status != history.StatusUnknown && op.Status != "":
			a.add(assumeOpsWellFormed, Evidence{Key: op.Key, Ops: []history.Op{*op},
				Description: fmt.Sprintf("%s completed with status %q, none of ok, fail, unknown", opRef(op), op.Status)})
		case (op.Status == history.StatusOK || op.Status == history.StatusFail) && (op.Return == math.MaxInt64 || op.Return < op.Invoke):
			a.add(assumeOpsWellFormed, Evidence{Key: op.Key, Ops: []history.Op{*op},
				Description: fmt.Sprintf("%s completed (%s) with a return time of %s, before its invocation at %s or never", opRef(op), op.Status, nanos(op.Return), nanos(op.Invoke))})
		}
		j, seen := last[op.Process]
		last[op.Process] = i
		if !seen {
			continue
		}
		prev := &h.Ops[j]
		switch {
		case op.Invoke < prev.Invoke:
			a.add(assumeOpsWellFormed, Evidence{Key: op.Key, Ops: []history.Op{*prev, *op},
				Description: fmt.Sprintf("client %d invoked %s at %s, before its earlier %s at %s: its times go back", op.Process, opRef(op), nanos(op.Invoke), opRef(prev), nanos(prev.Invoke))})
		case prev.Status != history.StatusUnknown && op.Invoke < prev.Return && judgedOp(op) && judgedOp(prev):
			a.add(assumeOneOutstanding, Evidence{Key: op.Key, Ops: []history.Op{*prev, *op},
				Description: fmt.Sprintf("client %d invoked %s at %s while its %s, invoked at %s, was still outstanding (returned %s)", op.Process, opRef(op), nanos(op.Invoke), opRef(prev), nanos(prev.Invoke), returned(prev))})
		}
	}
}

// calls checks the API calls and the faults.
func (a *assumptions) calls(h *history.History) {
	for i := range h.API {
		c := &h.API[i]
		if c.Return < c.Invoke {
			a.add(assumeCallsWellFormed, Evidence{Key: podRef(c.Namespace, c.Name), API: apiCalls(h.API, i),
				Description: fmt.Sprintf("the call %s returned before it was invoked", callRef(c))})
		}
	}
	for _, f := range h.Nemesis {
		if f.End < f.Start {
			a.add(assumeCallsWellFormed, Evidence{Key: f.Name, At: f.Start,
				Description: fmt.Sprintf("fault %s (%s) ended at %s, before it began at %s", f.Name, f.Description, nanos(f.End), nanos(f.Start))})
		}
	}
}

// clocks checks that the runtime entries of each container come in the
// order of the recorder's clock and of the node's, outside the faults that
// move the node's. The end of a preStop hook is left out: its own goroutine
// records it, possibly after the TERM that followed (see
// PreStopRecordingSlack).
func (a *assumptions) clocks(h *history.History) {
	type ctr struct{ uid, container string }
	last := map[ctr]int{}
	for i := range h.Ledger {
		e := &h.Ledger[i]
		if !isRuntimeAction(e.Action) || e.Action == history.LedgerPreStopEnd {
			continue
		}
		k := ctr{uidKey(e), e.Container}
		j, ok := last[k]
		last[k] = i
		if !ok {
			continue
		}
		p := h.Ledger[j]
		if e.T < p.T-int64(recorderClockSlack) {
			a.add(assumeRecorderClock, Evidence{Key: entryPod(e), Ledger: ledgerEntries(h.Ledger, j, i),
				Description: fmt.Sprintf("the recorder's clock goes back: container %q of pod %s (UID %s) has %s at %s recorded after its %s at %s, %s later (slack %s)",
					e.Container, entryPod(e), e.UID, e.Action, at(h.Ledger, i), p.Action, at(h.Ledger, j), time.Duration(p.T-e.T), recorderClockSlack)})
			continue
		}
		if p.Node != e.Node || !e.Scaled.Before(p.Scaled.Add(-GraceTolerance)) || clockFaulted(h, e.Node, p.T, e.T) {
			continue // another node's clock (a run after a power loss), or a fault moved it
		}
		a.add(assumeNodeClock, Evidence{Key: entryPod(e), Ledger: ledgerEntries(h.Ledger, j, i),
			Description: fmt.Sprintf("node %s's clock goes back: container %q of pod %s (UID %s) has %s at %s, %s before its %s at %s, recorded earlier, and no fault moved the clock (tolerance %s)",
				e.Node, e.Container, entryPod(e), e.UID, e.Action, at(h.Ledger, i), seconds(p.Scaled.Sub(e.Scaled)), p.Action, at(h.Ledger, j), GraceTolerance)})
	}
}

// clockFaulted reports whether a fault that moves the clock of node (a
// clock fault aimed at it or at every node) was under way, or near, at some
// time in [from, to].
func clockFaulted(h *history.History, node string, from, to int64) bool {
	margin := int64(backoffFaultMargin)
	for i := range h.Nemesis {
		f := &h.Nemesis[i]
		if f.FaultEffect() != history.EffectClock || f.Start-margin > to || (f.Healed && f.End+margin < from) {
			continue
		}
		if f.Everywhere() || slices.Contains(f.FaultNodes(), node) {
			return true
		}
	}
	return false
}

// opRef renders an operation for a description.
func opRef(op *history.Op) string {
	return fmt.Sprintf("op %d (%s %q)", op.ID, op.Func, op.Key)
}

// returned renders when an operation returned.
func returned(op *history.Op) string {
	if op.Return == math.MaxInt64 || op.Status == history.StatusUnknown {
		return "never: its outcome is unknown"
	}
	return "at " + nanos(op.Return)
}

// unassumed returns the result of a checker whose assumptions h breaks:
// Unknown, naming the first broken one, with its evidence. ok is false when
// none of them is broken.
func (a *assumptions) unassumed(def *checkerDef, opts Options) (Result, bool) {
	var names []string
	var ev []Evidence
	total := 0
	for _, what := range def.assumes {
		n := a.counts[what]
		if n == 0 {
			continue
		}
		total += n
		names = append(names, string(what))
		for _, e := range a.broken[what] {
			if len(ev) < opts.maxEvidence() {
				e.Description = "assumption broken (" + string(what) + "): " + e.Description
				ev = append(ev, e)
			}
		}
	}
	if len(names) == 0 {
		return Result{}, false
	}
	return Result{
		Checker:    def.Name,
		Verdict:    Unknown,
		Guarantees: def.Guarantees,
		Summary: fmt.Sprintf("not judged: the history breaks the assumption that %s (%s); first: %s",
			strings.Join(names, ", and that "), count(total, "place"), ev[0].Description),
		Evidence: ev,
	}, true
}

// unassumed is the result of the checker def when h breaks an assumption
// it rests on (see assumptions.unassumed); one that waited for the
// validation past ctx answers Unknown too.
func (v *view) unassumed(ctx context.Context, def *checkerDef, opts Options) (Result, bool) {
	if len(def.assumes) == 0 {
		return Result{}, false
	}
	a, ok := v.assumptions(ctx, def.assumes)
	if !ok {
		return Result{Checker: def.Name, Verdict: Unknown, Guarantees: def.Guarantees,
			Summary: fmt.Sprintf("check cancelled while validating the history: %v", context.Cause(ctx))}, true
	}
	return a.unassumed(def, opts)
}
