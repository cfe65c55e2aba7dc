package history

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func mustCreate(tb testing.TB) *Recorder {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "history.jsonl")
	r, err := Create(path, Meta{RunID: "run-1", Seed: 42, Scenario: "unit", Version: "test", Extra: map[string]string{"nodes": "3", "mode": "inproc"}})
	if err != nil {
		tb.Fatalf("Create: %v", err)
	}
	return r
}

func mustLoad(tb testing.TB, path string) *History {
	tb.Helper()
	h, err := Load(path)
	if err != nil {
		tb.Fatalf("Load: %v", err)
	}
	return h
}

// ignoreTimes drops the fields whose values depend on the clock; tests check
// their order separately.
var ignoreTimes = cmp.Options{
	cmpopts.IgnoreFields(APICall{}, "T"),
	cmpopts.IgnoreFields(NemesisEvent{}, "T", "Wall"),
	cmpopts.IgnoreFields(Interval{}, "Start", "End", "StartWall", "EndWall"),
	cmpopts.IgnoreFields(LedgerEntry{}, "T"),
	cmpopts.IgnoreFields(StoreEvent{}, "T"),
	cmpopts.IgnoreFields(LogEntry{}, "T", "Wall"),
	cmpopts.IgnoreFields(Meta{}, "Start"),
	cmpopts.IgnoreFields(History{}, "End"),
	cmpopts.EquateEmpty(),
}

func TestRoundTripEveryKind(t *testing.T) {
	r := mustCreate(t)

	get := &Op{Process: 0, Func: "get", Key: "k1"}
	r.Invoke(get)
	create := &Op{Process: 1, Func: "create", Key: "k2", Value: "a"}
	r.Invoke(create)
	get.Status, get.Output, get.Found = StatusOK, "x", true
	r.Complete(get)
	create.Status, create.Error = StatusFail, "exists"
	r.Complete(create)
	cas := &Op{Process: 2, Func: "cas", Key: "k1", Value: "b", Expect: "x"}
	r.Invoke(cas)
	cas.Status, cas.Error = StatusUnknown, "timeout"
	r.Complete(cas)
	del := &Op{Process: 3, Func: "delete", Key: "k1", Expect: "b"}
	r.Invoke(del) // never completes: the process crashed

	call := APICall{Identity: "kubelet/n1", Verb: "update", Resource: "pods", Subresource: "status", Namespace: "default", Name: "p", BodyDigest: "0123456789abcdef", Code: 200, ResourceVersion: "12", UID: "u", Invoke: 5, Return: 9, Outcome: StatusOK}
	r.API(call)
	r.Nemesis(NemesisEvent{Name: "partition", Description: "isolate leader", Phase: PhaseStart, Targets: []string{"cp1"}})
	r.Nemesis(NemesisEvent{Name: "partition", Phase: PhaseEnd})
	r.Nemesis(NemesisEvent{Name: "pause", Description: "pause kubelet", Phase: PhaseStart, Targets: []string{"n2"}})
	scaled := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	wall := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	led := LedgerEntry{Node: "n1", Namespace: "default", Pod: "p", UID: "u", Container: "c", Action: LedgerExit, ExitCode: 137, Scaled: scaled, Wall: wall}
	r.Ledger(led)
	st := StoreEvent{Type: StoreModified, Resource: "pods", Namespace: "default", Name: "p", RV: "12", Object: json.RawMessage(`{"kind":"Pod","metadata":{"name":"p"}}`)}
	r.Store(st)
	r.Log("healing all faults", map[string]string{"phase": "heal", "faults": "2"})
	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	h := mustLoad(t, r.Path())
	want := &History{
		Meta: Meta{RunID: "run-1", Seed: 42, Scenario: "unit", Version: "test", Extra: map[string]string{"nodes": "3", "mode": "inproc"}},
		Ops: []Op{
			{ID: 1, Process: 0, Func: "get", Key: "k1", Status: StatusOK, Output: "x", Found: true, Invoke: get.Invoke, Return: get.Return},
			{ID: 2, Process: 1, Func: "create", Key: "k2", Value: "a", Status: StatusFail, Error: "exists", Invoke: create.Invoke, Return: create.Return},
			{ID: 3, Process: 2, Func: "cas", Key: "k1", Value: "b", Expect: "x", Status: StatusUnknown, Error: "timeout", Invoke: cas.Invoke, Return: math.MaxInt64},
			{ID: 4, Process: 3, Func: "delete", Key: "k1", Expect: "b", Status: StatusUnknown, Invoke: del.Invoke, Return: math.MaxInt64},
		},
		API: []APICall{call},
		Nemesis: []Interval{
			{Name: "partition", Description: "isolate leader", Targets: []string{"cp1"}, Healed: true},
			{Name: "pause", Description: "pause kubelet", Targets: []string{"n2"}},
		},
		Ledger:   []LedgerEntry{led},
		Store:    []StoreEvent{st},
		Logs:     []LogEntry{{Msg: "healing all faults", Attrs: map[string]string{"phase": "heal", "faults": "2"}}},
		Complete: true,
	}
	if diff := cmp.Diff(want, h, ignoreTimes); diff != "" {
		t.Errorf("loaded history (-want +got):\n%s", diff)
	}

	// Times: one monotonic base, ordered as recorded.
	if !(get.Invoke <= create.Invoke && create.Invoke <= get.Return && get.Return <= create.Return && create.Return <= cas.Invoke && cas.Invoke <= del.Invoke) {
		t.Errorf("op times out of order: get [%d,%d] create [%d,%d] cas %d delete %d", get.Invoke, get.Return, create.Invoke, create.Return, cas.Invoke, del.Invoke)
	}
	if cas.Return != math.MaxInt64 {
		t.Errorf("unknown completion Return = %d, want MaxInt64", cas.Return)
	}
	p, pause := h.Nemesis[0], h.Nemesis[1]
	if !(p.Start <= p.End && p.End <= pause.Start && pause.End == h.End) {
		t.Errorf("nemesis intervals %+v %+v, history end %d: want healed partition before an unhealed pause running to the end", p, pause, h.End)
	}
	if p.StartWall.IsZero() || p.EndWall.IsZero() || h.Logs[0].Wall.IsZero() || h.Meta.Start.IsZero() {
		t.Errorf("wall times missing: nemesis %v/%v log %v meta %v", p.StartWall, p.EndWall, h.Logs[0].Wall, h.Meta.Start)
	}
	if h.Truncated {
		t.Errorf("Truncated = true for a cleanly closed history")
	}
}

