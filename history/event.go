package history

import (
	"encoding/json"
	"time"

	"github.com/podsafe/podsafe/target"
)

// Kind names the type of one history line; it is the line's "kind" field.
type Kind string

// The kinds of line a history holds.
const (
	KindMeta     Kind = "meta"
	KindInvoke   Kind = "invoke"
	KindComplete Kind = "complete"
	KindAPI      Kind = "api"
	KindNemesis  Kind = "nemesis"
	KindLedger   Kind = "ledger"
	KindStore    Kind = "store"
	KindLog      Kind = "log"
	// KindWatch lines record a client's watch streams: each watch request
	// as it opens and as it closes, and every event it delivered between.
	KindWatch Kind = "watch"
	// KindEnd is the closing record: the last line of a history whose
	// recorder was closed (see Recorder.Close). A history without it was
	// left by a run that was killed before it finished.
	KindEnd Kind = "end"
)

// End is the closing record of a history: how the recording ended.
type End struct {
	// Error is the error the run ended with, if it broke; empty when the
	// run finished.
	Error string `json:"error,omitempty"`
	// Interrupted says the run was stopped early (Ctrl-C): the workload and
	// the faults ran for less than the scenario's time limit.
	Interrupted bool `json:"interrupted,omitempty"`
}

// Meta describes a run. It is the first line of every history.
type Meta struct {
	RunID    string `json:"run_id"`
	Seed     uint64 `json:"seed"`
	Scenario string `json:"scenario"`
	// Start is the wall time the recorder started; Create fills it when zero.
	Start   time.Time `json:"start"`
	Version string    `json:"version"`
	// Extra holds free-form facts about the run.
	Extra map[string]string `json:"extra,omitempty"`
}

// ExtraWorkload is the Meta.Extra key naming the workload a run ran (absent
// for a scripted run, which runs steps instead).
const ExtraWorkload = "workload"

// ExtraCheckers is the Meta.Extra key listing, comma separated, the only
// checkers a run's scenario asks for (absent: every one that applies).
const ExtraCheckers = "checkers"

// ExtraRate is the Meta.Extra key holding the bound on the workload's
// operations per second the run had (absent: none).
const ExtraRate = "rate"

// ExtraTimeScale is the Meta.Extra key holding the run's time scale: how
// many times faster than wall time the cluster's clock ran (absent: not
// recorded).
const ExtraTimeScale = "time_scale"

// ExtraTarget is the Meta.Extra key naming the system under test a run was
// made on: TargetEmbedded, "kube" or "kubeconfig" (absent: not recorded).
const ExtraTarget = "target"

// TargetEmbedded is ExtraTarget's value for podsafe's own control plane,
// every component of which records its API calls in the history.
const TargetEmbedded = "embedded"

// Status is the outcome of a client operation or an API call.
type Status string

// The outcomes of an operation. Unknown means the operation may or may not
// have taken effect (a timeout, a cut connection, a crash before completion).
const (
	StatusOK      Status = "ok"
	StatusFail    Status = "fail"
	StatusUnknown Status = "unknown"
)

// Op is one client operation of a workload, recorded as an invoke line and a
// complete line paired by ID. Times are nanoseconds since the recorder's start;
// Return is math.MaxInt64 when the outcome is unknown.
type Op struct {
	ID      uint64 `json:"id"`
	Process int    `json:"process"`
	// Func is the operation; the register workload uses "create", "get",
	// "cas", "delete" and "list" (Key is then the namespace listed).
	Func string `json:"f"`
	Key  string `json:"key"`
	// Value is the value written (create, cas).
	Value string `json:"value,omitempty"`
	// Expect is the value expected to be current (cas; delete when
	// conditional).
	Expect string `json:"expect,omitempty"`
	Status Status `json:"status,omitempty"`
	// Output is the value a get read; "" with Found false means absent.
	Output string `json:"output,omitempty"`
	Found  bool   `json:"found,omitempty"`
	// Error classifies a failure; checkers read it (see the checker package
	// for the classes the register workload must use).
	Error string `json:"error,omitempty"`
	// RV is the resourceVersion the operation returned: of the object a
	// get read or a create or cas wrote, or of the list as a whole.
	RV string `json:"rv,omitempty"`
	// Items are the objects a list returned, sorted by key.
	Items  []Item `json:"items,omitempty"`
	Invoke int64  `json:"invoke"`
	Return int64  `json:"return,omitempty"`
}

