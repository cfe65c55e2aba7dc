package report

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/podsafe/podsafe/checker"
	"github.com/podsafe/podsafe/history"
)

// TestReproRows: a store's reproduction runs become rows (the issue from
// the scenario's name, the releases and pod list mode from the history's
// log lines, the first Illegal checker's evidence and when its violation
// came, the node's first sync after power-on), other runs are left out,
// and the table names every release and mode.
func TestReproRows(t *testing.T) {
	store := t.TempDir()
	start := time.Date(2026, 11, 27, 7, 0, 0, 0, time.UTC)
	write := func(name, scenario, version, mode string, illegal bool) {
		dir := filepath.Join(store, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		rec, err := history.Create(filepath.Join(dir, "history.jsonl"), history.Meta{Scenario: scenario, Start: start})
		if err != nil {
			t.Fatal(err)
		}
		rec.Log("kube target started", map[string]string{"kubernetes": version, "etcd": "v3.7.3"})
		rec.Log("kubelets", map[string]string{"pod_list": mode})
		// As the power-on step records it.
		on := history.NemesisEvent{ID: 1, Name: "power-on", Phase: history.PhaseStart, Components: []string{"node-1"},
			Params: map[string]string{history.ParamNode: "node-1"}}
		rec.Nemesis(on)
		on.Phase = history.PhaseEnd
		rec.Nemesis(on)
		now := int64(rec.Now())
		rec.API(history.APICall{Identity: "kubelet:node-1", Verb: "list", Resource: "pods", ResourceVersion: "323", Invoke: now + 1, Return: now + 2, Outcome: history.StatusOK})
		if err := rec.Close(); err != nil {
			t.Fatal(err)
		}
		res := Results{Scenario: scenario, Target: "kube", Dir: dir, Verdict: checker.Ok, Started: start,
			Checks: []checker.Result{{Checker: "at-most-one", Verdict: checker.Ok, Summary: "no pet ran two UIDs at once"}}}
		if illegal {
			res.Verdict = checker.Illegal
			res.Checks[0] = checker.Result{Checker: "at-most-one", Verdict: checker.Illegal, Guarantees: []string{"PS-11"}, Summary: "1 pet ran two UIDs at once",
				Evidence: []checker.Evidence{{Ledger: []history.LedgerEntry{{Wall: start.Add(16 * time.Second)}, {Wall: start.Add(17 * time.Second)}}}}}
		}
		if err := WriteResults(dir, res); err != nil {
			t.Fatal(err)
		}
	}
	write("a", "kubernetes-59848", "v1.34.4", "list", true)
	write("b", "kubernetes-59848", "v1.37.2", "watch-list", false)
	write("c", "pets-partition", "v1.37.2", "watch-list", true)
	rows, err := ReproRows(store)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("%d rows, want the 2 reproduction runs: %+v", len(rows), rows)
	}
	got := rows[0]
	if got.Issue != "kubernetes/kubernetes#59848" || got.Kubernetes != "v1.34.4" || got.PodList != "list" || !got.Reproduced ||
		got.Checker != "at-most-one" || got.Detected != 17*time.Second || !strings.Contains(got.Sync, "LIST resourceVersion=0") || !strings.Contains(got.Sync, "323") {
		t.Errorf("row %+v", got)
	}
	if rows[1].Reproduced || rows[1].Kubernetes != "v1.37.2" {
		t.Errorf("row %+v: want v1.37.2 not reproduced", rows[1])
	}
	md := ReproMarkdown(rows)
	for _, want := range []string{"**reproduced**: at-most-one Illegal (PS-11)", "not reproduced (Ok)", "v1.34.4 (v3.7.3)", "| 17s |"} {
		if !strings.Contains(md, want) {
			t.Errorf("table lacks %q:\n%s", want, md)
		}
	}
	for name, want := range map[string][2]string{
		"kubernetes-59848x": {}, "kubernetes-": {}, "kubernetes-59848-": {}, "pets-1": {},
		"etcd-15271":                 {"etcd-io/etcd#15271", ""},
		"kubernetes-138698-gate-off": {"kubernetes/kubernetes#138698", "gate-off"},
	} {
		if issue, variant := issueOf(name); issue != want[0] || variant != want[1] {
			t.Errorf("issueOf(%q) = %q, %q; want %q, %q", name, issue, variant, want[0], want[1])
		}
	}
}

// TestReproCatalog: the repository's catalog loads and every entry is
// whole; a malformed one is refused naming what is wrong; the summary
// joins the facts with the runs.
func TestReproCatalog(t *testing.T) {
	cat, err := LoadReproCatalog("../repro/catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(cat) < 6 {
		t.Errorf("%d entries: the flagship and at least five more", len(cat))
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "kubernetes-1.yaml"), []byte("name: kubernetes-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	entry := "- issue: kubernetes/kubernetes#1\n  title: t\n  component: c\n  guarantees: [PS-1]\n  affected: a\n  fixed: f\n"
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown field", entry + "  scenarios: [{name: kubernetes-1, versions: [v1.37.2]}]\n  owner: x\n", `unknown field "owner"`},
		{"no reason", entry, "needs scenarios or notReproducible"},
		{"both", entry + "  scenarios: [{name: kubernetes-1, versions: [v1.37.2]}]\n  notReproducible: x\n", "has scenarios and notReproducible"},
		{"scenario of another issue", entry + "  scenarios: [{name: kubernetes-2, versions: [v1.37.2]}]\n", `scenario "kubernetes-2" is not named after the issue`},
		{"missing scenario file", entry + "  scenarios: [{name: kubernetes-1-x, versions: [v1.37.2]}]\n", "kubernetes-1-x.yaml"},
		{"no versions", entry + "  scenarios: [{name: kubernetes-1}]\n", "runs on no release"},
		{"bad issue", strings.Replace(entry, "kubernetes/kubernetes#1", "k8s#1", 1) + "  notReproducible: x\n", "issue must be"},
		{"no facts", "- issue: etcd-io/etcd#1\n  notReproducible: x\n", "needs title"},
	} {
		p := filepath.Join(dir, "catalog.yaml")
		if err := os.WriteFile(p, []byte(tc.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := LoadReproCatalog(p)
		if !errors.Is(err, ErrInvalidCatalog) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInvalidCatalog saying %q", tc.name, err, tc.want)
		}
	}
	rows := []ReproRow{
		{Issue: "kubernetes/kubernetes#138698", Scenario: "kubernetes-138698", Kubernetes: "v1.34.4", PodList: "list", Verdict: checker.Illegal,
			Reproduced: true, Checker: "node-health", Detected: 26700 * time.Millisecond},
		{Issue: "kubernetes/kubernetes#138698", Scenario: "kubernetes-138698", Kubernetes: "v1.37.2", PodList: "watch-list", Verdict: checker.Ok},
		{Issue: "kubernetes/kubernetes#138698", Scenario: "kubernetes-138698", Kubernetes: "v1.36.10", PodList: "watch-list", Verdict: checker.Unknown},
	}
	md := ReproSummaryMarkdown(cat, rows)
	for _, want := range []string{
		"`kubernetes-138698`: v1.33.13: not run; v1.34.4: **reproduced** (node-health Illegal, after 26.7s); v1.35.4: not run; v1.36.3: not run; v1.36.10: not reproduced (Unknown); v1.37.2: valid",
		"`kubernetes-138698-gate-off`: v1.37.2: not run",
		"not reproducible here: no affected release is served",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("summary lacks %q:\n%s", want, md)
		}
	}
}
