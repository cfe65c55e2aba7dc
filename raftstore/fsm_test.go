package raftstore

import (
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"
)

var (
	testTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	podA     = Key{Resource: "pods", Namespace: "ns1", Name: "a"}
	podB     = Key{Resource: "pods", Namespace: "ns2", Name: "b"}
	nodeX    = Key{Resource: "nodes", Name: "x"}
)

func newTestFSM(window int) *fsm {
	return newFSM(newHub(window, nil), slog.New(slog.DiscardHandler))
}

// applyCmd applies cmd at index through the raft.FSM interface.
func applyCmd(t *testing.T, f *fsm, index uint64, cmd command) applyResult {
	t.Helper()
	data, err := json.Marshal(cmd)
	if err != nil {
		t.Fatal(err)
	}
	res, ok := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: data}).(applyResult)
	if !ok {
		t.Fatalf("Apply returned %T", res)
	}
	return res
}

func createCmd(t *testing.T, key Key, uid, body string) command {
	t.Helper()
	data, err := prepareCreate(key, []byte(body), uid, testTime)
	if err != nil {
		t.Fatal(err)
	}
	return command{Op: opCreate, Key: key, Data: data}
}

// metaOf decodes an object's metadata.
func metaOf(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var obj struct {
		Metadata map[string]any `json:"metadata"`
	}
	if err := json.Unmarshal(data, &obj); err != nil {
		t.Fatalf("decoding %s: %v", data, err)
	}
	return obj.Metadata
}