// Item is one object a list returned: its key (name), value and
// resourceVersion.
type Item struct {
	Key   string `json:"key"`
	Value string `json:"value,omitempty"`
	RV    string `json:"rv"`
}

// APICall is one Kubernetes API request seen by the recording round-tripper.
type APICall struct {
	// Identity names the component that made the call.
	Identity string `json:"identity"`
	// Verb is get, list, watch, create, update, patch, delete or
	// deletecollection for resource requests, and the lower-cased HTTP method
	// otherwise.
	Verb        string `json:"verb"`
	Group       string `json:"group,omitempty"`
	Resource    string `json:"resource,omitempty"`
	Subresource string `json:"subresource,omitempty"`
	Namespace   string `json:"namespace,omitempty"`
	Name        string `json:"name,omitempty"`
	// Path is set for requests that name no resource (/version, /api, …).
	Path string `json:"path,omitempty"`
	// BodyDigest is the first 16 hex characters of the SHA-256 of the
	// request body; empty when there was none.
	BodyDigest string `json:"body_digest,omitempty"`
	Code       int    `json:"code,omitempty"`
	// GracePeriodSeconds is the grace period a deletion of pods asked for
	// (delete, deletecollection, and create of the eviction subresource):
	// DeleteOptions.gracePeriodSeconds from the request body, JSON or
	// protobuf, else the gracePeriodSeconds query parameter. Nil when the
	// request gave none, so that the API server uses the pod's own (GP-6),
	// and for every other request.
	GracePeriodSeconds *int64 `json:"grace,omitempty"`
	// ResourceVersion and UID come from the response body's metadata when
	// it was JSON and not a watch stream.
	ResourceVersion string `json:"rv,omitempty"`
	UID             string `json:"uid,omitempty"`
	Invoke          int64  `json:"invoke"`
	Return          int64  `json:"return"`
	// Outcome is ok for 1xx–3xx, fail for 4xx and 503, unknown for
	// transport errors and any other 5xx.
	Outcome Status `json:"outcome"`
	Error   string `json:"error,omitempty"`
	// T is the time the call was recorded; set by the recorder.
	T int64 `json:"-"`
}

// NemesisPhase says whether a nemesis line starts or ends a fault.
type NemesisPhase string

// The phases of a fault.
const (
	PhaseStart NemesisPhase = "start"
	PhaseEnd   NemesisPhase = "end"
)

// NemesisEvent is the start or the end of one fault. An end closes the open
// fault with the same ID; with no ID (zero), it closes the oldest open fault
// with the same Name. An end may leave Name empty when it has an ID.
//
// Effect, Links, Components, Nodes and Params say what the fault did in a
// form a checker can use without parsing Name or Description; histories
// written before they existed have none, and an end line may leave them
// out.
type NemesisEvent struct {
	ID          uint64       `json:"id,omitempty"`
	Name        string       `json:"name,omitempty"`
	Description string       `json:"description,omitempty"`
	Phase       NemesisPhase `json:"phase"`
	Targets     []string     `json:"targets,omitempty"`
	// Effect says what the fault did to what Links, Components and Nodes
	// name (see FaultEffect).
	Effect FaultEffect `json:"effect,omitempty"`
	// Links are the links the fault cut (partitions).
	Links []target.Link `json:"links,omitempty"`
	// Components are the components the fault acted on: killed, paused,
	// clock moved, slowed, powered off.
	Components []string `json:"components,omitempty"`
	// Nodes are the nodes whose kubelets the fault acted on, or whose
	// hosts' links it cut.
	Nodes []string `json:"nodes,omitempty"`
	// Params are the fault's drawn parameters by name (the Param keys:
	// ParamMember, ParamNode, ParamOffset, ParamFailpoint, …).
	Params map[string]string `json:"params,omitempty"`
	// Wall is the wall time of the event; set by the recorder.
	Wall time.Time `json:"wall"`
	// T is set by the recorder.
	T int64 `json:"-"`
}

// Interval is a fault as loaded: a start paired with its end. A fault that
// was never healed has Healed false and ends at the end of the history.
type Interval struct {
	ID          uint64   `json:"id,omitempty"`
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Targets     []string `json:"targets,omitempty"`
	// Effect, Links, Components, Nodes and Params are the start's (see
	// NemesisEvent); empty in histories written before they existed
	// (FaultEffect and FaultNodes answer for those too).
	Effect     FaultEffect       `json:"effect,omitempty"`
	Links      []target.Link     `json:"links,omitempty"`
	Components []string          `json:"components,omitempty"`
	Nodes      []string          `json:"nodes,omitempty"`
	Params     map[string]string `json:"params,omitempty"`
	Start      int64             `json:"start"`
	End        int64             `json:"end"`
	Healed     bool              `json:"healed"`
	StartWall  time.Time         `json:"start_wall"`
	EndWall    time.Time         `json:"end_wall,omitzero"`
}

