package raftstore

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// Stored objects are canonical JSON: compact, the members of the top-level
// object and of its metadata sorted by key, and '<', '>', '&', U+2028 and
// U+2029 escaped, exactly as encoding/json writes a map of raw values. The
// general path (parseDoc, set, encode) gets there by decoding into maps and
// encoding again. The functions here give the same bytes in one pass over a
// document whose values are already canonical, as everything encoding/json
// writes is: they split the two sorted levels into members without decoding
// any value, validating every byte as they go, and report !ok for anything
// else (whitespace, unusual keys, duplicate keys, characters encoding/json
// would escape), which then takes the general path. Both paths are pure
// functions of their input, so every member stores the same bytes whichever
// one runs; FuzzCanonical holds them to giving the same bytes.

// jsonMember is one member of a JSON object.
type jsonMember struct {
	// key is the key without its quotes: printable ASCII without '"', '\\',
	// '<', '>' or '&', so it reads as it is written.
	key []byte
	val []byte
}

// maxScanDepth bounds the nesting the scanner follows; deeper documents take
// the general path.
const maxScanDepth = 200

// strPlain marks the ASCII bytes that stand for themselves in a canonical
// string: printable, not a quote or backslash, and not one encoding/json
// escapes for HTML.
var strPlain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// skipString returns the end of the canonical string that starts at b[i]
// (a '"').
func skipString(b []byte, i int) (int, bool) {
	for i++; i < len(b); {
		c := b[i]
		if strPlain[c] {
			i++
			continue
		}
		switch {
		case c == '"':
			return i + 1, true
		case c == '\\':
			if i+1 >= len(b) {
				return 0, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return 0, false
				}
				i += 6
			default:
				return 0, false
			}
		case c >= 0x80:
			// U+2028 and U+2029 are escaped by encoding/json.
			if c == 0xE2 && i+2 < len(b) && b[i+1] == 0x80 && b[i+2]&^1 == 0xA8 {
				return 0, false
			}
			i++
		default:
			// Control characters are invalid; '<', '>', '&' not canonical.
			return 0, false
		}
	}
	return 0, false
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// skipNumber returns the end of the JSON number that starts at b[i].
func skipNumber(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return 0, false
		}
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return 0, false
		}
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	}
	return i, true
}

// skipValue returns the end of the canonical JSON value that starts at b[i].
func skipValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch c := b[i]; c {
	case '"':
		return skipString(b, i)
	case '{', '[':
		if depth >= maxScanDepth {
			return 0, false
		}
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		i++
		if i < len(b) && b[i] == end {
			return i + 1, true
		}
		for {
			var ok bool
			if c == '{' {
				if i >= len(b) || b[i] != '"' {
					return 0, false
				}
				if i, ok = skipString(b, i); !ok || i >= len(b) || b[i] != ':' {
					return 0, false
				}
				i++
			}
			if i, ok = skipValue(b, i, depth+1); !ok || i >= len(b) {
				return 0, false
			}
			switch b[i] {
			case ',':
				i++
			case end:
				return i + 1, true
			default:
				return 0, false
			}
		}
	case 't':
		return skipLiteral(b, i, "true")
	case 'f':
		return skipLiteral(b, i, "false")
	case 'n':
		return skipLiteral(b, i, "null")
	default:
		return skipNumber(b, i)
	}
}

func skipLiteral(b []byte, i int, lit string) (int, bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, false
	}
	return i + len(lit), true
}

// scanObject splits b, which must be exactly one canonical object, into its
// members, appended to dst; keys must be plain (see jsonMember).
func scanObject(b []byte, dst []jsonMember) ([]jsonMember, bool) {
	if len(b) < 2 || b[0] != '{' {
		return nil, false
	}
	i := 1
	if b[i] == '}' {
		return dst, i+1 == len(b)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return nil, false
		}
		ks := i + 1
		ke := ks
		for ke < len(b) && strPlain[b[ke]] {
			ke++
		}
		if ke >= len(b) || b[ke] != '"' || ke+1 >= len(b) || b[ke+1] != ':' {
			return nil, false
		}
		vs := ke + 2
		ve, ok := skipValue(b, vs, 1)
		if !ok || ve >= len(b) {
			return nil, false
		}
		dst = append(dst, jsonMember{key: b[ks:ke], val: b[vs:ve]})
		switch b[ve] {
		case ',':
			i = ve + 1
		case '}':
			return dst, ve+1 == len(b)
		default:
			return nil, false
		}
	}
}

// sortMembers sorts members by key, as encoding/json orders a map's keys,
// and reports false if a key repeats.
func sortMembers(ms []jsonMember) bool {
	// Insertion sort: objects have a dozen members, mostly in order.
	for i := 1; i < len(ms); i++ {
		for j := i; j > 0 && bytes.Compare(ms[j-1].key, ms[j].key) > 0; j-- {
			ms[j-1], ms[j] = ms[j], ms[j-1]
		}
	}
	for i := 1; i < len(ms); i++ {
		if bytes.Equal(ms[i-1].key, ms[i].key) {
			return false
		}
	}
	return true
}

// docView is a document split into its top-level members and its metadata
// members, each sorted by key, without decoding any value.
type docView struct {
	top  []jsonMember
	meta []jsonMember
}

// viewDoc splits data, which must be a canonical object whose metadata (if
// present and not null) is an object, and whose top-level and metadata keys
// are plain and unique.
func viewDoc(data []byte) (docView, bool) {
	var v docView
	top, ok := scanObject(data, make([]jsonMember, 0, 8))
	if !ok || !sortMembers(top) {
		return docView{}, false
	}
	v.top = top
	v.meta = make([]jsonMember, 0, 16)
	if raw, found := v.topRaw(fieldMetadata); found && string(raw) != "null" {
		if v.meta, ok = scanObject(raw, v.meta); !ok || !sortMembers(v.meta) {
			return docView{}, false
		}
	}
	return v, true
}

