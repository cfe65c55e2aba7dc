// Package checker judges a loaded history against podsafe's guarantees.
//
// Checkers are pure functions of a history.History: they never touch a live
// cluster, so a saved history, even one cut short by a crash, can be checked
// again at any time. Each returns a Result with a Verdict (Ok, Illegal or
// Unknown), the guarantee IDs it judged, a summary and, for Illegal, the
// smallest evidence that shows the violation. Every checker is bounded by a
// timeout and answers Unknown rather than hang.
//
// The register checker (CheckRegister, guarantee STORE-LIN) checks the
// register workload's operations for linearizability with porcupine, one key
// per partition, and WriteVisualization draws the result with the run's
// faults as bands. What the register's clients were shown besides their
// own operations is judged against the store's committed history of the
// register's keys: CheckWatchOrder (STORE-WATCH-ORDER: every watch stream in
// order, without gap or duplicate, resumed exactly), CheckWatchValues
// (STORE-WATCH-VALUE: each event is the change committed at its
// resourceVersion), CheckReadAfterWatch (STORE-READ-AFTER-WATCH: a read that
// begins after a delivery reflects it) and CheckLists (STORE-LIST: a list is
// the state at its resourceVersion).
//
// Four checkers judge the pod lifecycle from the ledger, the oracle of what
// really ran, and the recorded API calls: CheckAtMostOne (PS-1, PS-11, LC-3:
// no pet runs twice at once, no UID on two nodes), CheckStorage (PS-15,
// PS-14: RWO writes never interleave, a fenced node stays fenced),
// CheckGrace (GP-R's lower bound on TERM and KILL, after restarts too, and
// the upper bound of LC-11: TERM by the grace deadline, KILL at most 2 s
// later, even when a preStop hook hangs) and
// CheckAuthority (PS-8, PS-9, PS-10, PS-14: who may force delete). Each
// states in its doc comment the exact rule, its tolerance, and what it
// approximates because the history does not record it.
//
// From the store's record of every committed change: CheckPhases (LC-1,
// LC-2, LC-3, LC-7, LC-8, LC-10, PS-1, PS-2, PS-3: phases, bindings,
// deletions and conditions), CheckPreemption (PR-*) and CheckSpread (TS-*)
// judge each decision against the cluster's state when it was made; from the
// ledger, CheckBackoff (LC-6) judges restarts.
//
// Check decodes a history once, into a view every checker reads (each
// store event and API call decoded and indexed once; see view.go), and
// validates it first against what the checkers assume of how it was
// recorded (see validate.go): a checker resting on a broken assumption
// answers Unknown rather than judge on a broken premise.
//
// Recovery measures availability, which is not safety: per pet, the time it
// was unavailable and its time to recovery after each fault. Check adds
// those figures to the at-most-one result; they never change a verdict.
package checker
