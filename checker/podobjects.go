package checker

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/podsafe/podsafe/history"
)

// Pod objects as the store events record them. The phase, back-off, grace
// and authority checkers read a few fields of every committed pod change;
// decoding each object into the full core/v1 Pod would cost most of their
// time, so the view decodes each once into poPod, which names only those
// fields (with the JSON names of k8s.io/api/core/v1), with the pod scanner
// (podscan.go). The checker package does not import the system under test,
// so the values the system uses are restated here.

// Pod phases (core/v1 PodPhase).
const (
	poPending   = "Pending"
	poRunning   = "Running"
	poSucceeded = "Succeeded"
	poFailed    = "Failed"
	poUnknown   = "Unknown"
)

// Pod condition types (core/v1 PodConditionType) and the node controller's
// NodeDown condition (PS-13, PS-17).
const (
	poCondScheduled       = "PodScheduled"
	poCondInitialized     = "Initialized"
	poCondContainersReady = "ContainersReady"
	poCondReady           = "Ready"
	poCondNodeDown        = "podsafe.io/NodeDown"
)

// poKnownConditions are the pod condition types a pod may carry besides its
// readiness gates: LC-7's four, the node controller's NodeDown, and the two
// Kubernetes itself writes (a disruption's target, the sandbox's readiness).
var poKnownConditions = map[string]bool{
	poCondScheduled: true, poCondInitialized: true, poCondContainersReady: true, poCondReady: true,
	poCondNodeDown: true, "DisruptionTarget": true, "PodReadyToStartContainers": true,
}

// Pod status reasons of a Failed pod that the kubelet's container states do
// not explain: the node controller's LC-4 policy fails pods of a lost node
// while their containers may still run there, and the kubelet's eviction
// (PR-14) fails a pod once its containers are dead.
const (
	poReasonNodeLost = "NodeLost"
	poReasonEvicted  = "Evicted"
)

// Restart policies (core/v1 RestartPolicy); "" is the API's default, Always.
const (
	poAlways    = "Always"
	poOnFailure = "OnFailure"
	poNever     = "Never"
)

// poPod is the part of a pod object the checkers read.
type poPod struct {
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
		UID       string `json:"uid"`
		// Scripts are the annotations that script the simulated runtime's
		// containers.
		Scripts poScripts `json:"annotations"`
		// DeletionTimestamp is kept as written (RFC 3339, whole seconds):
		// comparing parsed times is needed only when it changes.
		DeletionTimestamp          string `json:"deletionTimestamp"`
		DeletionGracePeriodSeconds *int64 `json:"deletionGracePeriodSeconds"`
	} `json:"metadata"`
	Spec struct {
		NodeName       string            `json:"nodeName"`
		RestartPolicy  string            `json:"restartPolicy"`
		InitContainers []poContainer     `json:"initContainers"`
		Containers     []poContainer     `json:"containers"`
		ReadinessGates []poReadinessGate `json:"readinessGates"`
	} `json:"spec"`
	Status struct {
		Phase                 string              `json:"phase"`
		Reason                string              `json:"reason"`
		Conditions            []poCondition       `json:"conditions"`
		InitContainerStatuses []poContainerStatus `json:"initContainerStatuses"`
		ContainerStatuses     []poContainerStatus `json:"containerStatuses"`
	} `json:"status"`
}

type poContainer struct {
	Name string `json:"name"`
	// RestartPolicy Always on an init container makes it a sidecar.
	RestartPolicy string `json:"restartPolicy"`
	// StartupProbe and LivenessProbe: the container has a probe whose
	// failure kills it, with a grace of its own (GP-1).
	StartupProbe  poPresent `json:"startupProbe"`
	LivenessProbe poPresent `json:"livenessProbe"`
}

// poPresent records whether a field is there and not null: what a checker
// needs of a value it does not read.
type poPresent bool

// UnmarshalJSON records whether b is not null.
func (p *poPresent) UnmarshalJSON(b []byte) error {
	*p = string(b) != "null"
	return nil
}

// poScripts holds the annotations of a pod that script the simulated
// runtime's containers (keys starting with scriptAnnotationPrefix): the
// only annotations a checker reads. It decodes from the annotations object
// leniently, so that an annotation it does not read never makes a pod
// unreadable: a null makes it nil, a repeated key adds to what the first
// read, a script annotation whose value is not a string (or null, read as
// "") is left out, and a value that is no object leaves it as it was.
type poScripts map[string]string