func findMember(ms []jsonMember, key string) ([]byte, bool) {
	for _, m := range ms {
		if string(m.key) == key {
			return m.val, true
		}
	}
	return nil, false
}

// topRaw returns the raw value of a top-level member.
func (v *docView) topRaw(key string) ([]byte, bool) { return findMember(v.top, key) }

// metaRaw returns the raw value of a metadata member.
func (v *docView) metaRaw(key string) ([]byte, bool) { return findMember(v.meta, key) }

// str is doc.str: a string metadata field, or "" if absent or not a string.
func (v *docView) str(field string) string {
	raw, _ := v.metaRaw(field)
	return rawString(raw)
}

// int is doc.int: an integer metadata field, or 0.
func (v *docView) int(field string) int64 {
	raw, _ := v.metaRaw(field)
	return rawInt(raw)
}

// has is doc.has: whether a metadata field is present and not null.
func (v *docView) has(field string) bool {
	raw, ok := v.metaRaw(field)
	return ok && string(raw) != "null"
}

// checkKey is doc.checkKey.
func (v *docView) checkKey(k Key) error {
	return checkNameAndNamespace(v.str(fieldName), v.str(fieldNamespace), k)
}

// rawString decodes a raw JSON string as json.Unmarshal into a string does,
// or returns "" when raw is not a string.
func rawString(raw []byte) string {
	if len(raw) >= 2 && raw[0] == '"' && bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &s)
	}
	return s
}

// rawInt decodes a raw JSON value as json.Unmarshal into an int64 does, or
// returns 0 when it is not an integer that fits.
func rawInt(raw []byte) int64 {
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// metaEdit sets a metadata member to val, or removes it when val is nil.
type metaEdit struct {
	key string
	val []byte
}

// encode writes the view with edits applied to its metadata, in canonical
// form: what doc.encode writes for the same document and the same edits.
// Edits name distinct keys.
func (v *docView) encode(edits ...metaEdit) []byte {
	meta := v.meta
	size := 2
	for _, e := range edits {
		size += len(e.key) + len(e.val) + 4
	}
	for _, m := range meta {
		size += len(m.key) + len(m.val) + 4
	}
	metaAt := -1
	for i, m := range v.top {
		if string(m.key) == fieldMetadata {
			metaAt = i
		} else {
			size += len(m.key) + len(m.val) + 4
		}
	}
	size += len(fieldMetadata) + 4
	out := make([]byte, 0, size+2)
	out = append(out, '{')
	wroteMeta := false
	writeMeta := func() {
		if out[len(out)-1] != '{' {
			out = append(out, ',')
		}
		out = append(out, `"metadata":`...)
		out = appendEdited(out, meta, edits)
		wroteMeta = true
	}
	for i, m := range v.top {
		if i == metaAt {
			writeMeta()
			continue
		}
		if !wroteMeta && metaAt < 0 && string(m.key) > fieldMetadata {
			writeMeta()
		}
		if out[len(out)-1] != '{' {
			out = append(out, ',')
		}
		out = appendMember(out, m.key, m.val)
	}
	if !wroteMeta {
		writeMeta()
	}
	return append(out, '}')
}

func appendMember(out, key, val []byte) []byte {
	out = append(out, '"')
	out = append(out, key...)
	out = append(out, '"', ':')
	return append(out, val...)
}

// appendEdited writes the object of members (sorted) with edits applied,
// merging the edits' keys into the order.
func appendEdited(out []byte, members []jsonMember, edits []metaEdit) []byte {
	// The edited keys are few: sort a small copy of them.
	var buf [8]metaEdit
	es := append(buf[:0], edits...)
	for i := 1; i < len(es); i++ {
		for j := i; j > 0 && es[j-1].key > es[j].key; j-- {
			es[j-1], es[j] = es[j], es[j-1]
		}
	}
	out = append(out, '{')
	first := true
	put := func(key string, kb, val []byte) {
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, '"')
		if kb != nil {
			out = append(out, kb...)
		} else {
			out = append(out, key...)
		}
		out = append(out, '"', ':')
		out = append(out, val...)
	}
	i, j := 0, 0
	for i < len(members) || j < len(es) {
		switch {
		case j == len(es) || i < len(members) && string(members[i].key) < es[j].key:
			put("", members[i].key, members[i].val)
			i++
		case i == len(members) || es[j].key < string(members[i].key):
			if es[j].val != nil {
				put(es[j].key, nil, es[j].val)
			}
			j++
		default: // the edit replaces (or removes) the member
			if es[j].val != nil {
				put(es[j].key, nil, es[j].val)
			}
			i++
			j++
		}
	}
	return append(out, '}')
}

// jsonString is json.Marshal(s).
func jsonString(s string) []byte {
	for i := 0; i < len(s); i++ {
		if !strPlain[s[i]] {
			b, _ := json.Marshal(s)
			return b
		}
	}
	out := make([]byte, 0, len(s)+2)
	out = append(out, '"')
	out = append(out, s...)
	return append(out, '"')
}

// jsonUint is json.Marshal of a decimal string of n, as resourceVersion is
// written.
func jsonUintString(n uint64) []byte {
	out := make([]byte, 0, 22)
	out = append(out, '"')
	out = strconv.AppendUint(out, n, 10)
	return append(out, '"')
}