// LedgerAction is what a container runtime did.
type LedgerAction string

// The actions the ledger records. They are spelled as the kubelet's runtime
// ledger spells them, so its entries convert field by field.
const (
	LedgerStart        LedgerAction = "start"
	LedgerTerm         LedgerAction = "term"
	LedgerKill         LedgerAction = "kill"
	LedgerExit         LedgerAction = "exit"
	LedgerPreStopStart LedgerAction = "prestop-start"
	LedgerPreStopEnd   LedgerAction = "prestop-end"
	// LedgerWrite and LedgerWriteRefused are a container's write to a
	// volume that the storage server accepted or refused (PS-15).
	LedgerWrite        LedgerAction = "write"
	LedgerWriteRefused LedgerAction = "write-refused"
	// LedgerWriteStale: a storage comparing fencing tokens refused the
	// write, its token being below one it had accepted for the volume.
	LedgerWriteStale LedgerAction = "write-stale"
	// LedgerPowerOff: the node lost power with the container running; it
	// stopped at once, with no signal (a power fence, PS-14).
	LedgerPowerOff LedgerAction = "power-off"
	// LedgerProbe: the kubelet ran one probe of a running container and
	// the runtime answered Result (LC-9).
	LedgerProbe LedgerAction = "probe"
)

// The probes and their answers, as a probe entry spells them (LC-9).
const (
	ProbeStartup   = "startup"
	ProbeLiveness  = "liveness"
	ProbeReadiness = "readiness"

	ProbeSuccess = "Success"
	ProbeFailure = "Failure"
	ProbeUnknown = "Unknown"
)

// The kill reasons of a prestop-start, term or kill entry: the kubelet
// killed the container because this probe failed. No reason: the pod's
// termination, an eviction or a preemption.
const (
	KillStartupProbe  = "StartupProbe"
	KillLivenessProbe = "LivenessProbe"
)

// LedgerEntry is one thing a container runtime really did: the oracle that
// at-most-one and grace-period checkers judge from.
type LedgerEntry struct {
	Node      string       `json:"node"`
	Namespace string       `json:"namespace"`
	Pod       string       `json:"pod"`
	UID       string       `json:"uid,omitempty"`
	Container string       `json:"container,omitempty"`
	Action    LedgerAction `json:"action"`
	ExitCode  int          `json:"exit_code,omitempty"`
	// Scaled is the time on the cluster's scaled clock.
	Scaled time.Time `json:"scaled"`
	Wall   time.Time `json:"wall"`
	// Grace is, for term and kill, the effective grace period in seconds the
	// kubelet was applying when it sent the signal (GP-*).
	Grace int64 `json:"grace,omitempty"`
	// Volume and Token are set on storage writes: the volume written and
	// the writer's attachment (fencing) token.
	Volume string `json:"volume,omitempty"`
	Token  int64  `json:"token,omitempty"`
	// Probe and Result are set on probe entries: which probe ran
	// (ProbeStartup, ...) and what the container answered (ProbeSuccess,
	// ...).
	Probe  string `json:"probe,omitempty"`
	Result string `json:"result,omitempty"`
	// Reason is set on the prestop-start, term and kill of a container the
	// kubelet killed for a failed probe (KillStartupProbe,
	// KillLivenessProbe).
	Reason string `json:"reason,omitempty"`
	// T is set by the recorder.
	T int64 `json:"-"`
}

// StoreEventType is the type of a committed store change, spelled as the
// Kubernetes watch protocol spells it.
type StoreEventType string

// The types of store change.
const (
	StoreAdded    StoreEventType = "ADDED"
	StoreModified StoreEventType = "MODIFIED"
	StoreDeleted  StoreEventType = "DELETED"
)

// StoreEvent is one committed change of the object store.
type StoreEvent struct {
	Type      StoreEventType  `json:"type"`
	Resource  string          `json:"resource"`
	Namespace string          `json:"namespace,omitempty"`
	Name      string          `json:"name"`
	RV        string          `json:"rv"`
	Object    json.RawMessage `json:"object,omitempty"`
	// T is set by the recorder.
	T int64 `json:"-"`
}

