package checker

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/podsafe/podsafe/history"
)

// GuaranteeStoreLin is the guarantee the register checker judges: every
// read and write of the store takes effect atomically at one instant between
// its invoke and its completion.
const GuaranteeStoreLin = "STORE-LIN"

// RegisterChecker names the register checker in results.
const RegisterChecker = "store-linearizability"

// maxBlockedShown bounds the blocked operations spelled out in an evidence
// description; all of them are listed by ID.
const maxBlockedShown = 5

// DefaultMaxSearchMemory bounds the memory of the register checker's
// search: 1 GiB, estimated as legal steps × searchStateBytes summed over the
// keys (see searchBudget for how the keys share it). The estimate counts
// every legal step, also those that reach a state already cached, so it
// overstates what the search really holds (for a hot key, by up to the
// number of its concurrent operations): the budget is an upper bound on the
// search's cache. An ordinary key of n operations makes one to two legal
// steps per operation, so a history of N operations over many keys draws
// about N × 200 to 400 bytes (1,000,000 operations: 200 to 400 MiB), while
// one key of 100,000 operations draws 1.2 to 2.4 GiB (its cache really holds
// one bitset of 100,000 bits per state) and answers Unknown.
const DefaultMaxSearchMemory int64 = 1 << 30

// searchStateOverhead is what porcupine holds per state it caches besides the
// bitset of linearized operations: the cache map's slot and bucket slice
// (about 64 bytes), the cacheEntry (40), the bitset's slice header (24), the
// boxed RegisterState (24) and the search stack's entry (24), rounded up.
const searchStateOverhead = 192

// searchStateBytes estimates the memory porcupine's search of a key with n
// operations holds for each state it caches: a bitset of n bits and the
// fixed overhead. The search caches at most one state per legal step, so
// legal steps × searchStateBytes bounds its cache. The partial
// linearizations it keeps for evidence are not counted (at most one
// sequence per operation, and a search that keeps many is also one that
// steps a lot).
func searchStateBytes(n int) int64 {
	return 8*int64((n+63)/64) + searchStateOverhead
}

// maxSearchMemory is the register search's memory budget in bytes.
func (o Options) maxSearchMemory() int64 {
	if o.MaxSearchMemory > 0 {
		return o.MaxSearchMemory
	}
	return DefaultMaxSearchMemory
}

// CheckRegister checks that the register operations among ops (see
// IsRegisterOp) are linearizable, key by key. Other operations are ignored.
// It is pure, safe for concurrent use, and bounded in time and memory: past
// opts.Timeout or the context's deadline, or when ctx is cancelled, it
// answers Unknown; and the keys whose search would hold more than the
// memory budget (DefaultMaxSearchMemory, estimated by counting legal steps)
// answer Unknown, named in the Summary, while the other keys are still
// checked: the verdict is Illegal if any key is, else Unknown if any key ran
// out of budget.
func CheckRegister(ctx context.Context, ops []history.Op, opts Options) Result {
	return checkOne(ctx, &history.History{Ops: ops}, opts, RegisterChecker)
}

// registerRun is what a register check leaves for the visualization.
type registerRun struct {
	info porcupine.LinearizationInfo
}

// allowanceSteps is how many legal steps per operation a key's search may
// make on its own allowance. An ordinary search makes about one per
// operation and backtracks little; only a search that explodes needs more.
const allowanceSteps = 8

// searchBudget shares a memory budget among the keys of one porcupine
// search, which runs them in parallel. Each key has an allowance: up to
// allowanceSteps legal steps per operation, paid from the budget up front,
// so that no key is stopped for another's explosion. A key past its
// allowance draws each legal step's searchStateBytes from what the budget
// leaves after all allowances; one that finds that pool empty is stopped:
// every later step of it is refused, so its search unwinds at once, and its
// answer (no longer meaningful) becomes Unknown. When the allowances alone
// exceed the budget, they shrink in proportion and there is no pool.
type searchBudget struct {
	limit int64
	pool  atomic.Int64
	keys  map[string]*keyBudget
}

