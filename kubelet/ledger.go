package kubelet

import (
	"sync"
	"time"
)

// LedgerAction is one thing a container runtime did to a container.
type LedgerAction string

// The actions the runtime records. Their spelling matches history's ledger
// actions, so a history recorder converts entries field by field.
const (
	ActionStart        LedgerAction = "start"
	ActionTerm         LedgerAction = "term"
	ActionKill         LedgerAction = "kill"
	ActionExit         LedgerAction = "exit"
	ActionPreStopStart LedgerAction = "prestop-start"
	ActionPreStopEnd   LedgerAction = "prestop-end"
	// ActionWrite and ActionWriteRefused are written by the storage server:
	// a container's write to a volume it accepted or refused (PS-15).
	ActionWrite        LedgerAction = "write"
	ActionWriteRefused LedgerAction = "write-refused"
	// ActionWriteStale: a storage comparing fencing tokens refused the
	// write because its token was below one it had accepted for the volume.
	ActionWriteStale LedgerAction = "write-stale"
	// ActionPowerOff: the node lost power with the container running; the
	// container stopped at once, with no signal (a power fence, PS-14).
	ActionPowerOff LedgerAction = "power-off"
	// ActionProbe: the kubelet ran one probe of a running container and
	// the runtime answered Result (LC-9).
	ActionProbe LedgerAction = "probe"
)

// LedgerEntry is one thing the runtime really did: the ground truth that
// at-most-one and grace-period checkers judge from.
type LedgerEntry struct {
	Node      string       `json:"node"`
	Namespace string       `json:"namespace"`
	Pod       string       `json:"pod"`
	UID       string       `json:"uid,omitempty"`
	Container string       `json:"container,omitempty"`
	Action    LedgerAction `json:"action"`
	ExitCode  int          `json:"exit_code,omitempty"`
	// Scaled is the time on the runtime's (the cluster's scaled) clock.
	Scaled time.Time `json:"scaled"`
	Wall   time.Time `json:"wall"`
	// Grace is, for term and kill, the effective grace period in seconds the
	// kubelet was applying when it sent the signal.
	Grace int64 `json:"grace,omitempty"`
	// Volume and Token are set on storage writes: the volume written and
	// the writer's attachment token (see ContainerConfig.Volumes).
	Volume string `json:"volume,omitempty"`
	Token  int64  `json:"token,omitempty"`
	// Probe and Result are set on probe entries: which probe ran and what
	// the container answered (LC-9).
	Probe  ProbeKind   `json:"probe,omitempty"`
	Result ProbeResult `json:"result,omitempty"`
	// Reason is set on the prestop-start, term and kill of a container the
	// kubelet kills for a failed probe (StartupProbe, LivenessProbe); it is
	// empty when the pod's termination, an eviction or a preemption kills.
	Reason KillReason `json:"reason,omitempty"`
}

// Ledger receives every ledger entry. It is written directly, never through
// the network, so no network fault can cut it. Record must be safe for
// concurrent use and must not block for long.
type Ledger interface {
	Record(LedgerEntry)
}

// LedgerFunc adapts a function to a Ledger.
type LedgerFunc func(LedgerEntry)

// Record calls f(e).
func (f LedgerFunc) Record(e LedgerEntry) { f(e) }

// MemoryLedger is a Ledger that keeps every entry in memory, for tests and
// small runs. Safe for concurrent use.
type MemoryLedger struct {
	mu      sync.Mutex
	entries []LedgerEntry
}

// Record appends e.
func (l *MemoryLedger) Record(e LedgerEntry) {
	l.mu.Lock()
	l.entries = append(l.entries, e)
	l.mu.Unlock()
}

// Entries returns a copy of the entries recorded so far, in order.
func (l *MemoryLedger) Entries() []LedgerEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]LedgerEntry(nil), l.entries...)
}

// discardLedger drops every entry.
type discardLedger struct{}

func (discardLedger) Record(LedgerEntry) {}
