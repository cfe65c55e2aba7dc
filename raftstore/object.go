package raftstore

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"time"
)

// The store treats objects generically: it reads and writes only these
// metadata fields and keeps everything else byte for byte (modulo key order,
// which becomes sorted, and spacing; see canonical.go). In particular graceful-deletion state
// (metadata.deletionTimestamp, metadata.deletionGracePeriodSeconds,
// finalizers) is whatever the last Update wrote; enforcing the deletion rules
// is the API server's job.
const (
	fieldMetadata          = "metadata"
	fieldSpec              = "spec"
	fieldName              = "name"
	fieldNamespace         = "namespace"
	fieldUID               = "uid"
	fieldCreationTimestamp = "creationTimestamp"
	fieldResourceVersion   = "resourceVersion"
	fieldGeneration        = "generation"
	fieldDeletionTimestamp = "deletionTimestamp"
)

// doc is an object decoded one level deep, with its metadata decoded one
// level deeper. Re-encoding it sorts keys, which keeps Apply deterministic.
type doc struct {
	top  map[string]json.RawMessage
	meta map[string]json.RawMessage
}

// parseDoc decodes data, which must be a JSON object whose metadata (if any)
// is an object. A missing or null metadata is created empty.
func parseDoc(data []byte) (*doc, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil || top == nil {
		return nil, fmt.Errorf("%w: not a JSON object", ErrInvalid)
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := top[fieldMetadata]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &meta); err != nil || meta == nil {
			return nil, fmt.Errorf("%w: metadata is not a JSON object", ErrInvalid)
		}
	}
	return &doc{top: top, meta: meta}, nil
}

// checkKey verifies that metadata.name and metadata.namespace, when present,
// agree with the key the object is stored under.
func (d *doc) checkKey(k Key) error {
	return checkNameAndNamespace(d.str(fieldName), d.str(fieldNamespace), k)
}

func checkNameAndNamespace(name, ns string, k Key) error {
	if name != "" && name != k.Name {
		return fmt.Errorf("%w: metadata.name %q does not match key %s", ErrInvalid, name, k)
	}
	if ns != "" && ns != k.Namespace {
		return fmt.Errorf("%w: metadata.namespace %q does not match key %s", ErrInvalid, ns, k)
	}
	return nil
}

// str returns a string metadata field, or "" if absent or not a string.
func (d *doc) str(field string) string {
	var s string
	if raw, ok := d.meta[field]; ok {
		_ = json.Unmarshal(raw, &s)
	}
	return s
}

// int returns an integer metadata field, or 0 if absent or not an integer.
func (d *doc) int(field string) int64 {
	var n int64
	if raw, ok := d.meta[field]; ok {
		_ = json.Unmarshal(raw, &n)
	}
	return n
}

// has reports whether a metadata field is present and not null.
func (d *doc) has(field string) bool {
	raw, ok := d.meta[field]
	return ok && string(raw) != "null"
}

// set sets a metadata field to v's JSON encoding.
func (d *doc) set(field string, v any) {
	raw, err := json.Marshal(v)
	if err != nil {
		// Only strings and integers are set; they always encode.
		panic(fmt.Sprintf("raftstore: encoding metadata.%s: %v", field, err))
	}
	d.meta[field] = raw
}

// copyField copies a metadata field from another doc, or removes it if the
// other has none.
func (d *doc) copyField(from *doc, field string) {
	if raw, ok := from.meta[field]; ok {
		d.meta[field] = raw
	} else {
		delete(d.meta, field)
	}
}

// encode re-encodes the doc with sorted keys.
func (d *doc) encode() []byte {
	meta, err := json.Marshal(d.meta)
	if err != nil {
		panic(fmt.Sprintf("raftstore: encoding metadata: %v", err))
	}
	d.top[fieldMetadata] = meta
	out, err := json.Marshal(d.top)
	if err != nil {
		panic(fmt.Sprintf("raftstore: encoding object: %v", err))
	}
	return out
}

// withResourceVersion returns data with metadata.resourceVersion set to rv.
func withResourceVersion(data []byte, rv uint64) []byte {
	if v, ok := viewDoc(data); ok {
		return v.withResourceVersion(rv)
	}
	return withResourceVersionGeneral(data, rv)
}

func (v *docView) withResourceVersion(rv uint64) []byte {
	return v.encode(metaEdit{fieldResourceVersion, jsonUintString(rv)})
}

func withResourceVersionGeneral(data []byte, rv uint64) []byte {
	d, err := parseDoc(data)
	if err != nil {
		// Stored objects were validated when written.
		panic(fmt.Sprintf("raftstore: stored object is invalid: %v", err))
	}
	d.set(fieldResourceVersion, strconv.FormatUint(rv, 10))
	return d.encode()
}

// bumpsGeneration reports whether an update from old to new increments
// metadata.generation, as kube-apiserver does: when the top-level "spec"
// differs (comparing decoded values, so key order and spacing do not count),
// and when a graceful deletion begins (deletionTimestamp set for the first
// time), so that controllers comparing observedGeneration see it.
func bumpsGeneration(old, new *doc) bool {
	a, aok := old.top[fieldSpec]
	b, bok := new.top[fieldSpec]
	return generationBumps(old.has(fieldDeletionTimestamp), new.has(fieldDeletionTimestamp), a, aok, b, bok)
}

// generationBumps is bumpsGeneration on the parts it reads: whether each
// version has a deletionTimestamp, and each version's raw spec.
func generationBumps(oldDeleting, newDeleting bool, a []byte, aok bool, b []byte, bok bool) bool {
	if !oldDeleting && newDeleting {
		return true
	}
	if aok != bok {
		return true
	}
	if !aok || bytes.Equal(a, b) {
		return false
	}
	return !reflect.DeepEqual(decodeAny(a), decodeAny(b))
}