type keyBudget struct {
	cost      int64 // searchStateBytes of the key
	allowance int64 // legal steps the key may make before drawing on the pool
	// steps counts the key's legal steps. Porcupine searches a key in one
	// goroutine, and reading it after the search returns is ordered after.
	steps int64
	over  atomic.Bool
	// The budgets of keys searched side by side are written at every step:
	// each has cache lines of its own.
	_ [96]byte
}

// budgetedState is a key's RegisterState in the budgeted search, with the
// key's budget: found once, at the key's first step, and carried from state
// to state rather than looked up at every step.
type budgetedState struct {
	RegisterState
	kb *keyBudget
}

func newSearchBudget(limit int64, pops []porcupine.Operation) *searchBudget {
	n := map[string]int{}
	for _, p := range pops {
		n[registerKey(p.Input)]++
	}
	b := &searchBudget{limit: limit, keys: make(map[string]*keyBudget, len(n))}
	var reserved float64
	for k, c := range n {
		kb := &keyBudget{cost: searchStateBytes(c), allowance: allowanceSteps * int64(c)}
		b.keys[k] = kb
		reserved += float64(kb.allowance) * float64(kb.cost)
	}
	if reserved > float64(limit) {
		shrink := float64(limit) / reserved
		for _, kb := range b.keys {
			kb.allowance = int64(float64(kb.allowance) * shrink)
		}
		return b
	}
	b.pool.Store(limit - int64(reserved))
	return b
}

// model wraps RegisterModel so that its steps draw on the budget and are all
// refused once stopped reports true.
func (b *searchBudget) model(stopped *atomic.Bool) porcupine.Model {
	model := registerPtrModel
	model.Init = func() any { return budgetedState{} }
	model.Step = func(state, input, output any) (bool, any) {
		if stopped != nil && stopped.Load() {
			return false, state
		}
		in := input.(*RegisterInput)
		s := state.(budgetedState)
		kb := s.kb
		if kb == nil {
			kb = b.keys[in.Key]
		}
		if kb.over.Load() {
			return false, state
		}
		ok, next := Step(s.RegisterState, *in, *output.(*RegisterOutput))
		if !ok {
			return false, state
		}
		kb.steps++
		if kb.steps > kb.allowance && b.pool.Add(-kb.cost) < 0 {
			kb.over.Store(true)
			return false, state
		}
		return true, budgetedState{next, kb}
	}
	model.Equal = func(x, y any) bool { return x.(budgetedState).RegisterState == y.(budgetedState).RegisterState }
	model.Hash = func(state any) uint64 { return registerHash(state.(budgetedState).RegisterState) }
	model.DescribeState = func(state any) string { return describeState(state.(budgetedState).RegisterState) }
	return model
}

