// Package history records what happened during a run and loads it back.
//
// A history is a JSONL file, one event per line, appended as the run goes and
// fsynced in batches. Every line carries a "kind" and "t", the time in
// nanoseconds since the recorder started, measured on Go's monotonic clock so
// that wall-clock faults cannot reorder events. Client operations are recorded
// Jepsen style, as an invoke line when the operation starts and a complete line
// when it ends; an operation that never completed loads with status unknown and
// an infinite return time.
//
// The package has two halves. The Recorder writes a history and is safe for
// concurrent use by every component of a run; its WrapTransport records each
// Kubernetes API call made through client-go. Load and Read are pure: they
// parse a saved history, tolerating a last line torn by a crash, so a history
// can be checked again at any time without the cluster that produced it.
package history
