package history

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"mime"
	"net/http"
	"strconv"
)

// The request bodies the recorder reads are Kubernetes objects in JSON or in
// Kubernetes' protobuf envelope, which client-go sends by default. The
// protobuf is read here with a few lines of wire-format decoding rather than
// apimachinery's generated code, so that history keeps depending on the
// standard library alone; the tests check it against apimachinery's encoder.

// protobufMagic starts every Kubernetes protobuf body; a runtime.Unknown
// message follows it.
var protobufMagic = []byte("k8s\x00")

// Field numbers of the protobuf messages read here (k8s.io/apimachinery
// runtime/generated.proto, meta/v1/generated.proto, k8s.io/api
// policy/v1/generated.proto, core/v1/generated.proto).
const (
	unknownRaw             = 2 // runtime.Unknown.raw
	deleteOptionsGrace     = 1 // metav1.DeleteOptions.gracePeriodSeconds
	evictionDeleteOptions  = 2 // policyv1.Eviction.deleteOptions
	objectMeta             = 1 // metadata of every object (Pod, Node, …)
	objectMetaName         = 1 // metav1.ObjectMeta.name
	wireVarint, wireBytes  = 0, 2
	wireFixed64, wireFix32 = 1, 5
)

// bodyKind says what a request body holds that the recorder wants.
type bodyKind int

const (
	bodyNone          bodyKind = iota
	bodyDeleteOptions          // a deletion of pods: DeleteOptions
	bodyEviction               // an eviction: Eviction{deleteOptions}
	bodyCreated                // a create of an object the URL does not name
)

// wantedBody says which facts of call's request body the recorder keeps.
func wantedBody(call *APICall) bodyKind {
	switch {
	case call.Group == "" && call.Resource == "pods" && call.Subresource == "" &&
		(call.Verb == "delete" || call.Verb == "deletecollection"):
		return bodyDeleteOptions
	case call.Group == "" && call.Resource == "pods" && call.Subresource == "eviction" && call.Verb == "create":
		return bodyEviction
	case call.Verb == "create" && call.Name == "" && call.Subresource == "" && call.Resource != "":
		return bodyCreated
	}
	return bodyNone
}

// inspectRequest fills what the recorder reads from a request: the grace
// period of a deletion of pods, and the name of the object a create makes.
// A body it cannot read costs only those facts. As podsafe's API server
// does, a grace period in the body wins over the query parameter.
func inspectRequest(call *APICall, req *http.Request, kind bodyKind, body []byte) {
	if kind == bodyDeleteOptions || kind == bodyEviction {
		if g := req.URL.Query().Get("gracePeriodSeconds"); g != "" {
			if n, err := strconv.ParseInt(g, 10, 64); err == nil {
				call.GracePeriodSeconds = &n
			}
		}
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return
	}
	proto := bytes.HasPrefix(body, protobufMagic)
	if !proto && !isJSONBody(req.Header.Get("Content-Type"), body) {
		return
	}
	switch kind {
	case bodyDeleteOptions, bodyEviction:
		var g *int64
		if proto {
			g = protobufGrace(body, kind == bodyEviction)
		} else {
			g = jsonGrace(body, kind == bodyEviction)
		}
		if g != nil {
			call.GracePeriodSeconds = g
		}
	case bodyCreated:
		if proto {
			call.Name = protobufName(body)
		} else {
			call.Name = jsonName(body)
		}
	}
}

// isJSONBody reports a JSON body: by its content type, or, when that is
// missing, by its first character.
func isJSONBody(contentType string, body []byte) bool {
	if contentType != "" {
		mt, _, err := mime.ParseMediaType(contentType)
		return err == nil && mt == "application/json"
	}
	b := bytes.TrimSpace(body)
	return len(b) > 0 && b[0] == '{'
}