// overBudget returns the keys stopped for want of memory, sorted.
func (b *searchBudget) overBudget() []string {
	var keys []string
	for k, kb := range b.keys {
		if kb.over.Load() {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// describeOverBudget names the keys stopped for want of memory and the
// budget, for a Summary.
func describeOverBudget(keys []string, limit int64) string {
	shown := keys
	if len(shown) > maxBlockedShown {
		shown = shown[:maxBlockedShown]
	}
	quoted := make([]string, len(shown))
	for i, k := range shown {
		quoted[i] = strconv.Quote(k)
	}
	var b strings.Builder
	if len(keys) == 1 {
		fmt.Fprintf(&b, "key %s", quoted[0])
	} else {
		fmt.Fprintf(&b, "keys %s", strings.Join(quoted, ", "))
		if n := len(keys) - len(shown); n > 0 {
			fmt.Fprintf(&b, " and %d more", n)
		}
	}
	fmt.Fprintf(&b, " not decided: the search would hold more than the memory budget of %s (raise it, or use fewer concurrent clients per key)", mib(limit))
	return b.String()
}

// mib renders a byte count in MiB, or in bytes below one MiB.
func mib(n int64) string {
	if n < 1<<20 {
		return count(int(n), "byte")
	}
	return strconv.FormatFloat(float64(n)/(1<<20), 'f', -1, 64) + " MiB"
}

// linearizedKeys counts the keys of pops that porcupine linearized in full.
func linearizedKeys(pops []porcupine.Operation, info porcupine.LinearizationInfo) int {
	partials := info.PartialLinearizations()
	n := 0
	for i, part := range partitionByKey(pops) {
		if i >= len(partials) {
			break
		}
		for _, p := range partials[i] {
			if len(p) == len(part) {
				n++
				break
			}
		}
	}
	return n
}

func checkRegister(ctx context.Context, ops []history.Op, opts Options) (Result, *registerRun) {
	return searchRegister(ctx, ops, opts, opts.maxSearchMemory(), false)
}

// checkRegisterWithin is checkRegister with a memory budget in bytes.
func checkRegisterWithin(ctx context.Context, ops []history.Op, opts Options, memory int64) (Result, *registerRun) {
	return searchRegister(ctx, ops, opts, memory, false)
}

// searchRegister is checkRegister with a memory budget in bytes. The keys
// a search without backtracking linearizes (greedyKeys) are decided there,
// unless every key's record from porcupine is wanted (for the
// visualization).
func searchRegister(ctx context.Context, ops []history.Op, opts Options, memory int64, wantRecord bool) (Result, *registerRun) {
	res := checkRun{Result: Result{Checker: RegisterChecker, Guarantees: []string{GuaranteeStoreLin}}, ctx: ctx, start: time.Now()}
	pops := registerOperations(ops, &res.Stats)
	if res.Stats.Ops > 0 && !slices.ContainsFunc(ops, func(op history.Op) bool { return IsRegisterOp(op) && op.Status == history.StatusOK }) {
		// Operations whose outcome is unknown may all be placed last: any
		// history of them is linearizable, and saying so is no evidence.
		return res.finish(Unknown, fmt.Sprintf("nothing to judge: none of the %s completed with a known outcome (a history without completions, or a store that answered nothing)",
			count(res.Stats.Ops, "register operation"))), &registerRun{}
	}

	timeout := opts.timeout()
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	if err := ctx.Err(); err != nil || timeout <= 0 {
		return res.finish(Unknown, fmt.Sprintf("not checked: %v", context.Cause(ctx))), &registerRun{}
	}

	// Cancellation reaches porcupine through Step: once ctx is done every
	// step is refused, the search unwinds at once, and the answer (no longer
	// meaningful) is replaced by Unknown below.
	var stopped atomic.Bool
	defer context.AfterFunc(ctx, func() { stopped.Store(true) })()
	budget := newSearchBudget(memory, pops)

	checkStart := time.Now()
	searched, easy := pops, 0
	if !wantRecord {
		searched, easy = greedyKeys(pops, budget, &stopped)
	}
	verdict, info := porcupine.Ok, porcupine.LinearizationInfo{}
	switch left := timeout - time.Since(checkStart); {
	case len(searched) == 0:
	case left <= 0:
		verdict = porcupine.Unknown
	default:
		verdict, info = porcupine.CheckOperationsVerbose(budget.model(&stopped), searched, left)
	}
	timedOut := time.Since(checkStart) >= timeout
	run := &registerRun{info: info}
	over := budget.overBudget()

	switch {
	case stopped.Load():
		return res.cancelled(count(len(pops), "operation")), run
	case verdict == porcupine.Ok:
		return res.finish(Ok, fmt.Sprintf("%s over %s are linearizable (%d more carried no information)",
			count(res.Stats.Checked, "operation"), count(res.Stats.Keys, "key"), res.Stats.Ops-res.Stats.Checked)), run
	case verdict == porcupine.Unknown:
		summary := fmt.Sprintf("no verdict within %v for %s over %s; raise the timeout or use fewer clients per key",
			timeout, count(res.Stats.Checked, "operation"), count(res.Stats.Keys, "key"))
		if len(over) > 0 {
			summary += "; " + describeOverBudget(over, memory)
		}
		return res.finish(Unknown, summary), run
	}

	evidence, failing, exact := registerEvidence(ctx, ops, searched, info, timedOut, &over, opts, memory)
	res.Evidence = evidence
	if len(evidence) == 0 {
		if len(over) > 0 {
			summary := fmt.Sprintf("%d of %s are linearizable and none is shown not to be; %s",
				easy+linearizedKeys(searched, info), count(res.Stats.Keys, "key"), describeOverBudget(over, memory))
			if timedOut {
				summary += fmt.Sprintf("; the check ran out of time (%v)", timeout)
			}
			return res.finish(Unknown, summary), run
		}
		return res.finish(Illegal, fmt.Sprintf("%s over %s are not linearizable", count(res.Stats.Checked, "operation"), count(res.Stats.Keys, "key"))), run
	}
	first := evidence[0]
	var summary strings.Builder
	fmt.Fprintf(&summary, "key %q is not linearizable: %d of its %d operations fit a legal order", first.Key, len(first.Linearized), len(first.Ops))
	switch {
	case !exact && timedOut:
		fmt.Fprintf(&summary, "; at least %s (the check ran out of time)", keysFail(failing))
	case !exact:
		fmt.Fprintf(&summary, "; at least %s, more may among those not decided", keysFail(failing))
	case failing > 1:
		fmt.Fprintf(&summary, "; %d keys fail in all", failing)
	}
	if len(over) > 0 {
		summary.WriteString("; " + describeOverBudget(over, memory))
	}
	return res.finish(Illegal, summary.String()), run
}

// registerOperations turns the register operations of ops into porcupine
// operations, dropping those that carry no information, and fills the
// operation counts of stats. The metadata of each names its index in ops.
func registerOperations(ops []history.Op, stats *Stats) []porcupine.Operation {
	n := 0
	for i := range ops {
		if IsRegisterOp(ops[i]) {
			n++
		}
	}
	pops := make([]porcupine.Operation, 0, n)
	// Inputs, outputs and metadata in arrays, one allocation each, which
	// the operations point into (see registerPtrModel).
	ins, outs, metas := make([]RegisterInput, 0, n), make([]RegisterOutput, 0, n), make([]opMeta, 0, n)
	keys := map[string]struct{}{}
	for i := range ops {
		op := &ops[i]
		if !IsRegisterOp(*op) {
			continue
		}
		stats.Ops++
		in, out := registerIO(*op)
		if !informative(in, out) {
			continue
		}
		ret := op.Return
		if out.Outcome == OutcomeUnknown {
			// It may take effect at any later time, whatever the client
			// saw; only an infinite return lets porcupine place it last.
			ret = math.MaxInt64
		}
		if ret < op.Invoke {
			ret = op.Invoke
		}
		k := len(pops)
		ins, outs, metas = append(ins, in), append(outs, out), append(metas, opMeta{index: i, id: op.ID, err: op.Error})
		pops = append(pops, porcupine.Operation{
			ClientId: max(op.Process, 0),
			Input:    &ins[k],
			Call:     op.Invoke,
			Output:   &outs[k],
			Return:   ret,
			Metadata: &metas[k],
		})
		keys[op.Key] = struct{}{}
	}
	stats.Checked = len(pops)
	stats.Keys = len(keys)
	return pops
}

// registerEvidence explains an Illegal verdict: the keys with no full
// linearization, smallest first, each confirmed on its own when the main
// check may have been cut short by the timeout. It returns the evidence, the
// number of failing keys, and whether that number is exact rather than a
// lower bound (keys cut short by the timeout or stopped for want of memory
// may fail too).
//
// Keys in over were stopped for want of memory and are never evidence. A
// key re-checked alone gets the whole memory budget again (the main search's
// memory is free by then); one that exceeds it is added to *over.
func registerEvidence(ctx context.Context, ops []history.Op, pops []porcupine.Operation, info porcupine.LinearizationInfo, timedOut bool, over *[]string, opts Options, memory int64) ([]Evidence, int, bool) {
	// The model partitions deterministically, so partition i here is
	// partition i of info.
	parts := partitionByKey(pops)
	partials := info.PartialLinearizations()
	type candidate struct {
		part    []porcupine.Operation
		longest []int
	}
	skip := map[string]bool{}
	for _, k := range *over {
		skip[k] = true
	}
	var cands []candidate
	for i, part := range parts {
		if skip[opInput(part[0]).Key] {
			continue
		}
		var longest []int
		if i < len(partials) {
			for _, p := range partials[i] {
				if len(p) > len(longest) {
					longest = p
				}
			}
		}
		if len(longest) < len(part) {
			cands = append(cands, candidate{part: part, longest: longest})
		}
	}
	sort.SliceStable(cands, func(i, j int) bool { return len(cands[i].part) < len(cands[j].part) })

	failing := len(cands)
	// Deciding keys alone gets a quarter of the timeout more, within the
	// context's deadline.
	budget := time.Now().Add(opts.timeout() / 4)
	if dl, ok := ctx.Deadline(); ok && dl.Before(budget) {
		budget = dl
	}
	var evidence []Evidence
	for _, c := range cands {
		if len(evidence) >= opts.maxEvidence() {
			break
		}
		if timedOut {
			// This key may only have run out of time: decide it alone.
			left := time.Until(budget)
			if left <= 0 || ctx.Err() != nil {
				break
			}
			alone := newSearchBudget(memory, c.part)
			v, pinfo := porcupine.CheckOperationsVerbose(alone.model(nil), c.part, left)
			if len(alone.overBudget()) > 0 {
				*over = append(*over, opInput(c.part[0]).Key)
				sort.Strings(*over)
				continue
			}
			if v != porcupine.Illegal {
				continue
			}
			c.longest = nil
			for _, p := range pinfo.PartialLinearizations()[0] {
				if len(p) > len(c.longest) {
					c.longest = p
				}
			}
		}
		evidence = append(evidence, keyEvidence(ops, c.part, c.longest))
	}
	switch {
	case timedOut:
		return evidence, len(evidence), false
	case len(*over) > 0:
		return evidence, failing, false
	}
	return evidence, failing, true
}

// keyEvidence describes one key that has no linearization: its operations,
// the longest legal prefix porcupine found, the state after it, and the
// operations that could come next by their timing but are illegal there.
func keyEvidence(ops []history.Op, part []porcupine.Operation, longest []int) Evidence {
	ev := Evidence{Key: opInput(part[0]).Key}
	for _, p := range part {
		ev.Ops = append(ev.Ops, ops[opMetadata(p).index])
	}
	sort.SliceStable(ev.Ops, func(i, j int) bool {
		if ev.Ops[i].Invoke != ev.Ops[j].Invoke {
			return ev.Ops[i].Invoke < ev.Ops[j].Invoke
		}
		return ev.Ops[i].ID < ev.Ops[j].ID
	})

	state := RegisterState{}
	done := make([]bool, len(part))
	for _, j := range longest {
		p := part[j]
		_, state = Step(state, opInput(p), opOutput(p))
		done[j] = true
		ev.Linearized = append(ev.Linearized, opMetadata(p).id)
	}
	ev.State = describeState(state)

	earliestReturn := int64(math.MaxInt64)
	for j, p := range part {
		if !done[j] {
			earliestReturn = min(earliestReturn, p.Return)
		}
	}
	var blocked []string
	for j, p := range part {
		if done[j] || p.Call > earliestReturn {
			continue
		}
		if ok, _ := Step(state, opInput(p), opOutput(p)); ok {
			continue
		}
		m := opMetadata(p)
		ev.Blocked = append(ev.Blocked, m.id)
		if len(blocked) < maxBlockedShown {
			blocked = append(blocked, fmt.Sprintf("op %d %s [%s, %s]", m.id,
				describeOp(opInput(p), opOutput(p)), nanos(p.Call), nanos(p.Return)))
		}
	}

	var d strings.Builder
	fmt.Fprintf(&d, "no order of the %d operations on key %q is legal; the longest legal prefix orders %d of them and leaves the key %s",
		len(part), ev.Key, len(longest), ev.State)
	if len(blocked) > 0 {
		fmt.Fprintf(&d, ", where none of the operations that may come next is legal: %s", strings.Join(blocked, "; "))
		if n := len(ev.Blocked) - len(blocked); n > 0 {
			fmt.Fprintf(&d, "; and %d more", n)
		}
	}
	ev.Description = d.String()
	return ev
}

// keysFail renders how many keys fail.
func keysFail(n int) string {
	if n == 1 {
		return "1 key fails"
	}
	return fmt.Sprintf("%d keys fail", n)
}

// count renders n with its noun, plural unless n is 1.
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// nanos renders a time since the history's base.
func nanos(t int64) string {
	if t == math.MaxInt64 {
		return "∞"
	}
	return time.Duration(t).String()
}