func TestConcurrentWriters(t *testing.T) {
	r := mustCreate(t)
	const writers, perWriter = 8, 300
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				op := &Op{Process: w, Func: "cas", Key: fmt.Sprintf("k%d", i%7), Value: fmt.Sprint(i), Expect: fmt.Sprint(i - 1)}
				r.Invoke(op)
				r.API(APICall{Identity: fmt.Sprintf("client-%d", w), Verb: "update", Resource: "pods", Name: op.Key, Outcome: StatusOK})
				op.Status = StatusOK
				r.Complete(op)
				if i%50 == 0 {
					r.Log("progress", map[string]string{"writer": fmt.Sprint(w), "i": fmt.Sprint(i)})
				}
			}
		}()
	}
	wg.Wait()
	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	h := mustLoad(t, r.Path())
	if got, want := len(h.Ops), writers*perWriter; got != want {
		t.Fatalf("loaded %d ops, want %d", got, want)
	}
	if got, want := len(h.API), writers*perWriter; got != want {
		t.Errorf("loaded %d api calls, want %d", got, want)
	}
	if got, want := len(h.Logs), writers*((perWriter+49)/50); got != want {
		t.Errorf("loaded %d logs, want %d", got, want)
	}
	seen := map[uint64]bool{}
	for i, op := range h.Ops {
		if seen[op.ID] {
			t.Fatalf("op ID %d appears twice", op.ID)
		}
		seen[op.ID] = true
		if op.Status != StatusOK || op.Return < op.Invoke {
			t.Fatalf("op %+v: want ok with Return >= Invoke", op)
		}
		if i > 0 && h.Ops[i-1].Invoke > op.Invoke {
			t.Fatalf("ops not in invoke order at %d", i)
		}
	}
}

func TestCloseKeepsEveryLine(t *testing.T) {
	// Close right after a burst, well inside one sync interval.
	r := mustCreate(t)
	const n = 5000
	for i := range n {
		r.Store(StoreEvent{Type: StoreAdded, Resource: "pods", Name: fmt.Sprint(i), RV: fmt.Sprint(i + 1)})
	}
	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	h := mustLoad(t, r.Path())
	if len(h.Store) != n {
		t.Fatalf("loaded %d store events, want %d", len(h.Store), n)
	}
	for i, e := range h.Store {
		if e.Name != fmt.Sprint(i) {
			t.Fatalf("store event %d is %q: order lost", i, e.Name)
		}
	}
}