// The messages of the log lines that say how complete the store lines are.
// Checkers that compare with the committed history read them.
const (
	// LogStoreEventsLost: changes of the resource named by the attribute
	// "resource" after resourceVersion "after_rv" may be missing from the
	// store lines (they were compacted before they could be recorded).
	LogStoreEventsLost = "store events lost"
	// LogStoreEventsEnd: the store lines hold every committed change of the
	// resource named by "resource" up to resourceVersion "rv" (restricted to
	// the namespace "namespace" when that attribute is set), except what a
	// LogStoreEventsLost line says was lost.
	LogStoreEventsEnd = "store events end"
	// LogStoreEventsListed: the store lines of the resource named by
	// "resource" begin with its objects as listed at resourceVersion "rv"
	// ("objects" of them), each an ADDED line at its own resourceVersion,
	// because the changes before "rv" had left the watch window before the
	// record began (a large cluster's start fills it). The state at "rv" is
	// whole; only how it came about is summarized.
	LogStoreEventsListed = "store events listed"
)

// LogEntry is a free-form note from the harness, such as a phase change.
type LogEntry struct {
	Msg   string            `json:"msg"`
	Attrs map[string]string `json:"attrs,omitempty"`
	// Wall and T are set by the recorder.
	Wall time.Time `json:"wall"`
	T    int64     `json:"-"`
}

// WatchPhase says what a watch line records.
type WatchPhase string

// The phases of a watch request.
const (
	// WatchOpen: the client sends a watch request from FromRV.
	WatchOpen WatchPhase = "open"
	// WatchDeliver: the stream delivered one event (bookmarks included).
	WatchDeliver WatchPhase = "event"
	// WatchClose: the request ended, with Error (and Code) saying why.
	WatchClose WatchPhase = "close"
)

// The reasons a watch request starts from its FromRV.
const (
	// WatchFromList: FromRV is the resourceVersion of the list op List,
	// made by the same watcher (its first list, or a relist after 410 Gone).
	WatchFromList = "list"
	// WatchResume: FromRV is the last resourceVersion the watcher received
	// on its earlier streams (an event's or a bookmark's).
	WatchResume = "resume"
)

// WatchEvent is one line of a watcher's record: the opening of one watch
// request, one event it delivered, or its end. A watcher is one client
// process that keeps one watch open at a time; its requests are numbered by
// Stream from 1, and the lines of one watcher are recorded in the order they
// happened.
type WatchEvent struct {
	// Watcher names the watching client.
	Watcher string `json:"watcher"`
	// Stream numbers the watcher's watch requests, from 1.
	Stream int        `json:"stream"`
	Phase  WatchPhase `json:"phase"`
	// Resource and Namespace say what is watched (open), the resource
	// spelled as the store lines spell it.
	Resource  string `json:"resource,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	// FromRV is the resourceVersion the watch starts after (open): it
	// asks for every change with a larger one. Reason says where FromRV
	// comes from (WatchFromList or WatchResume) and List names the list op
	// (by ID) for WatchFromList.
	FromRV string `json:"from_rv,omitempty"`
	Reason string `json:"reason,omitempty"`
	List   uint64 `json:"list,omitempty"`
	// Type is the event's type: ADDED, MODIFIED, DELETED or BOOKMARK
	// (event); Key, Value and RV are its object's name, value and
	// resourceVersion (a bookmark has only RV).
	Type  string `json:"type,omitempty"`
	Key   string `json:"key,omitempty"`
	Value string `json:"value,omitempty"`
	RV    string `json:"rv,omitempty"`
	// Error says why the request ended (close): the API's or the
	// transport's error, or the client's context's when the run ended it;
	// empty when the stream just ended (its timeout, or a connection the
	// client saw close). Code is the HTTP status of an API error (410 for
	// Gone/Expired), 0 otherwise.
	Error string `json:"error,omitempty"`
	Code  int    `json:"code,omitempty"`
	// T is set by the recorder: for an event, when the client received it.
	T int64 `json:"-"`
}

// RawEvent is a line of a kind this version does not know, kept verbatim so
// that newer histories still load.
type RawEvent struct {
	Kind Kind            `json:"kind"`
	T    int64           `json:"t"`
	Line int             `json:"line"`
	Raw  json.RawMessage `json:"raw"`
}
