package checker

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/podsafe/podsafe/history"
)

// RevisionChecker names the check that the store's revision never goes
// backwards: what one client saw acknowledged is there for every client that
// comes after, across crashes and power failures of the whole control plane.
const RevisionChecker = "store-revision"

// CheckRevisions judges the register workload's operations by their
// resourceVersions alone, without a search. The store's resourceVersion is
// its revision (the raft index, etcd's revision): every acknowledged write
// and every read tells that the store had reached the revision it returned.
// So a write that began after an operation returned revision R must be
// committed at a revision above R, and a list that began after it must list
// at R or above. A store that loses acknowledged entries in a crash (a power
// failure of every member that had not synced them) reuses their revisions
// and fails this check even where no later read of the lost key shows the
// loss, and where the linearizability search runs out of memory.
//
// Only operations that completed OK with a resourceVersion count; a history
// without one that a later write or list can be held to is Unknown. Pure.
func CheckRevisions(ctx context.Context, ops []history.Op, opts Options) Result {
	res, ctx, cancel := startCheck(ctx, opts, RevisionChecker, []string{GuaranteeStoreLin})
	defer cancel()

	// The observations, by return time, and the judged operations (writes
	// and lists), by invoke time.
	type seen struct {
		op int
		rv uint64
	}
	var obs, judged []seen
	for i := range ops {
		op := &ops[i]
		if op.Status != history.StatusOK || op.RV == "" || !(IsRegisterOp(*op) || op.Func == "list") {
			continue
		}
		rv, err := strconv.ParseUint(op.RV, 10, 64)
		if err != nil {
			continue
		}
		obs = append(obs, seen{i, rv})
		if op.Func == FuncCreate || op.Func == FuncCAS || op.Func == "list" {
			judged = append(judged, seen{i, rv})
		}
	}
	slices.SortStableFunc(obs, func(a, b seen) int { return cmpInt64(ops[a.op].Return, ops[b.op].Return) })
	slices.SortStableFunc(judged, func(a, b seen) int { return cmpInt64(ops[a.op].Invoke, ops[b.op].Invoke) })

	var (
		floor      seen // the highest revision returned so far
		haveFloor  bool
		next       int
		compared   int
		violations int
	)
	for k, j := range judged {
		if k%4096 == 0 && ctx.Err() != nil {
			return res.cancelled("the revisions")
		}
		op := &ops[j.op]
		for next < len(obs) && ops[obs[next].op].Return < op.Invoke {
			if !haveFloor || obs[next].rv > floor.rv {
				floor, haveFloor = obs[next], true
			}
			next++
		}
		if !haveFloor {
			continue
		}
		compared++
		list := op.Func == "list"
		if j.rv > floor.rv || (list && j.rv == floor.rv) {
			continue
		}
		violations++
		if len(res.Evidence) >= opts.maxEvidence() {
			continue
		}
		before := &ops[floor.op]
		what, want := "was committed at", "above"
		if list {
			what, want = "listed at", "at or above"
		}
		res.Evidence = append(res.Evidence, Evidence{
			Key: op.Key,
			Description: fmt.Sprintf("%s %s (op %d) %s resourceVersion %d, but began after %s %s (op %d) had returned resourceVersion %d: "+
				"the store's revision went back (want %s %d), so something acknowledged or read before was lost",
				op.Func, op.Key, op.ID, what, j.rv, before.Func, before.Key, before.ID, floor.rv, want, floor.rv),
			At:  op.Invoke,
			Ops: []history.Op{*before, *op},
		})
	}
	res.Stats.Ops = len(obs)
	res.Stats.Checked = compared
	switch {
	case violations > 0:
		return res.finish(Illegal, fmt.Sprintf("the store's revision went back %s (of %d writes and lists held to the revisions returned before they began)",
			count(violations, "time"), compared))
	case compared == 0:
		return res.finish(Unknown, "no write or list began after an operation had returned a resourceVersion: nothing to judge")
	}
	return res.finish(Ok, fmt.Sprintf("%d writes and lists were each at or above every resourceVersion returned before they began (%d operations returned one)",
		compared, len(obs)))
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// revisionApplies: the register workload's operations returned
// resourceVersions.
func revisionApplies(h *history.History) bool {
	return slices.ContainsFunc(h.Ops, func(op history.Op) bool {
		return op.Status == history.StatusOK && op.RV != "" && (IsRegisterOp(op) || op.Func == "list")
	})
}