func jsonGrace(body []byte, eviction bool) *int64 {
	type deleteOptions struct {
		GracePeriodSeconds *int64 `json:"gracePeriodSeconds"`
	}
	if eviction {
		var ev struct {
			DeleteOptions *deleteOptions `json:"deleteOptions"`
		}
		if json.Unmarshal(body, &ev) != nil || ev.DeleteOptions == nil {
			return nil
		}
		return ev.DeleteOptions.GracePeriodSeconds
	}
	var opts deleteOptions
	if json.Unmarshal(body, &opts) != nil {
		return nil
	}
	return opts.GracePeriodSeconds
}

func jsonName(body []byte) string {
	var obj struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if json.Unmarshal(body, &obj) != nil {
		return ""
	}
	return obj.Metadata.Name
}

// protobufGrace reads DeleteOptions.gracePeriodSeconds from a protobuf
// DeleteOptions or Eviction body.
func protobufGrace(body []byte, eviction bool) *int64 {
	msg, ok := protobufObject(body)
	if !ok {
		return nil
	}
	if eviction {
		if msg, ok = protoMessage(msg, evictionDeleteOptions); !ok {
			return nil
		}
	}
	v, ok := protoVarint(msg, deleteOptionsGrace)
	if !ok {
		return nil
	}
	g := int64(v) // int64 fields are two's complement varints
	return &g
}

// protobufName reads metadata.name from a protobuf object body.
func protobufName(body []byte) string {
	msg, ok := protobufObject(body)
	if !ok {
		return ""
	}
	meta, ok := protoMessage(msg, objectMeta)
	if !ok {
		return ""
	}
	name, _ := protoMessage(meta, objectMetaName)
	return string(name)
}

// protobufObject returns the encoded object inside a Kubernetes protobuf
// envelope (the raw field of its runtime.Unknown).
func protobufObject(body []byte) ([]byte, bool) {
	rest, ok := bytes.CutPrefix(body, protobufMagic)
	if !ok {
		return nil, false
	}
	return protoMessage(rest, unknownRaw)
}

// protoMessage returns the length-delimited field num of msg. Occurrences
// repeated are concatenated, which is how protobuf merges an embedded
// message given more than once. It reports false when the field is absent
// or msg is malformed.
func protoMessage(msg []byte, num uint64) ([]byte, bool) {
	var out []byte
	found := false
	ok := walkProto(msg, func(field, wire uint64, v uint64, b []byte) {
		if field == num && wire == wireBytes {
			out = append(out, b...)
			found = true
		}
	})
	return out, ok && found
}

// protoVarint returns the last varint field num of msg (protobuf's rule for
// a scalar given more than once).
func protoVarint(msg []byte, num uint64) (uint64, bool) {
	var out uint64
	found := false
	ok := walkProto(msg, func(field, wire uint64, v uint64, _ []byte) {
		if field == num && wire == wireVarint {
			out, found = v, true
		}
	})
	return out, ok && found
}

// walkProto calls f for every field of msg with its number, wire type and
// value (varints) or bytes (length-delimited fields). It reports false on
// malformed input or on the deprecated group wire types, which no
// Kubernetes message uses.
func walkProto(msg []byte, f func(field, wire, v uint64, b []byte)) bool {
	for len(msg) > 0 {
		key, n := binary.Uvarint(msg)
		if n <= 0 {
			return false
		}
		msg = msg[n:]
		field, wire := key>>3, key&7
		switch wire {
		case wireVarint:
			v, n := binary.Uvarint(msg)
			if n <= 0 {
				return false
			}
			msg = msg[n:]
			f(field, wire, v, nil)
		case wireBytes:
			l, n := binary.Uvarint(msg)
			if n <= 0 || l > uint64(len(msg)-n) {
				return false
			}
			f(field, wire, 0, msg[n:n+int(l)])
			msg = msg[n+int(l):]
		case wireFixed64:
			if len(msg) < 8 {
				return false
			}
			msg = msg[8:]
		case wireFix32:
			if len(msg) < 4 {
				return false
			}
			msg = msg[4:]
		default:
			return false
		}
	}
	return true
}
