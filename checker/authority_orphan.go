package checker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/podsafe/podsafe/history"
)

// identityGC is the garbage collector's identity in the API history.
const identityGC = "garbage-collector"

// orphanValue is the Value of a set workload's "delete" operation that
// asked for propagationPolicy Orphan.
const orphanValue = "propagation=Orphan"

// orphanDeletions judges what the garbage collector does with the
// dependents of an owner deleted with propagationPolicy Orphan: it removes
// their references to the owner and deletes none of them (PS-9: the
// collector acts only as its owners' deletions ask). For each successful
// or unknown workload operation "<workload>:delete" with Value
// propagation=Orphan, the owner is the ReplicaSet, StatefulSet or
// Deployment of that name the store recorded by then, its dependents the
// pods and ReplicaSets whose every recorded version refers to that owner
// alone; a deletion of one of them by the garbage collector after the
// request is a violation. The embedded target only (elsewhere the
// collector's calls are not in the history). why is "" when the history
// can be judged, else why not.
func orphanDeletions(h *history.History, maxEvidence int) (ev []Evidence, illegal, judged int, why string) {
	if h.Meta.Extra[history.ExtraTarget] != history.TargetEmbedded {
		return nil, 0, 0, "not the embedded target, whose garbage collector's calls are not in the history"
	}
	for i := range h.Ops {
		op := &h.Ops[i]
		if op.Status == history.StatusFail || op.Value != orphanValue || !strings.HasSuffix(op.Func, ":delete") {
			continue
		}
		ns, name, ok := strings.Cut(op.Key, "/")
		if !ok {
			continue
		}
		owner := ownerUIDAt(h.Store, ns, name, op.Return)
		if owner == "" {
			continue
		}
		deps := soleDependents(h.Store, ns, owner)
		judged += len(deps)
		for j := range h.API {
			c := &h.API[j]
			if c.Identity != identityGC || c.Verb != "delete" || c.Outcome != history.StatusOK || c.Invoke < op.Invoke || c.Namespace != ns {
				continue
			}
			kind, ok := deps[c.Name]
			if !ok || kind != c.Resource {
				continue
			}
			illegal++
			if len(ev) < maxEvidence {
				ev = append(ev, Evidence{Key: podRef(ns, c.Name), At: c.Invoke, Ops: []history.Op{*op}, API: []history.APICall{*c},
					Description: fmt.Sprintf("PS-9: %s deleted %s %s, a dependent of %s, whose deletion asked for propagationPolicy Orphan (%s at t=%s): the collector must orphan it, not delete it",
						callRef(c), strings.TrimSuffix(c.Resource, "s"), podRef(ns, c.Name), op.Key, op.Func, time.Duration(op.Invoke))})
			}
		}
	}
	return ev, illegal, judged, ""
}

// ownerUIDAt is the UID of the ReplicaSet, StatefulSet or Deployment
// ns/name as the store lines recorded it last by recorder time at, or the
// first recorded after (its removal's line), "" when none is.
func ownerUIDAt(store []history.StoreEvent, ns, name string, at int64) string {
	uid := ""
	for i := range store {
		e := &store[i]
		if e.Namespace != ns || e.Name != name || !isOwnerResource(e.Resource) {
			continue
		}
		u := objectUID(e.Object)
		switch {
		case u == "":
		case e.T <= at:
			uid = u // the latest by then
		case uid == "":
			return u // none by then: the first after
		default:
			return uid
		}
	}
	return uid
}

func isOwnerResource(r string) bool {
	switch trackedResource(r) {
	case "replicasets", "statefulsets", "deployments":
		return true
	}
	return false
}

// soleDependents are the pods and ReplicaSets of namespace ns (name ->
// resource, "pods" or "replicasets") that refer to owner, and to no other
// owner, in every version the store lines record of them.
func soleDependents(store []history.StoreEvent, ns, owner string) map[string]string {
	needle := []byte(`"` + owner + `"`)
	out := map[string]string{}
	other := map[string]bool{}
	for i := range store {
		e := &store[i]
		r := trackedResource(e.Resource)
		if e.Namespace != ns || (r != "pods" && r != "replicasets") || len(e.Object) == 0 || !bytes.Contains(e.Object, needle) {
			continue
		}
		var m struct {
			Metadata struct {
				OwnerReferences []struct {
					UID string `json:"uid"`
				} `json:"ownerReferences"`
			} `json:"metadata"`
		}
		if json.Unmarshal(e.Object, &m) != nil {
			continue
		}
		refs := m.Metadata.OwnerReferences
		switch {
		case len(refs) == 1 && refs[0].UID == owner:
			out[e.Name] = r
		case len(refs) > 0:
			other[e.Name] = true
		}
	}
	for name := range other {
		delete(out, name)
	}
	return out
}
