package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/podsafe/podsafe/checker"
	"github.com/podsafe/podsafe/history"
)

// evil is a string that must never reach the page unescaped.
const evil = `<script>alert("x")</script>&<b>`

var testStart = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// line encodes one history line of kind at t from v's fields.
func line(t *testing.T, kind history.Kind, at int64, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]any{}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["kind"], m["t"] = kind, at
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

const sec = int64(time.Second)

// ledger makes a ledger entry at t.
func ledger(node, pod, uid string, a history.LedgerAction, at int64) history.LedgerEntry {
	return history.LedgerEntry{Node: node, Namespace: "ns", Pod: pod, UID: uid, Container: "app", Action: a,
		Wall: testStart.Add(time.Duration(at)), Scaled: testStart.Add(50 * time.Duration(at)), T: at}
}

// testHistory writes a small hand-made history of 12 s to dir: register
// ops, API calls, a healed partition of node-1, an unhealed fault, and pod
// runs on two nodes with TERM, KILL, power-off and a refused write. It
// returns the ledger entries it wrote.
func testHistory(t *testing.T, dir string) []history.LedgerEntry {
	t.Helper()
	var lines []string
	lines = append(lines, line(t, history.KindMeta, 0, history.Meta{RunID: "r1", Seed: 7, Scenario: "pets-" + evil, Start: testStart}))
	id := uint64(0)
	for at := int64(100e6); at < 12*sec; at += 50e6 {
		id++
		op := history.Op{ID: id, Process: int(id % 4), Func: "cas", Key: "k", Value: "v", Invoke: at}
		lines = append(lines, line(t, history.KindInvoke, at, op))
		op.Return = at + 20e6
		op.Status = history.StatusOK
		if at > 3*sec && at < 6*sec && id%3 == 0 {
			op.Status = history.StatusFail
		}
		if id%17 != 0 {
			lines = append(lines, line(t, history.KindComplete, op.Return, op))
		}
		g := int64(30)
		call := history.APICall{Identity: "kubelet/node-0", Verb: "delete", Resource: "pods", Namespace: "ns", Name: "db-0",
			GracePeriodSeconds: &g, Code: 200, Invoke: at, Return: at + 5e6, Outcome: history.StatusOK}
		if id%5 == 0 {
			call.Code, call.Outcome = 503, history.StatusFail
		}
		lines = append(lines, line(t, history.KindAPI, at+5e6, call))
	}
	lines = append(lines,
		line(t, history.KindNemesis, 3*sec, history.NemesisEvent{ID: 1, Name: "partition-node", Description: "cut node-1", Phase: history.PhaseStart, Targets: []string{"node-1", "cp-0"}, Wall: testStart.Add(3 * time.Second)}),
		line(t, history.KindNemesis, 6*sec, history.NemesisEvent{ID: 1, Phase: history.PhaseEnd, Targets: []string{"node-1", "cp-0"}, Wall: testStart.Add(6 * time.Second)}),
		line(t, history.KindNemesis, 9*sec, history.NemesisEvent{ID: 2, Name: "kill-kubelet", Phase: history.PhaseStart, Targets: []string{"node-0"}, Wall: testStart.Add(9 * time.Second)}),
	)
	led := []history.LedgerEntry{
		ledger("node-1", "db-0", "uid-a", history.LedgerStart, 1*sec),
		ledger("node-1", "db-0", "uid-a", history.LedgerWrite, 2*sec),
		ledger("node-1", "db-0", "uid-a", history.LedgerTerm, 4*sec),
		ledger("node-1", "db-0", "uid-a", history.LedgerWriteRefused, 4*sec+5e8),
		ledger("node-1", "db-0", "uid-a", history.LedgerKill, 5*sec),
		ledger("node-1", "db-0", "uid-a", history.LedgerExit, 5*sec+1e8),
		ledger("node-0", "db-0", "uid-b", history.LedgerStart, 4*sec),
		ledger("node-0", "db-1", "uid-c", history.LedgerStart, 2*sec),
		ledger("node-0", "db-1", "uid-c", history.LedgerPowerOff, 10*sec),
		ledger("node-1", "db-2", "uid-d", history.LedgerStart, 7*sec),
	}
	led[8].Pod, led[8].UID, led[8].Container = "", "", ""
	for _, e := range led {
		lines = append(lines, line(t, history.KindLedger, e.T, e))
	}
	lines = append(lines, line(t, history.KindLog, 12*sec, history.LogEntry{Msg: "done"}))
	if err := os.WriteFile(filepath.Join(dir, HistoryFile), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return led
}

// testResults are the results of the hand-made history: an Illegal
// at-most-one (two UIDs of db-0 at once) whose evidence carries hostile
// text, an Ok grace check and an Unknown register check.
func testResults(dir string, led []history.LedgerEntry) Results {
	return Results{
		Scenario: "pets-partition", Seed: 7, Dir: dir, Verdict: checker.Illegal,
		Started: testStart, Finished: testStart.Add(13 * time.Second),
		Rerun: "podsafe test --workload pets --seed 7",
		Ops:   OpCounts{OK: 200, Fail: 20, Unknown: 13},
		Checks: []checker.Result{
			{Checker: "at-most-one", Verdict: checker.Illegal, Guarantees: []string{"PS-1", "PS-11", "LC-3"},
				Summary: "pet db-0 ran two UIDs at once " + evil,
				Evidence: []checker.Evidence{{Key: "ns/db-0 " + evil, Description: "uid-a on node-1 and uid-b on node-0 overlap for 1.1s",
					Ledger: []history.LedgerEntry{led[0], led[6], led[5]}}},
				Stats: checker.Stats{Ops: 4, Checked: 4, Keys: 3, Duration: time.Millisecond}},
			{Checker: "grace-period", Verdict: checker.Ok, Guarantees: []string{"PS-4", "LC-11", "GP-3"},
				Summary: "every kill honoured its grace period",
				Figures: []checker.Figure{{Name: "time to recovery", Key: "db-0", Value: 12.5, Unit: "s", Fault: "partition-node"}}},
			{Checker: "store-linearizability", Verdict: checker.Unknown, Guarantees: []string{"STORE-LIN", "PS-1"},
				Summary: "timed out"},
		},
	}
}

// writeTestRun writes a complete run directory: history, results and
// scenario.
func writeTestRun(t *testing.T, dir string) Results {
	t.Helper()
	led := testHistory(t, dir)
	r := testResults(dir, led)
	if err := WriteResults(dir, r); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, ScenarioFile), []byte(`{"name":"pets-partition","workload":"pets","nemesis":["partition-node"]}`), 0o644)
	return r
}
