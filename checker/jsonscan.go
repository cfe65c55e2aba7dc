package checker

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"
)

// The JSON reading of the pod scanner (podscan.go): each value read as
// encoding/json reads it, or an error, on which the scanner leaves the
// whole object to encoding/json.

// poInterner shares the strings a scanner reads repeatedly (phases,
// condition types and statuses, names, the UID of one pod's versions): a
// direct-mapped cache, so that a lookup costs a hash of a few bytes and one
// comparison, and a string that misses is allocated as it would be without.
type poInterner [1 << 11]string

// get returns b as a string, shared with an earlier one when cached.
func (t *poInterner) get(b []byte) string {
	n := len(b)
	if n == 0 {
		return ""
	}
	h := uint32(n)*0x9e3779b1 ^ uint32(b[0]) ^ uint32(b[n-1])<<8 ^ uint32(b[n/2])<<16 ^ uint32(b[n*3/4])<<24
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	slot := &t[h&(uint32(len(t))-1)]
	if *slot == string(b) {
		return *slot
	}
	*slot = string(b)
	return *slot
}

// errPoScan is the scanner's only error: the input is not what it reads.
var errPoScan = errors.New("unexpected pod JSON")

func (s *poScanner) ws() {
	for s.i < len(s.d) {
		switch s.d[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, or 0 at the end.
func (s *poScanner) peek() byte {
	if s.i < len(s.d) {
		if c := s.d[s.i]; c > ' ' {
			return c // stored objects are compact: no space to skip
		}
	}
	s.ws()
	if s.i < len(s.d) {
		return s.d[s.i]
	}
	return 0
}

// null consumes a null, reporting whether there was one.
func (s *poScanner) null() bool {
	if s.peek() == 'n' && bytes.HasPrefix(s.d[s.i:], []byte("null")) {
		s.i += 4
		return true
	}
	return false
}

// rawString returns the bytes of a string without its quotes, and whether
// only encoding/json reads them right: they hold escapes, or bytes that
// are not UTF-8 (which it replaces). A control character or a bad escape
// is an error, as it is for encoding/json.
func (s *poScanner) rawString() ([]byte, bool, error) {
	if s.peek() != '"' {
		return nil, false, errPoScan
	}
	start := s.i + 1
	// Most strings are plain ASCII: the first byte that is not ends them.
	// Eight bytes at a time while none is.
	j := start
	for j+8 <= len(s.d) && poPlain8(binary.LittleEndian.Uint64(s.d[j:])) {
		j += 8
	}
	for j < len(s.d) && poPlain[s.d[j]] {
		j++
	}
	if j < len(s.d) && s.d[j] == '"' {
		s.i = j + 1
		return s.d[start:j], false, nil
	}
	slow, ascii := false, true
	for ; j < len(s.d); j++ {
		switch c := s.d[j]; {
		case c == '"':
			s.i = j + 1
			raw := s.d[start:j]
			if !ascii && !slow {
				slow = !utf8.Valid(raw)
			}
			return raw, slow, nil
		case c == '\\':
			n := poEscape(s.d[j+1:])
			if n == 0 {
				return nil, false, errPoScan
			}
			slow = true
			j += n
		case c < 0x20:
			return nil, false, errPoScan
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false, errPoScan
}

// poPlain marks the bytes a string holds as they are: printable ASCII but
// the quote and the backslash.
var poPlain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// poPlain8 reports whether the eight bytes of x are all poPlain: none is a
// quote, a backslash, a control character or above ASCII. (Each test is
// exact about whether some byte matches, though not about which.)
func poPlain8(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote, backslash := x^(ones*'"'), x^(ones*'\\')
	bad := (quote - ones) &^ quote
	bad |= (backslash - ones) &^ backslash
	bad |= (x - ones*0x20) &^ x
	return (bad|x)&highs == 0
}

// poEscape returns the length of the valid JSON escape that b begins with
// (after its backslash), or 0.
func poEscape(b []byte) int {
	if len(b) == 0 {
		return 0
	}
	switch b[0] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 1
	case 'u':
		if len(b) < 5 {
			return 0
		}
		for _, c := range b[1:5] {
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return 0
			}
		}
		return 5
	}
	return 0
}

// str reads a string (null leaves *dst as it is, as encoding/json does).
func (s *poScanner) str(dst *string) error {
	if s.null() {
		return nil
	}
	start := s.i
	raw, slow, err := s.rawString()
	if err != nil {
		return err
	}
	switch {
	case slow:
		return json.Unmarshal(s.d[start:s.i], dst)
	case s.intern != nil:
		*dst = s.intern.get(raw)
	default:
		*dst = string(raw)
	}
	return nil
}

// key reads an object key and its colon. Escaped and non-ASCII keys are
// left to encoding/json, which folds case in Unicode when it matches keys
// to fields (a Kelvin sign matches k).
func (s *poScanner) key() ([]byte, error) {
	if s.peek() != '"' {
		return nil, errPoScan
	}
	start := s.i + 1
	j := start
	for j+8 <= len(s.d) && poPlain8(binary.LittleEndian.Uint64(s.d[j:])) {
		j += 8
	}
	for j < len(s.d) && poPlain[s.d[j]] {
		j++
	}
	if j >= len(s.d) || s.d[j] != '"' {
		return nil, errPoScan // not plain ASCII
	}
	s.i = j + 1
	if s.peek() != ':' {
		return nil, errPoScan
	}
	s.i++
	return s.d[start:j], nil
}

// enter consumes the opening of an object ('{') or array ('['), reporting
// false for a null, which holds nothing.
func (s *poScanner) enter(open byte) (bool, error) {
	if s.null() {
		return false, nil
	}
	if s.peek() != open {
		return false, errPoScan
	}
	s.i++
	return true, nil
}

// next moves to the next member of an entered object or array: it
// consumes the separator before it (none for the first), or the closing
// byte, and then reports false.
func (s *poScanner) next(close byte, first bool) (bool, error) {
	switch c := s.peek(); {
	case c == close:
		s.i++
		return false, nil
	case first:
		return true, nil
	case c == ',':
		s.i++
		return true, nil
	}
	return false, errPoScan
}

// poMaxDepth bounds the nesting of a value skip reads; deeper ones are
// left to encoding/json, which has a bound of its own.
const poMaxDepth = 1000

// skip reads any value, checking that it is JSON.
func (s *poScanner) skip() error { return s.skipNested(0) }

func (s *poScanner) skipNested(depth int) error {
	switch s.peek() {
	case '"':
		_, _, err := s.rawString()
		return err
	case '{':
		if depth >= poMaxDepth {
			return errPoScan
		}
		s.i++
		for first := true; ; first = false {
			in, err := s.next('}', first)
			if err != nil || !in {
				return err
			}
			if _, _, err := s.rawString(); err != nil {
				return err
			}
			if s.peek() != ':' {
				return errPoScan
			}
			s.i++
			if err := s.skipNested(depth + 1); err != nil {
				return err
			}
		}
	case '[':
		if depth >= poMaxDepth {
			return errPoScan
		}
		s.i++
		for first := true; ; first = false {
			in, err := s.next(']', first)
			if err != nil || !in {
				return err
			}
			if err := s.skipNested(depth + 1); err != nil {
				return err
			}
		}
	}
	switch v := s.scalar(); string(v) {
	case "true", "false", "null":
		return nil
	default:
		if !poNumber(v) {
			return errPoScan
		}
	}
	return nil
}

// poNumber reports whether b is a JSON number.
func poNumber(b []byte) bool {
	digits := func(i int) int {
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		return i
	}
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digits(i)
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return false
		}
		i = j
	}
	return i == len(b)
}

// scalar returns the bytes of a number or literal.
func (s *poScanner) scalar() []byte {
	s.ws()
	start := s.i
	for s.i < len(s.d) {
		switch s.d[s.i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return s.d[start:s.i]
		}
		s.i++
	}
	return s.d[start:s.i]
}

func (s *poScanner) int(dst *int) error {
	if s.null() {
		return nil
	}
	v := s.scalar()
	if !poNumber(v) {
		return errPoScan
	}
	n, err := strconv.Atoi(string(v))
	if err != nil {
		return errPoScan
	}
	*dst = n
	return nil
}

func (s *poScanner) int64p(dst **int64) error {
	if s.null() {
		*dst = nil
		return nil
	}
	v := s.scalar()
	if !poNumber(v) {
		return errPoScan
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return errPoScan
	}
	*dst = &n
	return nil
}

func (s *poScanner) bool(dst *bool) error {
	if s.null() {
		return nil
	}
	switch string(s.scalar()) {
	case "true":
		*dst = true
	case "false":
		*dst = false
	default:
		return errPoScan
	}
	return nil
}

// object reads an object, calling field with the key of each member to
// read its value; a null holds no members. field is called, not stored,
// so a closure passed to it stays on the stack.
func (s *poScanner) object(field func(key []byte) error) error {
	in, err := s.enter('{')
	for first := true; in && err == nil; first = false {
		if in, err = s.next('}', first); !in || err != nil {
			break
		}
		var k []byte
		if k, err = s.key(); err != nil {
			break
		}
		err = field(k)
	}
	return err
}

// array reads an array, calling elem to read each element; a null holds
// none.
func (s *poScanner) array(elem func() error) error {
	in, err := s.enter('[')
	for first := true; in && err == nil; first = false {
		if in, err = s.next(']', first); !in || err != nil {
			break
		}
		err = elem()
	}
	return err
}

// poList reads an array into *dst, each element with elem, as
// encoding/json does: null makes *dst nil and [] an empty slice, and the
// elements are read over those of *dst's backing array (what a repeated
// key read there before), a new element only past its capacity. A list
// read afresh is read into scratch and copied out at its length, or, when
// cache holds a list read from the same text, is that list: lists are
// shared between objects, and never changed (a repeated key reads over a
// copy).
func poList[T any](s *poScanner, dst *[]T, scratch *[]T, cache *poListCache[T], elem func(*T) error) error {
	if s.peek() != '[' {
		if !s.null() {
			return errPoScan
		}
		*dst = nil
		return nil
	}
	if cap(*dst) == 0 {
		var slot *poCachedList[T]
		if cache != nil {
			slot = cache.slot(s.d[s.i:])
			if len(slot.raw) > 0 && bytes.HasPrefix(s.d[s.i:], slot.raw) {
				s.i += len(slot.raw)
				*dst = slot.list
				return nil
			}
		}
		start := s.i
		var zero T
		list := (*scratch)[:0]
		err := s.array(func() error {
			list = append(list, zero)
			return elem(&list[len(list)-1])
		})
		*scratch = list
		if err != nil {
			return err
		}
		*dst = append(make([]T, 0, len(list)), list...)
		if slot != nil {
			slot.raw, slot.list = s.d[start:s.i], *dst
		}
		return nil
	}
	own := make([]T, len(*dst), cap(*dst))
	copy(own, (*dst)[:cap(*dst)])
	if statuses, ok := any(own).([]poContainerStatus); ok {
		// What they point to may be shared too.
		for i := range statuses[:cap(statuses)] {
			statuses[i].State, statuses[i].LastState = statuses[i].State.clone(), statuses[i].LastState.clone()
		}
	}
	list := own[:0]
	err := s.array(func() error {
		if len(list) < cap(list) {
			list = list[:len(list)+1]
		} else {
			var zero T
			list = append(list, zero)
		}
		return elem(&list[len(list)-1])
	})
	if len(list) == 0 {
		list = []T{}
	}
	*dst = list
	return err
}

// poListCache holds lists a scanner read lately, by the text they were
// read from: the containers of every version of a pod, and the conditions
// and container statuses of many, repeat, and a list found here is neither
// read nor allocated again. It refers to the text it was read from, which
// must not change while the scanner is in use.
type poListCache[T any] [256]poCachedList[T]

type poCachedList[T any] struct {
	raw  []byte
	list []T
}

// slot returns where a list read from the start of d is cached: by a hash
// of d's first 256 bytes, eight at a time.
func (c *poListCache[T]) slot(d []byte) *poCachedList[T] {
	n := min(len(d), 256) &^ 7
	h := uint64(n)
	for i := 0; i < n; i += 8 {
		h = (h ^ binary.LittleEndian.Uint64(d[i:])) * 0x100000001b3
	}
	return &c[(h^h>>29)%uint64(len(c))]
}

// poOptional reads an object into *dst with read (a new T when *dst is
// nil, else over what a repeated key read there), or a null into nil, as
// encoding/json does for a pointer field.
func poOptional[T any](s *poScanner, dst **T, read func(*T) error) error {
	if s.peek() != '{' {
		if !s.null() {
			return errPoScan
		}
		*dst = nil
		return nil
	}
	if *dst == nil {
		*dst = new(T)
	}
	return read(*dst)
}

// field reads an object of which only the string field name matters.
func (s *poScanner) field(name string, dst *string) error {
	return s.object(func(k []byte) error {
		if string(k) == name {
			return s.str(dst)
		}
		return s.other(k)
	})
}
