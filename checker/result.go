package checker

import (
	"time"

	"github.com/podsafe/podsafe/history"
)

// Verdict is a checker's answer.
type Verdict string

// The verdicts. Unknown means the checker could not decide (it ran out of
// time, was cancelled, or lacked the data); it is neither a pass nor a
// violation.
const (
	Ok      Verdict = "Ok"
	Illegal Verdict = "Illegal"
	Unknown Verdict = "Unknown"
)

// MergeVerdicts combines verdicts: any Illegal makes Illegal; otherwise any
// Unknown makes Unknown; otherwise Ok. No verdicts at all is Ok.
func MergeVerdicts(verdicts ...Verdict) Verdict {
	out := Ok
	for _, v := range verdicts {
		switch v {
		case Illegal:
			return Illegal
		case Ok:
		default:
			out = Unknown
		}
	}
	return out
}

// Merge is the verdict of a run: the verdicts of results combined by
// MergeVerdicts.
func Merge(results []Result) Verdict {
	vs := make([]Verdict, len(results))
	for i, r := range results {
		vs[i] = r.Verdict
	}
	return MergeVerdicts(vs...)
}

// Result is the outcome of one checker over one history. It is a plain value
// that encodes to JSON for results.json.
type Result struct {
	// Checker names the checker that produced the result.
	Checker string  `json:"checker"`
	Verdict Verdict `json:"verdict"`
	// Guarantees are the IDs of the guarantees the checker judged.
	Guarantees []string `json:"guarantees"`
	// Summary is one or two sentences a person can act on.
	Summary  string     `json:"summary"`
	Evidence []Evidence `json:"evidence,omitempty"`
	// Figures are measurements that are not verdicts (time to recovery,
	// overlap counts), for reports.
	Figures []Figure `json:"figures,omitempty"`
	Stats   Stats    `json:"stats"`
}

// Figure is one measurement a checker reports besides its verdict.
type Figure struct {
	// Name says what was measured, e.g. "time to recovery".
	Name string `json:"name"`
	// Key is the object the figure is about (a pet, a node), if any.
	Key   string  `json:"key,omitempty"`
	Value float64 `json:"value"`
	// Unit is the value's unit: "s" (scaled seconds), "count", "%".
	Unit string `json:"unit,omitempty"`
	// Fault names the fault the figure follows, if any.
	Fault string `json:"fault,omitempty"`
}

// Evidence backs an Illegal verdict with the smallest set of facts that
// shows the violation. Evidence marked Expected instead shows behaviour the
// guarantees allow but a reader should see (PS-7's ReplicaSet overlap); it
// never backs a verdict.
type Evidence struct {
	// Key is the object or register key the evidence is about.
	Key string `json:"key,omitempty"`
	// Description explains the violation in words.
	Description string `json:"description"`
	// Expected marks evidence of allowed behaviour, reported for
	// information only.
	Expected bool `json:"expected,omitempty"`
	// At is when the violation happened, in the history's time (ns since
	// the run began), for evidence that has no ledger entries to tell.
	At int64 `json:"at,omitempty"`
	// Ops are the operations involved, in invoke order.
	Ops []history.Op `json:"ops,omitempty"`
	// Ledger are the ledger entries involved, in ledger order.
	Ledger []history.LedgerEntry `json:"ledger,omitempty"`
	// API are the API calls involved, in invoke order.
	API []history.APICall `json:"api,omitempty"`
	// Linearized lists, by op ID, the longest prefix of Ops the checker
	// could put in a legal order.
	Linearized []uint64 `json:"linearized,omitempty"`
	// State describes the state after Linearized.
	State string `json:"state,omitempty"`
	// Blocked lists, by op ID, the operations that could come next after
	// Linearized by their timing, none of which is legal in State.
	Blocked []uint64 `json:"blocked,omitempty"`
}

// Stats describes the work a checker did.
type Stats struct {
	// Ops is the number of operations the checker was given that it judges.
	Ops int `json:"ops"`
	// Checked is the number it checked; the rest carried no information
	// (reads and failures with nothing to say about the state).
	Checked int `json:"checked"`
	// Keys is the number of independent keys (partitions).
	Keys     int           `json:"keys"`
	Duration time.Duration `json:"duration_ns"`
}

// DefaultTimeout bounds a check when Options.Timeout is zero.
const DefaultTimeout = 30 * time.Second

// DefaultMaxEvidence is the number of failing keys an Illegal result
// details when Options.MaxEvidence is zero.
const DefaultMaxEvidence = 3

// Options tune the checkers. The zero value is ready to use.
type Options struct {
	// Timeout bounds each checker; past it the checker answers Unknown.
	// Zero means DefaultTimeout. A context deadline also bounds it.
	Timeout time.Duration
	// MaxEvidence bounds the failing keys detailed in an Illegal result,
	// smallest first. Zero means DefaultMaxEvidence.
	MaxEvidence int
	// MaxSearchMemory bounds the register checker's search, in bytes as
	// searchStateBytes estimates them (an upper bound on porcupine's
	// cache); keys that would need more answer Unknown while the others are
	// still judged. Zero means DefaultMaxSearchMemory.
	MaxSearchMemory int64
	// VisualizationPath, when set, makes Check write the register
	// checker's porcupine visualization there (see WriteVisualization),
	// from the same search as its verdict.
	VisualizationPath string
	// Workload names the workload the history's run ran, if any: a
	// checker that every run of it feeds and that found nothing to judge
	// answers Unknown (see Expected). Empty: no such demand.
	Workload string
	// Checkers, when set, are the only checkers that run (by name, see
	// Catalog), and each must judge something: one whose input the history
	// lacks answers Unknown. A scenario's checkers list.
	Checkers []string
}

func (o Options) timeout() time.Duration {
	if o.Timeout <= 0 {
		return DefaultTimeout
	}
	return o.Timeout
}

func (o Options) maxEvidence() int {
	if o.MaxEvidence <= 0 {
		return DefaultMaxEvidence
	}
	return o.MaxEvidence
}
