// Package report turns checked histories into the files people read and CI
// gates on. It is pure: it reads results and histories, never a live cluster.
package report

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/podsafe/podsafe/checker"
	"github.com/podsafe/podsafe/internal/atomicfile"
)

// OpCounts counts client operations by outcome.
type OpCounts struct {
	OK      int64 `json:"ok"`
	Fail    int64 `json:"fail"`
	Unknown int64 `json:"unknown"`
}

// Results is the content of results.json: the verdict of one run and every
// checker's result with its evidence.
type Results struct {
	Scenario string `json:"scenario"`
	// Target is the system the run was made on: "embedded" (podsafe's own
	// control plane) or "kube" (a real one). Results written before runs
	// said so have none; see RunTarget.
	Target    string           `json:"target,omitempty"`
	Seed      uint64           `json:"seed"`
	Dir       string           `json:"dir"`
	Verdict   checker.Verdict  `json:"verdict"`
	Checks    []checker.Result `json:"checks"`
	Ops       OpCounts         `json:"ops"`
	Truncated bool             `json:"truncated,omitempty"`
	// Incomplete says the history has no closing record: the run was
	// killed (or its process died) before it finished. The checkers judged
	// what it recorded; such a run is never plain Ok (see Label).
	Incomplete bool `json:"incomplete,omitempty"`
	// Interrupted says the run was stopped early (Ctrl-C): the workload and
	// the faults ran for less than the time limit, and the checkers judged
	// what ran.
	Interrupted bool      `json:"interrupted,omitempty"`
	Started     time.Time `json:"started,omitzero"`
	Finished    time.Time `json:"finished,omitzero"`
	Rerun       string    `json:"rerun,omitempty"`
	Error       string    `json:"error,omitempty"`
	// Warnings are things that went wrong without breaking the run, such as a
	// fault that could not be injected.
	Warnings []string `json:"warnings,omitempty"`
	// Snapshots counts the raft snapshots the members took and installed
	// (CountSnapshots); nil when the history does not record them.
	Snapshots *SnapshotCounts `json:"snapshots,omitempty"`
	// Load is what the machine was doing during the run (nil in results
	// written before runs recorded it).
	Load *Load `json:"load,omitempty"`
}

// IncompleteLabel is how reports name a run whose history has no closing
// record.
const IncompleteLabel = "incomplete run"

// Label is the verdict as people read it: "Unknown (incomplete run)" for a
// run killed before it finished, "Ok (interrupted)" for one stopped early,
// else the verdict alone.
func (r *Results) Label() string {
	v := string(r.Verdict)
	if v == "" {
		v = string(checker.Unknown)
	}
	switch {
	case r.Incomplete:
		return v + " (" + IncompleteLabel + ")"
	case r.Interrupted:
		return v + " (interrupted)"
	}
	return v
}

// TargetEmbedded is the target of results that name none: every run was
// made on podsafe's own control plane before the kube target existed.
const TargetEmbedded = "embedded"

// RunTarget is the target r was made on, TargetEmbedded when it names none.
func (r *Results) RunTarget() string {
	if r.Target == "" {
		return TargetEmbedded
	}
	return r.Target
}

// WriteResults writes dir/results.json.
func WriteResults(dir string, r Results) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding results: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing results: %w", err)
	}
	return nil
}

// ReadResults reads dir/results.json.
func ReadResults(dir string) (*Results, error) {
	path := filepath.Join(dir, "results.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading results: %w", err)
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("results %s is corrupt: %w", path, err)
	}
	return &r, nil
}
