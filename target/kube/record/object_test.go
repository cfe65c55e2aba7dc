package record

import (
	"encoding/json"
	"testing"
)

// List items come without kind and apiVersion from kube-apiserver; they
// get the list's, first, and keep their own bytes.
func TestWithTypeMeta(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"metadata":{"name":"a"}}`, `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a"}}`},
		{` {"metadata":{"name":"a"} } `, `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a"} }`},
		{`{}`, `{"kind":"Pod","apiVersion":"v1"}`},
		{`{"apiVersion":"v1","metadata":{}}`, `{"kind":"Pod","apiVersion":"v1","metadata":{}}`},
		{`{"kind":"Pod","metadata":{}}`, `{"apiVersion":"v1","kind":"Pod","metadata":{}}`},
		// Already typed, or not an object: unchanged.
		{`{"kind":"Pod","apiVersion":"v1","metadata":{}}`, `{"kind":"Pod","apiVersion":"v1","metadata":{}}`},
		{`[1]`, `[1]`},
		{`{"broken`, `{"broken`},
	} {
		got := string(withTypeMeta(json.RawMessage(tc.in), "Pod", "v1"))
		if got != tc.want {
			t.Errorf("withTypeMeta(%s) = %s, want %s", tc.in, got, tc.want)
		}
		if json.Valid([]byte(tc.in)) && !json.Valid([]byte(got)) {
			t.Errorf("withTypeMeta(%s) = %s: not JSON", tc.in, got)
		}
	}
	// A list with no kind gives nothing to add.
	if got := string(withTypeMeta(json.RawMessage(`{"metadata":{}}`), "", "")); got != `{"metadata":{}}` {
		t.Errorf("withTypeMeta without a kind = %s", got)
	}
}

func TestReadMeta(t *testing.T) {
	m, err := readMeta(json.RawMessage(`{"metadata":{"name":"a","namespace":"n","uid":"u","resourceVersion":"42"}}`))
	if err != nil || m.key() != "n/a" || m.UID != "u" || !m.rvOK || m.rv != 42 {
		t.Errorf("readMeta = %+v, %v", m, err)
	}
	if m, err := readMeta(json.RawMessage(`{"metadata":{"resourceVersion":"x"}}`)); err != nil || m.rvOK {
		t.Errorf("readMeta of a non-numeric rv = %+v, %v", m, err)
	}
	for _, bad := range []string{``, `null`, `{"metadata":1}`, `[`} {
		if _, err := readMeta(json.RawMessage(bad)); err == nil {
			t.Errorf("readMeta(%q) succeeded", bad)
		}
	}
}
