package kubectlconf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// policySteps are the node, scheduling and policy objects a cluster
// operator touches first: cordon and taint a node, PriorityClasses,
// PodDisruptionBudgets (their columns and their validation) and the node
// Leases, each with kube-apiserver's table columns.
func policySteps(t *testing.T, e *env) {
	// cordon shows on the node's STATUS, uncordon takes it back.
	e.must("cordon", "node-0")
	contains(t, "get node after cordon", e.must("get", "node", "node-0"), "SchedulingDisabled")
	e.must("uncordon", "node-0")
	if out := e.must("get", "node", "node-0"); strings.Contains(out, "SchedulingDisabled") {
		t.Errorf("uncordon left the node unschedulable:\n%s", out)
	}

	// A taint is added and removed by its key and effect.
	e.must("taint", "nodes", "node-0", "podsafe.io/kubectl=yes:NoSchedule")
	contains(t, "taints after kubectl taint", e.must("get", "node", "node-0", "-o", "jsonpath={.spec.taints}"), "podsafe.io/kubectl", "NoSchedule")
	e.must("taint", "nodes", "node-0", "podsafe.io/kubectl=yes:NoSchedule-")
	if out := e.must("get", "node", "node-0", "-o", "jsonpath={.spec.taints}"); strings.Contains(out, "podsafe.io/kubectl") {
		t.Errorf("the taint stayed after its removal: %s", out)
	}

	// PriorityClasses: the columns, the value and the policy printed.
	e.must("create", "priorityclass", "kubectl-high", "--value=1000", "--preemption-policy=Never", "--description=kubectl conformance")
	pcs := e.must("get", "priorityclass", "kubectl-high")
	if h := header(pcs); h != "NAME VALUE GLOBAL-DEFAULT AGE PREEMPTIONPOLICY" {
		t.Errorf("get priorityclass header %q:\n%s", h, pcs)
	}
	contains(t, "get priorityclass", pcs, "kubectl-high", "1000", "false", "Never")
	e.refused("maximum allowed value of a user defined priority is 1000000000", "create", "priorityclass", "kubectl-too-high", "--value=2000000000")
	e.refused("may not be changed in an update", "patch", "priorityclass", "kubectl-high", "-p", `{"value":5}`)
	e.must("delete", "priorityclass", "kubectl-high")

	// PodDisruptionBudgets: the columns, and minAvailable and
	// maxUnavailable exclusive.
	e.must("create", "poddisruptionbudget", "web-pdb", "--selector=run=web", "--min-available=1")
	pdbs := e.must("get", "pdb", "web-pdb")
	if h := header(pdbs); h != "NAME MIN AVAILABLE MAX UNAVAILABLE ALLOWED DISRUPTIONS AGE" {
		t.Errorf("get pdb header %q:\n%s", h, pdbs)
	}
	contains(t, "get pdb", pdbs, "web-pdb", "1", "N/A")
	both := filepath.Join(t.TempDir(), "pdb.yaml")
	if err := os.WriteFile(both, []byte(`apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: both}
spec:
  minAvailable: 1
  maxUnavailable: 1
  selector: {matchLabels: {run: web}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	e.refused("minAvailable and maxUnavailable cannot be both set", "apply", "-f", both)
	e.must("delete", "pdb", "web-pdb")

	// Every node's Lease, held by its node.
	leases := e.must("get", "leases", "-n", "kube-node-lease")
	if h := header(leases); h != "NAME HOLDER AGE" {
		t.Errorf("get leases header %q:\n%s", h, leases)
	}
	contains(t, "get leases", leases, "node-0")
}
