package scheduling

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Status codes as both implementations name them.
const (
	CodeSuccess       = "Success"
	CodeUnschedulable = "Unschedulable"
	CodeUnresolvable  = "UnschedulableAndUnresolvable"
	CodeSkip          = "Skip"
)

// FilterVerdict is what the filters made of every node of a problem.
type FilterVerdict struct {
	// SpreadPreFilter is PodTopologySpread's PreFilter code (Skip when the
	// pod has no DoNotSchedule constraint).
	SpreadPreFilter string
	// Spread and Fit hold each node's Filter code of PodTopologySpread
	// and NodeResourcesFit.
	Spread, Fit map[string]string
	// Feasible lists, sorted, the nodes that passed every filter of the
	// profile (TaintToleration, NodeAffinity, NodeResourcesFit,
	// PodTopologySpread).
	Feasible []string
	// Chain holds each rejected node's code from the whole profile: the
	// first filter that rejected it decides, as in a scheduling cycle.
	Chain map[string]string
}

// ScoreVerdict is PodTopologySpread's normalized score of every feasible
// node, or Skipped when PreScore skipped the pod.
type ScoreVerdict struct {
	Skipped bool
	Scores  map[string]int64
}

// PreemptionVerdict is what DefaultPreemption decided for a pod no node
// could take.
type PreemptionVerdict struct {
	// Node is the nominated node, "" when preemption found nothing.
	Node string
	// Victims are the pods to delete on Node, as sorted namespace/name.
	Victims []string
	// Ties are, upstream, every candidate node as good as the best by
	// every criterion of pickOneNodeForPreemption: any of them is a
	// correct choice. Empty for podsafe.
	Ties []string
	// Candidates holds, upstream, the victims each candidate node would
	// take (sorted namespace/name).
	Candidates map[string][]string
}

// Verdict gathers the verdicts of one implementation on one problem.
type Verdict struct {
	Filter FilterVerdict
	Score  ScoreVerdict
	// Preemption is nil when some node was feasible (no PostFilter runs).
	Preemption *PreemptionVerdict
}

// Part names a compared part of a verdict, each run as its own subtest.
type Part string

// The compared parts.
const (
	PartFilter     Part = "filter"
	PartScore      Part = "score"
	PartPreemption Part = "preemption"
)

// Diff lists the differences of podsafe's verdict (got) from upstream's
// (want) in part, one line each, or nothing when they agree.
func Diff(part Part, want, got *Verdict) []string {
	switch part {
	case PartFilter:
		return diffFilter(&want.Filter, &got.Filter)
	case PartScore:
		return diffScore(&want.Score, &got.Score)
	case PartPreemption:
		return diffPreemption(want.Preemption, got.Preemption)
	}
	return []string{fmt.Sprintf("unknown part %q", part)}
}

func diffFilter(want, got *FilterVerdict) []string {
	var out []string
	if want.SpreadPreFilter != got.SpreadPreFilter {
		out = append(out, fmt.Sprintf("PodTopologySpread PreFilter: upstream %s, podsafe %s", want.SpreadPreFilter, got.SpreadPreFilter))
	}
	out = append(out, diffCodes("PodTopologySpread Filter", want.Spread, got.Spread)...)
	out = append(out, diffCodes("NodeResourcesFit Filter", want.Fit, got.Fit)...)
	// The whole profile, first rejection deciding, is what preemption sees;
	// a difference here with none above lies in another filter.
	out = append(out, diffCodes("profile filters", want.Chain, got.Chain)...)
	return out
}

func diffCodes(what string, want, got map[string]string) []string {
	var out []string
	for _, node := range sortedKeys(want, got) {
		if w, g := orSuccess(want[node]), orSuccess(got[node]); w != g {
			out = append(out, fmt.Sprintf("%s on %s: upstream %s, podsafe %s", what, node, w, g))
		}
	}
	return out
}

func orSuccess(code string) string {
	if code == "" {
		return CodeSuccess
	}
	return code
}

func diffScore(want, got *ScoreVerdict) []string {
	if want.Skipped != got.Skipped {
		return []string{fmt.Sprintf("PodTopologySpread PreScore skipped: upstream %v, podsafe %v", want.Skipped, got.Skipped)}
	}
	var out []string
	for _, node := range sortedKeys(want.Scores, got.Scores) {
		w, wok := want.Scores[node]
		g, gok := got.Scores[node]
		if w != g || wok != gok {
			out = append(out, fmt.Sprintf("PodTopologySpread score of %s: upstream %s, podsafe %s", node, scoreString(w, wok), scoreString(g, gok)))
		}
	}
	return out
}

func scoreString(s int64, ok bool) string {
	if !ok {
		return "none"
	}
	return fmt.Sprint(s)
}

func diffPreemption(want, got *PreemptionVerdict) []string {
	switch {
	case (want == nil) != (got == nil):
		// The filters disagree on whether any node is feasible: the filter
		// part reports where; preemption is only compared where they agree.
		return nil
	case want == nil:
		return nil
	}
	if want.Node == "" || got.Node == "" {
		if want.Node != got.Node {
			return []string{fmt.Sprintf("DefaultPreemption nominated: upstream %q victims %v, podsafe %q victims %v",
				want.Node, want.Victims, got.Node, got.Victims)}
		}
		return nil
	}
	if !slices.Contains(want.Ties, got.Node) {
		return []string{fmt.Sprintf("DefaultPreemption nominated: upstream one of %v (candidates %v), podsafe %s victims %v",
			want.Ties, formatCandidates(want.Candidates), got.Node, got.Victims)}
	}
	if w := want.Candidates[got.Node]; !slices.Equal(w, got.Victims) {
		return []string{fmt.Sprintf("DefaultPreemption victims on %s: upstream %v, podsafe %v", got.Node, w, got.Victims)}
	}
	return nil
}

func formatCandidates(c map[string][]string) string {
	var parts []string
	for _, node := range sortedKeys(c) {
		parts = append(parts, node+":"+strings.Join(c[node], "+"))
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// sortedKeys returns the union of the maps' keys, sorted.
func sortedKeys[V any](maps ...map[string]V) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range maps {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}