// decodeAny decodes JSON keeping numbers exact.
func decodeAny(raw []byte) any {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return string(raw)
	}
	return v
}

// prepareCreate validates data for key and stamps the fields assigned by the
// proposing member (uid, creationTimestamp), so that Apply needs neither a
// clock nor randomness.
func prepareCreate(key Key, data []byte, uid string, now time.Time) ([]byte, error) {
	created := now.UTC().Truncate(time.Second).Format(time.RFC3339)
	if v, ok := viewDoc(data); ok {
		return v.prepareCreate(key, uid, created)
	}
	return prepareCreateGeneral(key, data, uid, created)
}

func (v *docView) prepareCreate(key Key, uid, created string) ([]byte, error) {
	if err := v.checkKey(key); err != nil {
		return nil, err
	}
	return v.encode(metaEdit{fieldUID, jsonString(uid)}, metaEdit{fieldCreationTimestamp, jsonString(created)}), nil
}

func prepareCreateGeneral(key Key, data []byte, uid, created string) ([]byte, error) {
	d, err := parseDoc(data)
	if err != nil {
		return nil, err
	}
	if err := d.checkKey(key); err != nil {
		return nil, err
	}
	d.set(fieldUID, uid)
	d.set(fieldCreationTimestamp, created)
	return d.encode(), nil
}

// validateUpdate checks that data is an object that may be stored under key.
func validateUpdate(key Key, data []byte) error {
	if v, ok := viewDoc(data); ok {
		return v.checkKey(key)
	}
	d, err := parseDoc(data)
	if err != nil {
		return err
	}
	return d.checkKey(key)
}

// createdDoc is what Apply stores for a create of data under key at index:
// data with metadata.generation 1, metadata.resourceVersion index and
// metadata.name and metadata.namespace from key; and its uid.
func createdDoc(key Key, data []byte, index uint64) ([]byte, string, error) {
	if v, ok := viewDoc(data); ok {
		out, uid := v.created(key, index)
		return out, uid, nil
	}
	return createdDocGeneral(key, data, index)
}

func (v *docView) created(key Key, index uint64) ([]byte, string) {
	var buf [4]metaEdit
	edits := append(buf[:0],
		metaEdit{fieldGeneration, []byte("1")},
		metaEdit{fieldResourceVersion, jsonUintString(index)},
		metaEdit{fieldName, jsonString(key.Name)})
	if key.Namespace != "" {
		edits = append(edits, metaEdit{fieldNamespace, jsonString(key.Namespace)})
	}
	return v.encode(edits...), v.str(fieldUID)
}

func createdDocGeneral(key Key, data []byte, index uint64) ([]byte, string, error) {
	d, err := parseDoc(data)
	if err != nil {
		return nil, "", err
	}
	d.set(fieldGeneration, 1)
	d.set(fieldResourceVersion, strconv.FormatUint(index, 10))
	setKey(d, key)
	return d.encode(), d.str(fieldUID), nil
}

// updatedDoc is what Apply stores for an update of prev (stored) to data
// under key at index: data with uid and creationTimestamp kept from prev,
// the generation carried over (and incremented, see bumpsGeneration), the
// resourceVersion index and name and namespace from key; and its uid.
func updatedDoc(key Key, prev, data []byte, index uint64) ([]byte, string, error) {
	if v, ok := viewDoc(data); ok {
		if p, ok := viewDoc(prev); ok {
			out, uid := v.updated(key, &p, index)
			return out, uid, nil
		}
	}
	return updatedDocGeneral(key, prev, data, index)
}

func (v *docView) updated(key Key, prev *docView, index uint64) ([]byte, string) {
	uid, _ := prev.metaRaw(fieldUID)
	created, _ := prev.metaRaw(fieldCreationTimestamp)
	a, aok := prev.topRaw(fieldSpec)
	b, bok := v.topRaw(fieldSpec)
	gen := prev.int(fieldGeneration)
	if generationBumps(prev.has(fieldDeletionTimestamp), v.has(fieldDeletionTimestamp), a, aok, b, bok) {
		gen++
	}
	var buf [6]metaEdit
	edits := append(buf[:0],
		metaEdit{fieldUID, uid},
		metaEdit{fieldCreationTimestamp, created},
		metaEdit{fieldGeneration, strconv.AppendInt(nil, gen, 10)},
		metaEdit{fieldResourceVersion, jsonUintString(index)},
		metaEdit{fieldName, jsonString(key.Name)})
	if key.Namespace != "" {
		edits = append(edits, metaEdit{fieldNamespace, jsonString(key.Namespace)})
	}
	return v.encode(edits...), rawString(uid)
}

func updatedDocGeneral(key Key, prev, data []byte, index uint64) ([]byte, string, error) {
	d, err := parseDoc(data)
	if err != nil {
		return nil, "", err
	}
	old, err := parseDoc(prev)
	if err != nil {
		return nil, "", err
	}
	d.copyField(old, fieldUID)
	d.copyField(old, fieldCreationTimestamp)
	gen := old.int(fieldGeneration)
	if bumpsGeneration(old, d) {
		gen++
	}
	d.set(fieldGeneration, gen)
	d.set(fieldResourceVersion, strconv.FormatUint(index, 10))
	setKey(d, key)
	return d.encode(), d.str(fieldUID), nil
}

// setKey sets metadata.name, and metadata.namespace when the key has one.
func setKey(d *doc, key Key) {
	d.set(fieldName, key.Name)
	if key.Namespace != "" {
		d.set(fieldNamespace, key.Namespace)
	}
}

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("raftstore: reading randomness: %v", err))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}
