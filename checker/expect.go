package checker

import (
	"fmt"
	"slices"
	"strings"
)

// expectation is a checker that every run of a workload gives something to
// judge, and what that is: a run of the workload whose history lacks it
// cannot be called valid by that checker.
type expectation struct {
	checker string
	// input names what the checker judges, for the summary of a result
	// that found none of it.
	input string
	// asked marks a checker the scenario names (Options.Checkers) rather
	// than one the workload always feeds.
	asked bool
	// judgedOps counts what the checker was given (Stats.Ops) as judged,
	// rather than only what it checked (Stats.Checked): the at-most-one
	// checker judges every container run of a ReplicaSet's pods for its
	// node (one node per UID) and reports their overlaps (PS-7), though
	// only pets' runs count as checked.
	judgedOps bool
}

// workloadExpects lists, per workload, the checkers any run of it feeds:
// the register workload's operations, the pod workloads' container runs
// and pod changes, the spread workload's constrained pods. A checker that
// depends on what the run happened to do (a deletion, a preemption, a
// restart) is not listed: a run without one has nothing for it and that is
// no gap.
var workloadExpects = map[string][]expectation{
	"register": {
		{checker: RegisterChecker, input: "register operation with a known outcome (an invoke line and its completion)"},
	},
	"pets": {
		{checker: AtMostOneChecker, input: "container run of a pet (ledger start lines of pods the pet controller owns)"},
		{checker: PhasesChecker, input: "pod change in the store's record"},
	},
	"replicas": {
		{checker: AtMostOneChecker, input: "container run (ledger start lines)", judgedOps: true},
		{checker: PhasesChecker, input: "pod change in the store's record"},
	},
	"deployments": {
		{checker: AtMostOneChecker, input: "container run (ledger start lines)", judgedOps: true},
		{checker: PhasesChecker, input: "pod change in the store's record"},
	},
	"lifecycle": {
		{checker: PhasesChecker, input: "pod change in the store's record"},
	},
	"priority": {
		{checker: PhasesChecker, input: "pod change in the store's record"},
	},
	"spread": {
		{checker: SpreadChecker, input: "binding of a pod with DoNotSchedule topology spread constraints"},
		{checker: PhasesChecker, input: "pod change in the store's record"},
	},
}

// expectsOf is workloadExpects of workload; workloads run together
// ("pets+spread") feed what each of them feeds.
func expectsOf(workload string) []expectation {
	var out []expectation
	for _, part := range strings.Split(workload, "+") {
		for _, e := range workloadExpects[part] {
			if !slices.ContainsFunc(out, func(o expectation) bool { return o.checker == e.checker }) {
				out = append(out, e)
			}
		}
	}
	return out
}

// Expected returns the names of the checkers a run of workload always feeds
// (none for a workload podsafe does not know, or "").
func Expected(workload string) []string {
	var names []string
	for _, e := range expectsOf(workload) {
		names = append(names, e.checker)
	}
	return names
}

// holdToEvidence applies "a verdict needs evidence" to the results of a run
// of opts.Workload: each checker the workload always feeds, and each the
// scenario names (opts.Checkers), that did not run (its input is missing
// from the history) answers Unknown, naming what is missing; one the
// workload feeds that ran, judged nothing and said Ok answers Unknown too.
// Results keep Catalog order.
func holdToEvidence(opts Options, results []Result) []Result {
	workload := opts.Workload
	var exp []expectation
	for _, e := range expectsOf(workload) {
		if len(opts.Checkers) == 0 || slices.Contains(opts.Checkers, e.checker) {
			exp = append(exp, e)
		}
	}
	for _, name := range opts.Checkers {
		if !slices.ContainsFunc(exp, func(e expectation) bool { return e.checker == name }) {
			exp = append(exp, expectation{checker: name, input: "input of the " + name + " checker", asked: true})
		}
	}
	if len(exp) == 0 {
		return results
	}
	for _, e := range exp {
		i := slices.IndexFunc(results, func(r Result) bool { return r.Checker == e.checker })
		why := fmt.Sprintf("the %s workload ran", workload)
		if e.asked {
			why = "the scenario asks for this checker"
		}
		if i < 0 {
			summary := fmt.Sprintf("nothing to judge: %s, but the history holds no %s, so the checker did not run; the history is missing what every run of it records", why, e.input)
			if e.asked {
				summary = fmt.Sprintf("nothing to judge: %s, but the history holds no %s (see podsafe list for what it reads)", why, e.input)
			}
			results = append(results, Result{
				Checker:    e.checker,
				Verdict:    Unknown,
				Guarantees: catalogGuarantees(e.checker),
				Summary:    summary,
			})
			continue
		}
		judged := results[i].Stats.Checked
		if e.judgedOps {
			judged = results[i].Stats.Ops
		}
		if r := &results[i]; r.Verdict == Ok && judged == 0 && !e.asked {
			r.Verdict = Unknown
			r.Summary = fmt.Sprintf("nothing judged: %s, but no %s was there to judge (%s)", why, e.input, r.Summary)
		}
	}
	order := map[string]int{}
	for i, info := range Catalog() {
		order[info.Name] = i
	}
	slices.SortStableFunc(results, func(a, b Result) int { return order[a.Checker] - order[b.Checker] })
	return results
}

// catalogGuarantees returns the guarantees the named checker judges.
func catalogGuarantees(name string) []string {
	for _, info := range Catalog() {
		if info.Name == name {
			return info.Guarantees
		}
	}
	return nil
}
