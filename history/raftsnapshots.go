package history

// The messages of the log lines that record the embedded control plane's
// raft parameters and every snapshot its members take, install from the
// leader or restore from disk as they start. A report counts them; no
// checker reads them, since a run whose members installed snapshots is
// judged like any other.
const (
	// LogRaftParams: the raft timings and snapshot sizes every member ran
	// with, one attribute each by its scenario name (heartbeatTimeout,
	// snapshotThreshold, trailingLogs, …). A history with this line
	// counts its snapshots; one without it (another target, or written
	// before snapshots were recorded) has no count.
	LogRaftParams = "raft parameters"
	// LogSnapshotTaken, LogSnapshotInstalled and LogSnapshotRestored: a
	// member took a snapshot of its state, installed one the leader sent
	// it (it lagged further behind than the leader's log reaches), or
	// restored its own as it restarted. Attributes: "member" (its host
	// name), "index" (the raft index the snapshot covers) and "objects".
	LogSnapshotTaken     = "raft snapshot taken"
	LogSnapshotInstalled = "raft snapshot installed"
	LogSnapshotRestored  = "raft snapshot restored"
)