// UnmarshalJSON reads an annotations object, keeping the script
// annotations.
func (m *poScripts) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*m = nil
		return nil
	}
	var all map[string]json.RawMessage
	if json.Unmarshal(b, &all) != nil {
		return nil
	}
	for k, raw := range all {
		var v string
		if !strings.HasPrefix(k, scriptAnnotationPrefix) || json.Unmarshal(raw, &v) != nil {
			continue
		}
		if *m == nil {
			*m = poScripts{}
		}
		(*m)[k] = v
	}
	return nil
}

// usesMemory reports whether a script makes a container use memory (a
// script word "mem=…"), so that a kubelet may evict pods for memory
// pressure.
func (m poScripts) usesMemory() bool {
	for _, v := range m {
		if strings.HasPrefix(v, "mem=") || strings.Contains(v, " mem=") {
			return true
		}
	}
	return false
}

// hasKillingProbe reports whether a container of the pod has a startup or
// liveness probe.
func (p *poPod) hasKillingProbe() bool {
	for _, cs := range [][]poContainer{p.Spec.Containers, p.Spec.InitContainers} {
		for _, c := range cs {
			if c.StartupProbe || c.LivenessProbe {
				return true
			}
		}
	}
	return false
}

type poReadinessGate struct {
	ConditionType string `json:"conditionType"`
}

type poCondition struct {
	Type   string `json:"type"`
	Status string `json:"status"`
}

type poContainerStatus struct {
	Name      string           `json:"name"`
	Ready     bool             `json:"ready"`
	State     poContainerState `json:"state"`
	LastState poContainerState `json:"lastState"`
}

type poContainerState struct {
	Waiting    *poWaiting    `json:"waiting"`
	Running    *struct{}     `json:"running"`
	Terminated *poTerminated `json:"terminated"`
}

type poWaiting struct {
	Reason string `json:"reason"`
}

type poTerminated struct {
	ExitCode int `json:"exitCode"`
}

// ref renders the pod's namespace/name.
func (p *poPod) ref() string { return podRef(p.Metadata.Namespace, p.Metadata.Name) }

// condition returns the status of the condition of type t, or "".
func (p *poPod) condition(t string) string {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// isAppContainer reports whether name is one of the spec's app containers.
func (p *poPod) isAppContainer(name string) bool {
	for _, c := range p.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// lastExit is the exit code of the newest termination a container status
// shows: its state, or, while it waits again (back-off, a volume), its last
// state. ok is false when it shows none.
func (s *poContainerStatus) lastExit() (code int, ok bool) {
	switch {
	case s.State.Terminated != nil:
		return s.State.Terminated.ExitCode, true
	case s.State.Running == nil && s.LastState.Terminated != nil:
		return s.LastState.Terminated.ExitCode, true
	}
	return 0, false
}

// poHasPods reports whether store records a change of a pod object, which
// CheckPhases judges.
func poHasPods(store []history.StoreEvent) bool {
	for i := range store {
		if store[i].Resource == "pods" && len(store[i].Object) > 0 {
			return true
		}
	}
	return false
}

// poEvent is one committed change of one pod (one UID), decoded.
type poEvent struct {
	store int // index in h.Store
	rv    uint64
	typ   history.StoreEventType
	t     int64
	pod   *poPod
}

// poPodHistory is every recorded change of one pod instance, in commit
// (resourceVersion) order, once each.
type poPodHistory struct {
	uid    string
	events []poEvent
}

// spec is the pod's spec as first recorded (the spec of a pod does not
// change in the fields the checkers read, but nodeName, which binding sets).
func (ph *poPodHistory) spec() *poPod { return ph.events[0].pod }

// poTime parses a metadata timestamp (RFC 3339).
func poTime(s string) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339, s)
	return t, err == nil
}

// poStoreLost reports whether the history notes store events of pods lost
// (the recorder's watch fell behind the store's compaction window): then
// two consecutive recorded changes of a pod need not be consecutive commits.
func poStoreLost(logs []history.LogEntry) bool {
	for _, l := range logs {
		if l.Msg == "store events lost" && (l.Attrs["resource"] == "" || l.Attrs["resource"] == "pods") {
			return true
		}
	}
	return false
}

// poEventRef renders a store event for a description.
func poEventRef(e poEvent) string {
	var b bytes.Buffer
	b.WriteString(string(e.typ))
	b.WriteString(" rv ")
	b.WriteString(strconv.FormatUint(e.rv, 10))
	b.WriteString(" (t=")
	b.WriteString(nanos(e.t))
	b.WriteString(")")
	return b.String()
}
