package raftstore

import "fmt"

// Key names one stored object. Resource is the plural resource name, qualified by
// its API group when it has one ("pods", "nodes", "statefulsets.apps",
// "leases.coordination.k8s.io"). Namespace is empty for cluster-scoped objects.
type Key struct {
	Resource  string `json:"resource"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// String renders the key as resource/namespace/name (resource//name when
// cluster-scoped); it is the key porcupine partitions by.
func (k Key) String() string { return fmt.Sprintf("%s/%s/%s", k.Resource, k.Namespace, k.Name) }

// Object is one stored object: its key, its full JSON encoding (a k8s.io/api
// object with metadata.resourceVersion already set to RV) and RV, the raft index
// of the change that last wrote it. For a DELETED event RV is the index of the
// deletion.
type Object struct {
	Key  Key    `json:"key"`
	Data []byte `json:"data"`
	RV   uint64 `json:"rv"`
}

// Preconditions guard an update or a delete. Zero fields are not checked.
// A mismatch is ErrConflict.
type Preconditions struct {
	// ResourceVersion makes the write a compare-and-swap on the stored RV.
	ResourceVersion uint64 `json:"resourceVersion,omitempty"`
	// UID must equal the stored object's metadata.uid.
	UID string `json:"uid,omitempty"`
}

// EventType is the kind of change a watch event reports, spelled as the
// Kubernetes watch protocol spells it.
type EventType string

// The event types of a watch stream.
const (
	Added    EventType = "ADDED"
	Modified EventType = "MODIFIED"
	Deleted  EventType = "DELETED"
)

// Event is one committed change. Events of one store are totally ordered by RV
// and every member emits the same sequence.
type Event struct {
	Type   EventType `json:"type"`
	Object Object    `json:"object"`
	// Entered is set on an event of a watch narrowed to one index value
	// (ByIndex) when the object did not have that value before the event,
	// so a client of the watch cannot have held it. An event that does not
	// concern the value is never sent to such a watch, so without this flag
	// it could not tell an object that just arrived at its value from one
	// it held since its start.
	Entered bool `json:"-"`
}