func TestReadableWhileRunning(t *testing.T) {
	// A process that dies without Close loses nothing already recorded:
	// every line is handed to the operating system as it is recorded.
	r := mustCreate(t)
	defer r.Close()
	op := &Op{Process: 1, Func: "create", Key: "k", Value: "v"}
	r.Invoke(op)
	r.Nemesis(NemesisEvent{Name: "crash", Phase: PhaseStart, Targets: []string{"cp2"}})
	h := mustLoad(t, r.Path())
	want := []Op{{ID: 1, Process: 1, Func: "create", Key: "k", Value: "v", Status: StatusUnknown, Invoke: op.Invoke, Return: math.MaxInt64}}
	if diff := cmp.Diff(want, h.Ops); diff != "" {
		t.Errorf("ops of a running history (-want +got):\n%s", diff)
	}
	if len(h.Nemesis) != 1 || h.Nemesis[0].Healed || h.Nemesis[0].End != h.End {
		t.Errorf("nemesis = %+v, want one unhealed fault running to the end (%d)", h.Nemesis, h.End)
	}
}

func TestBackgroundSync(t *testing.T) {
	r := mustCreate(t)
	defer r.Close()
	r.Log("x", nil)
	deadline := time.Now().Add(5 * time.Second)
	for {
		r.mu.Lock()
		dirty := r.dirty
		r.mu.Unlock()
		if !dirty {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the background flusher never synced")
		}
		time.Sleep(SyncInterval / 5)
	}
}

func TestWriteErrorIsSticky(t *testing.T) {
	r := mustCreate(t)
	r.Log("before", nil)
	// Pull the file out from under the recorder: every write now fails.
	r.f.Close()
	r.Log("lost", nil)
	r.Store(StoreEvent{Type: StoreAdded, Resource: "pods", Name: "p", RV: "1"})
	if err := r.Err(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Err() = %v, want one wrapping os.ErrClosed", err)
	}
	if err := r.Close(); err == nil {
		t.Errorf("Close() = nil after a write error")
	}
	h := mustLoad(t, r.Path())
	if diff := cmp.Diff([]LogEntry{{Msg: "before"}}, h.Logs, ignoreTimes); diff != "" {
		t.Errorf("logs (-want +got):\n%s", diff)
	}
}

func TestMisuse(t *testing.T) {
	r := mustCreate(t)
	r.Complete(&Op{Func: "get", Key: "k"})
	r.Log("still recorded", nil)
	if err := r.Err(); !errors.Is(err, ErrNotInvoked) {
		t.Errorf("Err() = %v, want ErrNotInvoked", err)
	}
	if err := r.Close(); !errors.Is(err, ErrNotInvoked) {
		t.Errorf("Close() = %v, want ErrNotInvoked", err)
	}
	if err := r.Close(); !errors.Is(err, ErrNotInvoked) {
		t.Errorf("second Close() = %v, want the same error", err)
	}
	h := mustLoad(t, r.Path())
	if len(h.Ops) != 0 || len(h.Logs) != 1 {
		t.Errorf("loaded %d ops and %d logs, want 0 and 1", len(h.Ops), len(h.Logs))
	}

	r3 := mustCreate(t)
	op := &Op{Func: "get", Key: "k"}
	r3.Invoke(op)
	op.Status = StatusOK
	r3.Complete(op)
	r3.Complete(op)
	if err := r3.Close(); !errors.Is(err, ErrCompletedTwice) {
		t.Errorf("Close() after a double completion = %v, want ErrCompletedTwice", err)
	}
	if h := mustLoad(t, r3.Path()); len(h.Ops) != 1 || h.Ops[0].Status != StatusOK {
		t.Errorf("ops = %+v, want the one completed op", h.Ops)
	}
	// A reused Op starts afresh.
	r4 := mustCreate(t)
	for range 2 {
		r4.Invoke(op)
		r4.Complete(op)
	}
	if err := r4.Close(); err != nil {
		t.Errorf("reusing an Op: %v", err)
	}

	r2 := mustCreate(t)
	if err := r2.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	r2.Log("too late", nil)
	if err := r2.Err(); !errors.Is(err, ErrClosed) {
		t.Errorf("Err() after a late event = %v, want ErrClosed", err)
	}
	if h := mustLoad(t, r2.Path()); len(h.Logs) != 0 {
		t.Errorf("a late event was written: %+v", h.Logs)
	}
}

