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
// faults as bands.
package checker
