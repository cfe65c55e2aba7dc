package raftstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// canonicalSeeds are documents the fast path must take or refuse correctly:
// what the API server writes, and the shapes the general path handles
// differently.
var canonicalSeeds = []string{
	`{"apiVersion":"v1","kind":"Pod","metadata":{"creationTimestamp":null,"labels":{"app":"x"},"name":"a","namespace":"ns1"},"spec":{"containers":[{"image":"busybox","name":"c"}]},"status":{}}`,
	`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","generateName":"a-","namespace":"ns1","uid":"u","resourceVersion":"7","generation":3,"creationTimestamp":"2026-01-02T03:04:05Z","deletionTimestamp":null},"spec":{"x":[1,-2.5e3,true,false,null,"s\"\\\/\b\f\n\r\t\u00e9"]}}`,
	`{"metadata":{"name":"a"}}`,
	`{"metadata":null,"spec":{}}`,
	`{"spec":{"a":1}}`,
	`{}`,
	`{"a":1,"a":2,"metadata":{}}`,
	`{"metadata":{"name":"a","name":"b"}}`,
	`{"metadata": {"name":"a"}}`,
	` {"metadata":{}}`,
	`{"metadata":{"annotations":{"x":"<b>&amp;</b>"}}}`,
	"{\"metadata\":{\"annotations\":{\"x\":\"\u2028\"}}}",
	`{"metadata":{"annotations":{"x":"\u003cb\u003e"}}}`,
	`{"metad\u0061ta":{"name":"x"}}`,
	`{"métadata":{}}`,
	`{"metadata":{"name":"\u0061","namespace":"ns1","uid":"\ud800","generation":"2"}}`,
	`{"metadata":{"generation":1.5,"uid":7},"spec":{"b":1,"a":2}}`,
	`{"metadata":{"generation":9223372036854775807}}`,
	`{"metadata":{},"spec":{"x":01}}`,
	`{"metadata":{},"spec":[1,]}`,
	`{"metadata":{},"spec":"\x"}`,
	`{"metadata":[]}`,
	`{"metadata":{}}x`,
	`null`,
	`[]`,
	`{"metadata":{"name":"a"},"zeta":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}`,
	"{\"metadata\":{\"name\":\"\xff\"}}",
}

// FuzzCanonical holds the fast path (docView) to the general one (parseDoc,
// set, encode): whenever viewDoc accepts a document, every transformation
// Apply and Create make must give the same bytes both ways, and the result
// must be canonical itself. scanCommand must agree with json.Unmarshal
// whenever it accepts.
func FuzzCanonical(f *testing.F) {
	for i, s := range canonicalSeeds {
		f.Add([]byte(s), []byte(canonicalSeeds[(i+1)%len(canonicalSeeds)]), "a", "ns1", uint64(i+1))
	}
	f.Add([]byte(canonicalSeeds[0]), []byte(canonicalSeeds[1]), "<a>", "", uint64(1<<63))
	f.Fuzz(func(t *testing.T, data, prev []byte, name, ns string, index uint64) {
		key := Key{Resource: "pods", Namespace: ns, Name: name}
		checkCanonical(t, key, data, prev, index)
		checkCommand(t, data)
	})
}

func TestCanonicalSeeds(t *testing.T) {
	for i, s := range canonicalSeeds {
		for j, p := range canonicalSeeds {
			for _, key := range []Key{podA, nodeX, {Resource: "pods", Namespace: "a&b", Name: "x\u2028y"}} {
				t.Run(fmt.Sprintf("%d/%d/%s", i, j, key), func(t *testing.T) {
					checkCanonical(t, key, []byte(s), []byte(p), uint64(i*100+j+1))
				})
			}
		}
		checkCommand(t, []byte(s))
	}
}

// TestCanonicalTaken checks that what the API server writes takes the fast
// path: otherwise FuzzCanonical would pass while nothing got faster.
func TestCanonicalTaken(t *testing.T) {
	for _, s := range canonicalSeeds[:3] {
		if _, ok := viewDoc([]byte(s)); !ok {
			t.Errorf("viewDoc refused %s", s)
		}
	}
	prepared, err := prepareCreate(podA, []byte(canonicalSeeds[0]), "uid-a", testTime)
	if err != nil {
		t.Fatal(err)
	}
	cmdData, err := json.Marshal(command{Op: opCreate, Key: podA, Data: prepared, Pre: Preconditions{ResourceVersion: 3, UID: "u"}})
	if err != nil {
		t.Fatal(err)
	}
	cmd, ok := scanCommand(cmdData)
	if !ok {
		t.Fatalf("scanCommand refused %s", cmdData)
	}
	if _, ok := viewDoc(cmd.Data); !ok {
		t.Errorf("viewDoc refused a prepared create: %s", cmd.Data)
	}
}