func TestCreateRefusesExistingFile(t *testing.T) {
	r := mustCreate(t)
	defer r.Close()
	if _, err := Create(r.Path(), Meta{}); !errors.Is(err, os.ErrExist) {
		t.Errorf("Create over an existing history: err = %v, want os.ErrExist", err)
	}
}

func TestCreateRejectsUnencodableMeta(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	if _, err := Create(path, Meta{Start: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}); err == nil {
		t.Fatal("Create accepted a meta that cannot be encoded")
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a history without its meta line was left behind: %v", err)
	}
}

func TestCompleteEmptyStatusIsUnknown(t *testing.T) {
	r := mustCreate(t)
	op := &Op{Func: "delete", Key: "k"}
	r.Invoke(op)
	r.Complete(op)
	if op.Status != StatusUnknown || op.Return != math.MaxInt64 {
		t.Errorf("completed op = %+v, want status unknown and Return MaxInt64", op)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLedgerRoundTrip: every ledger action and field the kubelet's runtime
// and the storage server record survives the history file, and the lines
// keep the ledger's JSON spelling.
func TestLedgerRoundTrip(t *testing.T) {
	r := mustCreate(t)
	scaled := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	wall := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	at := func(i int) (time.Time, time.Time) {
		return scaled.Add(time.Duration(i) * time.Second), wall.Add(time.Duration(i) * time.Millisecond)
	}
	entry := func(i int, action LedgerAction) LedgerEntry {
		s, w := at(i)
		return LedgerEntry{Node: "n1", Namespace: "default", Pod: "db-0", UID: "u1", Container: "db", Action: action, Scaled: s, Wall: w}
	}
	with := func(e LedgerEntry, f func(*LedgerEntry)) LedgerEntry { f(&e); return e }
	entries := []LedgerEntry{
		entry(0, LedgerStart),
		with(entry(1, LedgerWrite), func(e *LedgerEntry) { e.Volume, e.Token = "pv-1", 42 }),
		with(entry(2, LedgerWriteRefused), func(e *LedgerEntry) { e.Volume, e.Token = "pv-1", 1<<62+1 }),
		entry(3, LedgerPreStopStart),
		entry(4, LedgerPreStopEnd),
		with(entry(5, LedgerTerm), func(e *LedgerEntry) { e.Grace = 30 }),
		with(entry(6, LedgerKill), func(e *LedgerEntry) { e.Grace = 1 }),
		with(entry(7, LedgerExit), func(e *LedgerEntry) { e.ExitCode = 137 }),
		entry(8, LedgerPowerOff),
	}
	for _, e := range entries {
		r.Ledger(e)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	h := mustLoad(t, r.Path())
	if diff := cmp.Diff(entries, h.Ledger, ignoreTimes); diff != "" {
		t.Errorf("loaded ledger (-want +got):\n%s", diff)
	}

	raw, err := os.ReadFile(r.Path())
	if err != nil {
		t.Fatal(err)
	}
	var lines []map[string]any
	all := bytes.Split(bytes.TrimSpace(raw), []byte("\n"))
	if !bytes.Contains(all[len(all)-1], []byte(`"kind":"end"`)) {
		t.Errorf("last line %s, want the closing record", all[len(all)-1])
	}
	for _, l := range all[1 : len(all)-1] {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "t")
		delete(m, "scaled")
		delete(m, "wall")
		lines = append(lines, m)
	}
	base := map[string]any{"kind": "ledger", "node": "n1", "namespace": "default", "pod": "db-0", "uid": "u1", "container": "db"}
	line := func(extra map[string]any) map[string]any {
		m := map[string]any{}
		for k, v := range base {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	want := []map[string]any{
		line(map[string]any{"action": "start"}),
		line(map[string]any{"action": "write", "volume": "pv-1", "token": float64(42)}),
		line(map[string]any{"action": "write-refused", "volume": "pv-1", "token": float64(1<<62 + 1)}),
		line(map[string]any{"action": "prestop-start"}),
		line(map[string]any{"action": "prestop-end"}),
		line(map[string]any{"action": "term", "grace": float64(30)}),
		line(map[string]any{"action": "kill", "grace": float64(1)}),
		line(map[string]any{"action": "exit", "exit_code": float64(137)}),
		line(map[string]any{"action": "power-off"}),
	}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("ledger lines (-want +got):\n%s", diff)
	}
}