func TestFSMApply(t *testing.T) {
	type step struct {
		name    string
		cmd     func(t *testing.T) command
		wantErr error
		// wantMeta is compared with the resulting object's metadata when
		// wantErr is nil.
		wantMeta map[string]any
	}
	update := func(key Key, body string, pre Preconditions) func(*testing.T) command {
		return func(*testing.T) command {
			return command{Op: opUpdate, Key: key, Data: json.RawMessage(body), Pre: pre}
		}
	}
	del := func(key Key, pre Preconditions) func(*testing.T) command {
		return func(*testing.T) command { return command{Op: opDelete, Key: key, Pre: pre} }
	}
	created := map[string]any{"name": "a", "namespace": "ns1", "uid": "uid-a",
		"creationTimestamp": "2026-01-02T03:04:05Z"}
	with := func(extra map[string]any) map[string]any {
		m := map[string]any{}
		for k, v := range created {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	// Step i is applied at index i+1.
	steps := []step{
		{name: "create", cmd: func(t *testing.T) command {
			return createCmd(t, podA, "uid-a", `{"metadata":{"name":"a","namespace":"ns1","uid":"client-uid","resourceVersion":"99"},"spec":{"x":1,"y":"z"}}`)
		}, wantMeta: with(map[string]any{"generation": 1.0, "resourceVersion": "1"})},
		{name: "create again is ErrExists", cmd: func(t *testing.T) command {
			return createCmd(t, podA, "uid-other", `{"metadata":{"name":"a"}}`)
		}, wantErr: ErrExists},
		{name: "update same spec keeps generation, keeps uid and creationTimestamp",
			cmd:      update(podA, `{"metadata":{"name":"a","namespace":"ns1","uid":"forged","creationTimestamp":"1999-01-01T00:00:00Z","labels":{"l":"v"}},"spec":{"x":1,"y":"z"},"status":{"phase":"Running"}}`, Preconditions{}),
			wantMeta: with(map[string]any{"generation": 1.0, "resourceVersion": "3", "labels": map[string]any{"l": "v"}})},
		{name: "update with spec in another key order keeps generation",
			cmd:      update(podA, `{"spec": {"y": "z", "x": 1}, "metadata":{"name":"a"}}`, Preconditions{ResourceVersion: 3}),
			wantMeta: with(map[string]any{"generation": 1.0, "resourceVersion": "4"})},
		{name: "CAS on stale resourceVersion is ErrConflict",
			cmd: update(podA, `{"metadata":{"name":"a"},"spec":{"x":2}}`, Preconditions{ResourceVersion: 3}), wantErr: ErrConflict},
		{name: "CAS on current resourceVersion with changed spec bumps generation",
			cmd:      update(podA, `{"metadata":{"name":"a"},"spec":{"x":2}}`, Preconditions{ResourceVersion: 4}),
			wantMeta: with(map[string]any{"generation": 2.0, "resourceVersion": "6"})},
		{name: "spec removed bumps generation",
			cmd:      update(podA, `{"metadata":{"name":"a"}}`, Preconditions{UID: "uid-a"}),
			wantMeta: with(map[string]any{"generation": 3.0, "resourceVersion": "7"})},
		{name: "status-only change keeps generation",
			cmd:      update(podA, `{"metadata":{"name":"a"},"status":{"phase":"Failed"}}`, Preconditions{}),
			wantMeta: with(map[string]any{"generation": 3.0, "resourceVersion": "8"})},
		{name: "the start of a graceful deletion bumps the generation, as in kube-apiserver",
			cmd: update(podA, `{"metadata":{"name":"a","deletionTimestamp":"2026-01-02T03:05:00Z","deletionGracePeriodSeconds":30}}`, Preconditions{}),
			wantMeta: with(map[string]any{"generation": 4.0, "resourceVersion": "9",
				"deletionTimestamp": "2026-01-02T03:05:00Z", "deletionGracePeriodSeconds": 30.0})},
		{name: "UID precondition mismatch on update is ErrConflict",
			cmd: update(podA, `{"metadata":{"name":"a"}}`, Preconditions{UID: "uid-b"}), wantErr: ErrConflict},
		{name: "update of missing key is ErrNotFound",
			cmd: update(podB, `{"metadata":{"name":"b"}}`, Preconditions{}), wantErr: ErrNotFound},
		{name: "UID precondition mismatch on delete is ErrConflict",
			cmd: del(podA, Preconditions{UID: "uid-b"}), wantErr: ErrConflict},
		{name: "RV precondition mismatch on delete is ErrConflict",
			cmd: del(podA, Preconditions{ResourceVersion: 8}), wantErr: ErrConflict},
		{name: "delete returns last state at the deletion index",
			cmd: del(podA, Preconditions{ResourceVersion: 9, UID: "uid-a"}),
			wantMeta: with(map[string]any{"generation": 4.0, "resourceVersion": "14",
				"deletionTimestamp": "2026-01-02T03:05:00Z", "deletionGracePeriodSeconds": 30.0})},
		{name: "delete of missing key is ErrNotFound", cmd: del(podA, Preconditions{}), wantErr: ErrNotFound},
		{name: "update of deleted key is ErrNotFound",
			cmd: update(podA, `{"metadata":{"name":"a"}}`, Preconditions{}), wantErr: ErrNotFound},
		{name: "create after delete starts at generation 1 with a new uid", cmd: func(t *testing.T) command {
			return createCmd(t, podA, "uid-a2", `{"metadata":{"name":"a"},"spec":{"x":1}}`)
		}, wantMeta: map[string]any{"name": "a", "namespace": "ns1", "uid": "uid-a2", "creationTimestamp": "2026-01-02T03:04:05Z",
			"generation": 1.0, "resourceVersion": "17"}},
		{name: "undecodable command is ErrInvalid", cmd: func(*testing.T) command {
			return command{Op: "frobnicate", Key: podA}
		}, wantErr: ErrInvalid},
	}

	f := newTestFSM(100)
	for i, st := range steps {
		index := uint64(i + 1)
		res := applyCmd(t, f, index, st.cmd(t))
		if !errors.Is(res.err, st.wantErr) || (st.wantErr == nil) != (res.err == nil) {
			t.Fatalf("step %d %q: err = %v, want %v", index, st.name, res.err, st.wantErr)
		}
		if got := f.appliedIndex(); got != index {
			t.Errorf("step %d %q: applied index = %d, want %d", index, st.name, got, index)
		}
		if st.wantErr != nil {
			continue
		}
		if res.obj.RV != index {
			t.Errorf("step %d %q: RV = %d, want the raft index %d", index, st.name, res.obj.RV, index)
		}
		if diff := cmp.Diff(st.wantMeta, metaOf(t, res.obj.Data)); diff != "" {
			t.Errorf("step %d %q: metadata (-want +got):\n%s", index, st.name, diff)
		}
	}
}

func TestFSMEventsAndList(t *testing.T) {
	f := newTestFSM(100)
	applyCmd(t, f, 1, createCmd(t, podB, "u1", `{"metadata":{"name":"b"}}`))
	applyCmd(t, f, 2, createCmd(t, podA, "u2", `{"metadata":{"name":"a"}}`))
	applyCmd(t, f, 3, createCmd(t, nodeX, "u3", `{"metadata":{"name":"x"}}`))
	applyCmd(t, f, 4, command{Op: opUpdate, Key: podB, Data: json.RawMessage(`{"metadata":{"name":"b"},"spec":{}}`)})
	applyCmd(t, f, 5, command{Op: opDelete, Key: nodeX})
	applyCmd(t, f, 6, command{Op: opDelete, Key: nodeX}) // ErrNotFound: no event

	keysOf := func(objs []Object) (keys []Key) {
		for _, o := range objs {
			keys = append(keys, o.Key)
		}
		return keys
	}
	tests := []struct {
		resource, namespace string
		want                []Key
	}{
		{"pods", "", []Key{podA, podB}},
		{"pods", "ns2", []Key{podB}},
		{"pods", "ns3", nil},
		{"nodes", "", nil},
	}
	for _, tt := range tests {
		objs, rev := f.list(tt.resource, tt.namespace)
		if diff := cmp.Diff(tt.want, keysOf(objs)); diff != "" {
			t.Errorf("list(%q, %q) keys (-want +got):\n%s", tt.resource, tt.namespace, diff)
		}
		if rev != 6 {
			t.Errorf("list(%q, %q) rev = %d, want 6", tt.resource, tt.namespace, rev)
		}
	}

	var got []string
	for i := range f.hub.n {
		ev := f.hub.at(i).ev
		got = append(got, string(ev.Type)+" "+ev.Object.Key.String()+" "+metaOf(t, ev.Object.Data)["resourceVersion"].(string))
	}
	want := []string{
		"ADDED pods/ns2/b 1", "ADDED pods/ns1/a 2", "ADDED nodes//x 3", "MODIFIED pods/ns2/b 4", "DELETED nodes//x 5",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestPrepareRejectsInvalidObjects(t *testing.T) {
	tests := []struct {
		name string
		data string
	}{
		{"not JSON", `{`},
		{"not an object", `[1]`},
		{"null", `null`},
		{"metadata not an object", `{"metadata":"x"}`},
		{"name mismatch", `{"metadata":{"name":"other"}}`},
		{"namespace mismatch", `{"metadata":{"name":"a","namespace":"ns9"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := prepareCreate(podA, []byte(tt.data), "u", testTime); !errors.Is(err, ErrInvalid) {
				t.Errorf("prepareCreate: err = %v, want ErrInvalid", err)
			}
			if err := validateUpdate(podA, []byte(tt.data)); !errors.Is(err, ErrInvalid) {
				t.Errorf("validateUpdate: err = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestNewUUID(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		u := newUUID()
		if len(u) != 36 || u[14] != '4' || seen[u] {
			t.Fatalf("bad or repeated UUID %q", u)
		}
		seen[u] = true
	}
}
