package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// objectMeta is the part of an object's metadata the follower reads.
type objectMeta struct {
	Name            string `json:"name"`
	Namespace       string `json:"namespace"`
	UID             string `json:"uid"`
	ResourceVersion string `json:"resourceVersion"`
	// rv is ResourceVersion parsed; rvOK is false when it does not parse
	// (the record then neither orders nor deduplicates by it).
	rv   uint64
	rvOK bool
}

func (m objectMeta) key() string { return m.Namespace + "/" + m.Name }

// errNoObject: a watch event or list item with no object.
var errNoObject = errors.New("no object")

// readMeta reads the metadata of a JSON object.
func readMeta(obj json.RawMessage) (objectMeta, error) {
	if !present(obj) {
		return objectMeta{}, errNoObject
	}
	var o struct {
		Metadata objectMeta `json:"metadata"`
	}
	if err := json.Unmarshal(obj, &o); err != nil {
		return objectMeta{}, fmt.Errorf("decoding object metadata: %w", err)
	}
	m := o.Metadata
	if n, err := strconv.ParseUint(m.ResourceVersion, 10, 64); err == nil {
		m.rv, m.rvOK = n, true
	}
	return m, nil
}

// withTypeMeta returns obj with kind and apiVersion set when it lacks
// them: a list's items come without them from kube-apiserver, while watch
// events (and the embedded store's objects) carry them. The object's own
// bytes are kept; the missing fields are put first.
func withTypeMeta(obj json.RawMessage, kind, apiVersion string) json.RawMessage {
	var tm struct {
		Kind       *string `json:"kind"`
		APIVersion *string `json:"apiVersion"`
	}
	b := bytes.TrimSpace(obj)
	if json.Unmarshal(b, &tm) != nil || len(b) < 2 || b[0] != '{' {
		return obj
	}
	var head bytes.Buffer
	head.WriteByte('{')
	add := func(field, value string) {
		if value == "" {
			return
		}
		if head.Len() > 1 {
			head.WriteByte(',')
		}
		q, _ := json.Marshal(value)
		head.WriteString(`"` + field + `":`)
		head.Write(q)
	}
	if tm.Kind == nil {
		add("kind", kind)
	}
	if tm.APIVersion == nil {
		add("apiVersion", apiVersion)
	}
	if head.Len() == 1 {
		return obj
	}
	rest := bytes.TrimSpace(b[1:])
	if len(rest) > 0 && rest[0] != '}' {
		head.WriteByte(',')
	}
	head.Write(rest)
	return head.Bytes()
}
