package apiserver

import (
	"encoding/json"

	"github.com/podsafe/podsafe/raftstore"
)

// storeIndexes are the fields the store indexes, by stored resource, as
// kube-apiserver's watch cache indexes pods by spec.nodeName: a list or a
// watch whose field selector pins the field to one value is narrowed to that
// value in the store, so each kubelet's watch is sent the events of its own
// node's pods rather than filtering every pod event of the cluster.
var storeIndexes = map[string]struct {
	field string
	value raftstore.IndexFunc
}{
	"pods": {field: "spec.nodeName", value: podNodeName},
}

// StoreIndexes is the raftstore.Config.Indexes the API server narrows lists
// and watches by. A store opened without them serves every list and watch
// whole, which is correct, only slower.
func StoreIndexes() map[string]raftstore.IndexFunc {
	m := make(map[string]raftstore.IndexFunc, len(storeIndexes))
	for res, ix := range storeIndexes {
		m[res] = ix.value
	}
	return m
}

// podNodeName is the spec.nodeName of a stored pod; "" when it has none or
// cannot be read (such an object matches no field selector either).
func podNodeName(data []byte) string {
	var p struct {
		Spec struct {
			NodeName string `json:"nodeName"`
		} `json:"spec"`
	}
	if json.Unmarshal(data, &p) != nil {
		return ""
	}
	return p.Spec.NodeName
}

// narrowing is the store narrowing sel allows: ByIndex(v) when the field
// selector requires the resource's indexed field to equal v.
func (sel *selector) narrowing() []raftstore.Narrowing {
	ix, ok := storeIndexes[sel.res.storeKey]
	if !ok || sel.fields.Empty() {
		return nil
	}
	if v, found := sel.fields.RequiresExactMatch(ix.field); found {
		return []raftstore.Narrowing{raftstore.ByIndex(v)}
	}
	return nil
}
