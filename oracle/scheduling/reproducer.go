package scheduling

import (
	"fmt"
	"strings"
)

// Reproducer prints a failing problem as a Go table-test entry for
// podsafe's plugin tests: the name, the nodes, the bound pods, the
// budgets, the incoming pod and upstream's verdict on the part that
// differs (podsafe's differences as a comment above it). The objects use
// the import names corev1, metav1, policyv1, resource and ptr
// (k8s.io/utils/ptr); verdict codes are framework.Code constants of
// github.com/podsafe/podsafe/scheduler/framework.
func Reproducer(name string, part Part, p *Problem, want *Verdict, diffs []string) string {
	var b strings.Builder
	b.WriteString("// upstream k8s.io/kubernetes v1.37.2 vs podsafe:\n")
	for _, d := range diffs {
		b.WriteString("//   " + d + "\n")
	}
	b.WriteString("{\n")
	fmt.Fprintf(&b, "\tname: %q,\n", name)
	fmt.Fprintf(&b, "\tnodes: %s,\n", GoLiteralIndent(p.Nodes, 1))
	if len(p.Pods) > 0 {
		fmt.Fprintf(&b, "\tpods: %s,\n", GoLiteralIndent(p.Pods, 1))
	}
	if len(p.PDBs) > 0 {
		fmt.Fprintf(&b, "\tpdbs: %s,\n", GoLiteralIndent(p.PDBs, 1))
	}
	if len(p.Services) > 0 {
		fmt.Fprintf(&b, "\tservices: %s,\n", GoLiteralIndent(p.Services, 1))
	}
	if len(p.ReplicaSets) > 0 {
		fmt.Fprintf(&b, "\treplicaSets: %s,\n", GoLiteralIndent(p.ReplicaSets, 1))
	}
	if len(p.StatefulSets) > 0 {
		fmt.Fprintf(&b, "\tstatefulSets: %s,\n", GoLiteralIndent(p.StatefulSets, 1))
	}
	if len(p.ReplicationControllers) > 0 {
		fmt.Fprintf(&b, "\treplicationControllers: %s,\n", GoLiteralIndent(p.ReplicationControllers, 1))
	}
	fmt.Fprintf(&b, "\tpod: %s,\n", GoLiteralIndent(p.Pod, 1))
	switch part {
	case PartFilter:
		if want.Filter.SpreadPreFilter == CodeSkip {
			b.WriteString("\twantSpreadSkip: true,\n")
		}
		fmt.Fprintf(&b, "\twantSpread: %s,\n", codesLiteral(want.Filter.Spread))
		fmt.Fprintf(&b, "\twantFit: %s,\n", codesLiteral(want.Filter.Fit))
	case PartScore:
		if want.Score.Skipped {
			b.WriteString("\twantScoreSkip: true,\n")
		} else {
			fmt.Fprintf(&b, "\twantScores: %s,\n", GoLiteral(want.Score.Scores))
		}
	case PartPreemption:
		if pv := want.Preemption; pv != nil {
			fmt.Fprintf(&b, "\twantNominated: %s, // any of them\n", GoLiteral(pv.Ties))
			fmt.Fprintf(&b, "\twantVictims: %s,\n", GoLiteralIndent(pv.Candidates, 1))
		} else {
			b.WriteString("\twantFeasible: " + GoLiteralIndent(want.Filter.Feasible, 1) + ",\n")
		}
	}
	b.WriteString("},\n")
	return b.String()
}

// codesLiteral prints per-node codes as a map of framework.Code.
func codesLiteral(codes map[string]string) string {
	var parts []string
	for _, node := range sortedKeys(codes) {
		parts = append(parts, fmt.Sprintf("%q: framework.%s", node, orSuccess(codes[node])))
	}
	return "map[string]framework.Code{" + strings.Join(parts, ", ") + "}"
}
