package checker

import (
	"encoding/json"
	"fmt"
)

// The resources whose watch values the watch checkers know, as the store
// lines spell them. A watcher records each delivered object's value as the
// workload package derives it (workload/watchers_kinds.go); watchValue
// derives the same from a store line's object, so that an event's value can
// be compared with the committed change at its resourceVersion.
const (
	leaseResource       = "leases.coordination.k8s.io"
	podResource         = "pods"
	statefulSetResource = "statefulsets.apps"
	replicaSetResource  = "replicasets.apps"
)

// watchObject is the part of a stored object a watch value is made of.
type watchObject struct {
	Metadata struct {
		UID               string          `json:"uid"`
		Generation        int64           `json:"generation"`
		DeletionTimestamp json.RawMessage `json:"deletionTimestamp"`
	} `json:"metadata"`
	Spec struct {
		HolderIdentity *string `json:"holderIdentity"`
		NodeName       string  `json:"nodeName"`
		Replicas       *int32  `json:"replicas"`
	} `json:"spec"`
	Status struct {
		Phase    string `json:"phase"`
		Replicas int32  `json:"replicas"`
	} `json:"status"`
}

// deleting reports whether the object has a deletion timestamp.
func (o *watchObject) deleting() bool {
	return len(o.Metadata.DeletionTimestamp) > 0 && string(o.Metadata.DeletionTimestamp) != "null"
}

// valueKnown reports whether watchValue derives values for resource; the
// watch lines of other resources are judged on type and key only.
func valueKnown(resource string) bool {
	switch resource {
	case leaseResource, podResource, statefulSetResource, replicaSetResource:
		return true
	}
	return false
}

// watchValue is the value a watcher records of the object data of
// resource: a Lease's spec.holderIdentity (the register's value); a pod's
// UID, node, phase and whether it is being deleted; a StatefulSet's or
// ReplicaSet's UID, generation, desired and current replicas and whether it
// is being deleted. "" for a resource valueKnown does not know, or no data.
func watchValue(resource string, data []byte) (string, error) {
	if !valueKnown(resource) || len(data) == 0 {
		return "", nil
	}
	var o watchObject
	if err := json.Unmarshal(data, &o); err != nil {
		return "", err
	}
	var v string
	switch resource {
	case leaseResource:
		if o.Spec.HolderIdentity != nil {
			v = *o.Spec.HolderIdentity
		}
		return v, nil
	case podResource:
		v = fmt.Sprintf("uid=%s node=%s phase=%s", o.Metadata.UID, o.Spec.NodeName, o.Status.Phase)
	default:
		replicas := int32(1)
		if o.Spec.Replicas != nil {
			replicas = *o.Spec.Replicas
		}
		v = fmt.Sprintf("uid=%s generation=%d replicas=%d current=%d", o.Metadata.UID, o.Metadata.Generation, replicas, o.Status.Replicas)
	}
	if o.deleting() {
		v += " deleting"
	}
	return v, nil
}