func checkCanonical(t *testing.T, key Key, data, prev []byte, index uint64) {
	t.Helper()
	v, ok := viewDoc(data)
	if !ok {
		return
	}
	if !json.Valid(data) {
		t.Fatalf("viewDoc accepted invalid JSON %q", data)
	}
	same := func(what string, fast, general []byte) {
		t.Helper()
		if !bytes.Equal(fast, general) {
			t.Fatalf("%s of %q: fast and general paths differ:\nfast    %s\ngeneral %s", what, data, fast, general)
		}
		again, ok := viewDoc(fast)
		if !ok {
			t.Fatalf("%s of %q: result is not canonical: %s", what, data, fast)
		}
		if out := again.encode(); !bytes.Equal(out, fast) {
			t.Fatalf("%s of %q: encoding the result again changes it:\n%s\n%s", what, data, fast, out)
		}
	}
	const created = "2026-01-02T03:04:05Z"
	fast, ferr := v.prepareCreate(key, "uid-1", created)
	general, gerr := prepareCreateGeneral(key, data, "uid-1", created)
	if diff := cmp.Diff(fmt.Sprint(gerr), fmt.Sprint(ferr)); diff != "" {
		t.Fatalf("prepareCreate of %q: errors differ (-general +fast):\n%s", data, diff)
	}
	if ferr == nil {
		same("prepareCreate", fast, general)
	}
	if err := validateUpdate(key, data); fmt.Sprint(err) != fmt.Sprint(gerr) {
		t.Fatalf("validateUpdate of %q: %v, want %v", data, err, gerr)
	}
	out, uid := v.created(key, index)
	gout, guid, err := createdDocGeneral(key, data, index)
	if err != nil {
		t.Fatalf("createdDocGeneral of %q: %v", data, err)
	}
	same("created", out, gout)
	if uid != guid {
		t.Fatalf("created of %q: uid %q, general %q", data, uid, guid)
	}
	same("withResourceVersion", v.withResourceVersion(index), withResourceVersionGeneral(data, index))
	if p, ok := viewDoc(prev); ok {
		out, uid := v.updated(key, &p, index)
		gout, guid, err := updatedDocGeneral(key, prev, data, index)
		if err != nil {
			t.Fatalf("updatedDocGeneral of %q over %q: %v", data, prev, err)
		}
		same("updated", out, gout)
		if uid != guid {
			t.Fatalf("updated of %q: uid %q, general %q", data, uid, guid)
		}
	}
	if d, err := parseDoc(data); err != nil || d.str(fieldUID) != v.str(fieldUID) {
		t.Fatalf("uid of %q: %q, general %v", data, v.str(fieldUID), err)
	}
}

// checkCommand decodes data as a command both ways, and a command holding
// data (when it is JSON).
func checkCommand(t *testing.T, data []byte) {
	t.Helper()
	inputs := [][]byte{data}
	if json.Valid(data) {
		for _, cmd := range []command{
			{Op: opCreate, Key: podA, Data: data},
			{Op: opUpdate, Key: Key{Resource: "pods", Name: "n\u00e9"}, Data: data, Pre: Preconditions{ResourceVersion: 7, UID: "u<"}},
		} {
			b, err := json.Marshal(cmd)
			if err != nil {
				t.Fatal(err)
			}
			inputs = append(inputs, b)
		}
	}
	for _, b := range inputs {
		fast, ok := scanCommand(b)
		if !ok {
			continue
		}
		var want command
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatalf("scanCommand accepted %q, json.Unmarshal refuses it: %v", b, err)
		}
		if diff := cmp.Diff(want, fast, cmp.Comparer(func(a, b json.RawMessage) bool { return bytes.Equal(a, b) })); diff != "" {
			t.Fatalf("scanCommand of %q (-json.Unmarshal +scanCommand):\n%s", b, diff)
		}
		if got, err := decodeCommand(b); err != nil || !cmp.Equal(got, fast, cmp.Comparer(func(a, b json.RawMessage) bool { return bytes.Equal(a, b) })) {
			t.Fatalf("decodeCommand of %q: %v", b, err)
		}
	}
	if _, err := decodeCommand([]byte(`{"op":"create","key":{"resource":"pods","name":"a"},"data":{}} x`)); !errors.As(err, new(*json.SyntaxError)) {
		t.Fatalf("decodeCommand of trailing garbage: %v, want a syntax error", err)
	}
}

// TestViewDocRefusesTruncated: the fast path refuses every strict prefix of
// a canonical document (a write cut short, a damaged record) without
// reading past its end, so the slow path's decoder reports it.
func TestViewDocRefusesTruncated(t *testing.T) {
	judged := 0
	for _, s := range canonicalSeeds {
		if _, ok := viewDoc([]byte(s)); !ok {
			continue // a seed the fast path refuses whole
		}
		judged++
		for n := range len(s) {
			if _, ok := viewDoc([]byte(s[:n])); ok {
				t.Errorf("viewDoc accepted the first %d bytes of %s", n, s)
			}
		}
	}
	if judged == 0 {
		t.Fatal("no seed takes the fast path")
	}
}
