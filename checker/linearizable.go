package checker

import (
	"context"
	"fmt"
	"math"
	"sort"
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

// CheckRegister checks that the register operations among ops (see
// IsRegisterOp) are linearizable, key by key. Other operations are ignored.
// It is pure, safe for concurrent use, and bounded: past opts.Timeout or the
// context's deadline, or when ctx is cancelled, it answers Unknown.
func CheckRegister(ctx context.Context, ops []history.Op, opts Options) Result {
	res, _ := checkRegister(ctx, ops, opts)
	return res
}

// registerRun is what a register check leaves for the visualization.
type registerRun struct {
	info porcupine.LinearizationInfo
}

func checkRegister(ctx context.Context, ops []history.Op, opts Options) (Result, *registerRun) {
	start := time.Now()
	res := Result{Checker: RegisterChecker, Guarantees: []string{GuaranteeStoreLin}}
	checked, pops := registerOperations(ops, &res.Stats)
	finish := func(v Verdict, summary string) Result {
		res.Verdict, res.Summary = v, summary
		res.Stats.Duration = time.Since(start)
		return res
	}

	timeout := opts.timeout()
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	if err := ctx.Err(); err != nil || timeout <= 0 {
		return finish(Unknown, fmt.Sprintf("not checked: %v", context.Cause(ctx))), &registerRun{}
	}

	// Cancellation reaches porcupine through Step: once ctx is done every
	// step is refused, the search unwinds at once, and the answer (no longer
	// meaningful) is replaced by Unknown below.
	var stopped atomic.Bool
	defer context.AfterFunc(ctx, func() { stopped.Store(true) })()
	model := RegisterModel
	model.Step = func(state, input, output any) (bool, any) {
		if stopped.Load() {
			return false, state
		}
		return RegisterModel.Step(state, input, output)
	}

	checkStart := time.Now()
	verdict, info := porcupine.CheckOperationsVerbose(model, pops, timeout)
	timedOut := time.Since(checkStart) >= timeout
	run := &registerRun{info: info}

	switch {
	case stopped.Load():
		return finish(Unknown, fmt.Sprintf("check of %s cancelled: %v", count(len(pops), "operation"), context.Cause(ctx))), run
	case verdict == porcupine.Ok:
		return finish(Ok, fmt.Sprintf("%s over %s are linearizable (%d more carried no information)",
			count(res.Stats.Checked, "operation"), count(res.Stats.Keys, "key"), res.Stats.Ops-res.Stats.Checked)), run
	case verdict == porcupine.Unknown:
		return finish(Unknown, fmt.Sprintf("no verdict within %v for %s over %s; raise the timeout or use fewer clients per key",
			timeout, count(res.Stats.Checked, "operation"), count(res.Stats.Keys, "key"))), run
	}

	evidence, failing, exact := registerEvidence(ctx, checked, pops, info, timedOut, opts)
	res.Evidence = evidence
	if len(evidence) == 0 {
		return finish(Illegal, fmt.Sprintf("%s over %s are not linearizable", count(res.Stats.Checked, "operation"), count(res.Stats.Keys, "key"))), run
	}
	first := evidence[0]
	var summary strings.Builder
	fmt.Fprintf(&summary, "key %q is not linearizable: %d of its %d operations fit a legal order", first.Key, len(first.Linearized), len(first.Ops))
	switch {
	case !exact:
		fmt.Fprintf(&summary, "; at least %d keys fail (the check ran out of time)", failing)
	case failing > 1:
		fmt.Fprintf(&summary, "; %d keys fail in all", failing)
	}
	return finish(Illegal, summary.String()), run
}

// registerOperations turns the register operations of ops into porcupine
// operations, dropping those that carry no information, and fills the
// operation counts of stats. checked[i] is the history operation behind
// pops[i].
func registerOperations(ops []history.Op, stats *Stats) (checked []history.Op, pops []porcupine.Operation) {
	keys := map[string]struct{}{}
	for _, op := range ops {
		if !IsRegisterOp(op) {
			continue
		}
		stats.Ops++
		in, out := registerIO(op)
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
		pops = append(pops, porcupine.Operation{
			ClientId: max(op.Process, 0),
			Input:    in,
			Call:     op.Invoke,
			Output:   out,
			Return:   ret,
			Metadata: opMeta{index: len(checked), id: op.ID, err: op.Error},
		})
		checked = append(checked, op)
		keys[op.Key] = struct{}{}
	}
	stats.Checked = len(pops)
	stats.Keys = len(keys)
	return checked, pops
}

// registerEvidence explains an Illegal verdict: the keys with no full
// linearization, smallest first, each confirmed on its own when the main
// check may have been cut short by the timeout. It returns the evidence, the
// number of failing keys, and whether that number is exact rather than a
// lower bound.
func registerEvidence(ctx context.Context, checked []history.Op, pops []porcupine.Operation, info porcupine.LinearizationInfo, timedOut bool, opts Options) ([]Evidence, int, bool) {
	// The model partitions deterministically, so partition i here is
	// partition i of info.
	parts := partitionByKey(pops)
	partials := info.PartialLinearizations()
	type candidate struct {
		part    []porcupine.Operation
		longest []int
	}
	var cands []candidate
	for i, part := range parts {
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
			v, pinfo := porcupine.CheckOperationsVerbose(RegisterModel, c.part, left)
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
		evidence = append(evidence, keyEvidence(checked, c.part, c.longest))
	}
	if timedOut {
		return evidence, len(evidence), false
	}
	return evidence, failing, true
}

// keyEvidence describes one key that has no linearization: its operations,
// the longest legal prefix porcupine found, the state after it, and the
// operations that could come next by their timing but are illegal there.
func keyEvidence(checked []history.Op, part []porcupine.Operation, longest []int) Evidence {
	ev := Evidence{Key: part[0].Input.(RegisterInput).Key}
	for _, p := range part {
		ev.Ops = append(ev.Ops, checked[p.Metadata.(opMeta).index])
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
		_, state = Step(state, p.Input.(RegisterInput), p.Output.(RegisterOutput))
		done[j] = true
		ev.Linearized = append(ev.Linearized, p.Metadata.(opMeta).id)
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
		if ok, _ := Step(state, p.Input.(RegisterInput), p.Output.(RegisterOutput)); ok {
			continue
		}
		m := p.Metadata.(opMeta)
		ev.Blocked = append(ev.Blocked, m.id)
		if len(blocked) < maxBlockedShown {
			blocked = append(blocked, fmt.Sprintf("op %d %s [%s, %s]", m.id,
				describeOp(p.Input.(RegisterInput), p.Output.(RegisterOutput)), nanos(p.Call), nanos(p.Return)))
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
