package report

import (
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
		rec.Nemesis(history.NemesisEvent{ID: 1, Name: "power-on", Phase: history.PhaseStart, Components: []string{"node-1"}})
		rec.Nemesis(history.NemesisEvent{ID: 1, Name: "power-on", Phase: history.PhaseEnd, Components: []string{"node-1"}})
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
	if issueOf("kubernetes-59848x") != "" || issueOf("etcd-15271") != "etcd-io/etcd#15271" {
		t.Error("issueOf maps only names ending in an issue number")
	}
}
