package report

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/podsafe/podsafe/history"
)

func TestCountSnapshots(t *testing.T) {
	snap := func(msg, member string) history.LogEntry {
		return history.LogEntry{Msg: msg, Attrs: map[string]string{"member": member, "index": "40", "objects": "5"}}
	}
	h := &history.History{Logs: []history.LogEntry{
		{Msg: "cluster started"},
		{Msg: history.LogRaftParams, Attrs: map[string]string{"snapshotThreshold": "32", "trailingLogs": "8"}},
		snap(history.LogSnapshotTaken, "cp-0"),
		snap(history.LogSnapshotTaken, "cp-1"),
		snap(history.LogSnapshotTaken, "cp-0"),
		snap(history.LogSnapshotInstalled, "cp-2"),
		snap(history.LogSnapshotRestored, "cp-2"),
	}}
	got := CountSnapshots(h)
	want := &SnapshotCounts{
		Installed: 1, Taken: 3, Restored: 1,
		Members: []MemberSnapshots{
			{Member: "cp-0", Taken: 2},
			{Member: "cp-1", Taken: 1},
			{Member: "cp-2", Installed: 1, Restored: 1},
		},
		Params: map[string]string{"snapshotThreshold": "32", "trailingLogs": "8"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CountSnapshots (-want +got):\n%s", diff)
	}
	if s := got.String(); s != "snapshot installs: 1 (taken: 3, restored on restart: 1)" {
		t.Errorf("String() = %q", s)
	}
	if s := got.PerMember(); s != "cp-0 0 installed, 2 taken; cp-1 0 installed, 1 taken; cp-2 1 installed, 0 taken, 1 restored" {
		t.Errorf("PerMember() = %q", s)
	}
	if s := got.ParamsLine(); s != "snapshotThreshold=32 trailingLogs=8" {
		t.Errorf("ParamsLine() = %q", s)
	}

	// No parameters line: snapshots are not recorded (another target, an
	// older history), which is not zero.
	if c := CountSnapshots(&history.History{Logs: h.Logs[2:]}); c != nil {
		t.Errorf("CountSnapshots without a parameters line = %+v, want nil", c)
	}
	zero := CountSnapshots(&history.History{Logs: h.Logs[:2]})
	if zero == nil || zero.String() != "snapshot installs: 0 (taken: 0)" {
		t.Errorf("CountSnapshots of a run with none = %v", zero)
	}
}

func TestSnapshotsInReports(t *testing.T) {
	r := &Results{Scenario: "register", Seed: 3, Verdict: "Ok",
		Snapshots: &SnapshotCounts{Installed: 2, Taken: 17, Members: []MemberSnapshots{{Member: "cp-1", Installed: 2, Taken: 5}}}}
	page, err := RenderRun(nil, r, "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), "snapshot installs: 2 (taken: 17)") || !strings.Contains(string(page), "cp-1 2 installed, 5 taken") {
		t.Error("report.html does not show the snapshot counts")
	}
	s := RunJUnit(r)
	props := map[string]string{}
	for _, p := range s.Properties {
		props[p.Name] = p.Value
	}
	if props["snapshot_installs"] != "2" || props["snapshots_taken"] != "17" {
		t.Errorf("JUnit properties %v lack the snapshot counts", props)
	}
	rep := &ConformanceReport{Runs: []ConformanceRun{{Scenario: "register", Snapshots: r.Snapshots}}}
	conf, err := RenderConformance(rep, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(conf), "snapshot installs: 2 (taken: 17)") {
		t.Error("conformance.html does not show the run's snapshot counts")
	}
}
