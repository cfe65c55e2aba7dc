package apiserver

import (
	sigsjson "sigs.k8s.io/json"

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
// cannot be read (such an object matches no field selector either). It runs
// on every pod event of every member, so it walks the JSON once without
// decoding it: the value of key "nodeName" directly inside the top-level
// "spec" object (a label or an annotation of that name is deeper). A value
// that is not a plain string (escapes, null) is decoded. The scan trusts the
// text to be JSON, as the server's own encodings in the store are.
func podNodeName(data []byte) string {
	v, ok := scanNodeName(data)
	if !ok {
		return decodeNodeName(data)
	}
	return v
}

// scanNodeName finds spec.nodeName in a JSON object; ok is false when the
// text is not a well-formed object as far as the scan read, or the value
// is not a plain string.
func scanNodeName(data []byte) (value string, ok bool) {
	depth := 0
	inSpec := false // the object at depth 2 is the top-level spec
	var lastKey []byte
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '"':
			start := i + 1
			j := start
			plain := true
			for ; j < len(data) && data[j] != '"'; j++ {
				if data[j] == '\\' {
					plain = false
					j++
				}
			}
			if j >= len(data) {
				return "", false
			}
			str := data[start:j]
			i = j
			k := i + 1
			for k < len(data) && (data[k] == ' ' || data[k] == '\n' || data[k] == '\t' || data[k] == '\r') {
				k++
			}
			if k < len(data) && data[k] == ':' {
				// A key: remember it (only plain keys can be "spec" or
				// "nodeName" at the depths that matter).
				lastKey = nil
				if plain {
					lastKey = str
				}
				i = k
				if depth == 2 && inSpec && string(lastKey) == "nodeName" {
					k++
					for k < len(data) && (data[k] == ' ' || data[k] == '\n' || data[k] == '\t' || data[k] == '\r') {
						k++
					}
					if k >= len(data) || data[k] != '"' {
						return "", false // null or another type: decode
					}
					end := k + 1
					for end < len(data) && data[end] != '"' {
						if data[end] == '\\' {
							return "", false
						}
						end++
					}
					if end >= len(data) {
						return "", false
					}
					return string(data[k+1 : end]), true
				}
				continue
			}
		case '{', '[':
			depth++
			if c == '{' && depth == 2 && string(lastKey) == "spec" {
				inSpec = true
			}
			lastKey = nil
		case '}', ']':
			if depth == 2 && inSpec && c == '}' {
				return "", true // spec ended without a nodeName
			}
			depth--
			if depth < 0 {
				return "", false
			}
		default:
			if c != ',' && c != ' ' && c != '\n' && c != '\t' && c != '\r' {
				lastKey = nil // inside a scalar value
			}
		}
	}
	return "", depth == 0 && len(data) > 0
}

// decodeNodeName is podNodeName by decoding, case-sensitively as the API
// machinery decodes.
func decodeNodeName(data []byte) string {
	var p struct {
		Spec struct {
			NodeName string `json:"nodeName"`
		} `json:"spec"`
	}
	if sigsjson.UnmarshalCaseSensitivePreserveInts(data, &p) != nil {
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
