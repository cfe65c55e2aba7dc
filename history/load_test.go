package history

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

const metaLine = `{"kind":"meta","t":0,"run_id":"r","seed":7,"scenario":"s","start":"2026-01-01T00:00:00Z","version":"v"}`

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "history.jsonl")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReadPairsOps(t *testing.T) {
	in := strings.Join([]string{
		metaLine,
		`{"kind":"invoke","t":10,"id":1,"process":0,"f":"create","key":"k","value":"a","invoke":10}`,
		`{"kind":"invoke","t":5,"id":2,"process":1,"f":"get","key":"k","invoke":5}`,
		`{"kind":"complete","t":20,"id":1,"process":0,"f":"create","key":"k","value":"a","status":"ok","invoke":10,"return":20}`,
		``,
		`{"kind":"invoke","t":30,"id":3,"process":2,"f":"cas","key":"k","value":"b","expect":"a","invoke":30}`,
		`{"kind":"complete","t":40,"id":3,"process":2,"f":"cas","key":"k","value":"b","expect":"a","status":"unknown","error":"timeout","invoke":30,"return":9223372036854775807}`,
		`{"kind":"future-kind","t":50,"x":1}`,
		`{"kind":"nemesis","t":60,"name":"kill","phase":"end","wall":"2026-01-01T00:00:01Z"}`,
		`{"kind":"nemesis","t":70,"name":"part","phase":"start","wall":"2026-01-01T00:00:02Z"}`,
		`{"kind":"nemesis","t":75,"name":"part","phase":"start","wall":"2026-01-01T00:00:02Z"}`,
		`{"kind":"nemesis","t":80,"name":"part","phase":"end","wall":"2026-01-01T00:00:03Z"}`,
		`{"kind":"nemesis","t":81,"id":7,"name":"kill","phase":"start","wall":"2026-01-01T00:00:03Z"}`,
		`{"kind":"nemesis","t":82,"id":8,"name":"kill","phase":"start","wall":"2026-01-01T00:00:03Z"}`,
		`{"kind":"nemesis","t":90,"id":8,"phase":"end","wall":"2026-01-01T00:00:04Z"}`,
		``,
	}, "\n")
	h, err := Read(strings.NewReader(in))
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	wantOps := []Op{
		{ID: 2, Process: 1, Func: "get", Key: "k", Status: StatusUnknown, Invoke: 5, Return: math.MaxInt64},
		{ID: 1, Process: 0, Func: "create", Key: "k", Value: "a", Status: StatusOK, Invoke: 10, Return: 20},
		{ID: 3, Process: 2, Func: "cas", Key: "k", Value: "b", Expect: "a", Status: StatusUnknown, Error: "timeout", Invoke: 30, Return: math.MaxInt64},
	}
	if diff := cmp.Diff(wantOps, h.Ops); diff != "" {
		t.Errorf("ops (-want +got):\n%s", diff)
	}
	wantOther := []RawEvent{{Kind: "future-kind", T: 50, Line: 8, Raw: json.RawMessage(`{"kind":"future-kind","t":50,"x":1}`)}}
	if diff := cmp.Diff(wantOther, h.Other); diff != "" {
		t.Errorf("other events (-want +got):\n%s", diff)
	}
	type span struct {
		ID         uint64
		Name       string
		Start, End int64
		Healed     bool
	}
	var got []span
	for _, iv := range h.Nemesis {
		got = append(got, span{iv.ID, iv.Name, iv.Start, iv.End, iv.Healed})
	}
	wantSpans := []span{
		{0, "kill", 0, 60, true},   // an end without a start spans from the beginning
		{0, "part", 70, 80, true},  // ends close the oldest open fault of that name
		{0, "part", 75, 90, false}, // never healed: runs to the end of the history
		{7, "kill", 81, 90, false},
		{8, "kill", 82, 90, true}, // an end with an ID closes that fault, whatever its name
	}
	if diff := cmp.Diff(wantSpans, got); diff != "" {
		t.Errorf("nemesis intervals (-want +got):\n%s", diff)
	}
	if h.End != 90 || h.Truncated {
		t.Errorf("End = %d, Truncated = %v; want 90, false", h.End, h.Truncated)
	}
}

func TestLoadTornLastLine(t *testing.T) {
	r := mustCreate(t)
	op := &Op{Process: 1, Func: "create", Key: "k", Value: "v"}
	r.Invoke(op)
	op.Status = StatusOK
	r.Complete(op)
	r.Log("last words before the crash", nil)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(r.Path())
	if err != nil {
		t.Fatal(err)
	}
	closed := string(data)
	// A killed run never writes the closing record: without it the log
	// line is the last.
	lines := strings.SplitAfter(strings.TrimSuffix(closed, "\n"), "\n")
	if !strings.Contains(lines[len(lines)-1], `"kind":"end"`) {
		t.Fatalf("the closed history's last line is %q, want the closing record", lines[len(lines)-1])
	}
	lines = lines[:len(lines)-1]
	data = []byte(strings.Join(lines, ""))
	last := lines[len(lines)-1]

	tests := []struct {
		name      string
		content   string
		wantLogs  int
		truncated bool
		complete  bool
	}{
		{name: "closed", content: closed, wantLogs: 1, complete: true},
		{name: "intact", content: string(data), wantLogs: 1},
		{name: "cut mid-line", content: strings.Join(lines[:len(lines)-1], "") + last[:len(last)/2], truncated: true},
		{name: "cut before the newline", content: strings.TrimSuffix(string(data), "\n"), wantLogs: 1, truncated: true},
		{name: "garbage tail with newline", content: strings.Join(lines[:len(lines)-1], "") + "\x00\x00\x00\n", truncated: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := Load(writeFile(t, tt.content))
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if h.Truncated != tt.truncated {
				t.Errorf("Truncated = %v, want %v", h.Truncated, tt.truncated)
			}
			if h.Complete != tt.complete {
				t.Errorf("Complete = %v, want %v", h.Complete, tt.complete)
			}
			if tt.truncated && h.TruncatedLine != 4 {
				t.Errorf("TruncatedLine = %d, want 4", h.TruncatedLine)
			}
			if len(h.Logs) != tt.wantLogs {
				t.Errorf("loaded %d logs, want %d", len(h.Logs), tt.wantLogs)
			}
			if len(h.Ops) != 1 || h.Ops[0].Status != StatusOK {
				t.Errorf("ops = %+v, want the one completed op", h.Ops)
			}
		})
	}
}

func TestLoadCorrupt(t *testing.T) {
	invoke := `{"kind":"invoke","t":1,"id":1,"f":"get","key":"k","invoke":1}`
	complete := `{"kind":"complete","t":2,"id":1,"f":"get","key":"k","status":"ok","invoke":1,"return":2}`
	tests := []struct {
		name     string
		lines    []string
		wantLine int
		wantMsg  string
	}{
		{name: "garbage in the middle", lines: []string{metaLine, invoke, `{"kind":"log","t":`, complete}, wantLine: 3, wantMsg: "decoding event"},
		{name: "missing kind", lines: []string{metaLine, `{"t":3}`, complete}, wantLine: 2, wantMsg: "without kind"},
		{name: "bad payload", lines: []string{metaLine, `{"kind":"invoke","t":1,"id":"one"}`, invoke}, wantLine: 2, wantMsg: "decoding invoke"},
		{name: "first line not meta", lines: []string{invoke, metaLine}, wantLine: 1, wantMsg: "want \"meta\""},
		{name: "second meta", lines: []string{metaLine, metaLine, invoke}, wantLine: 2, wantMsg: "second meta"},
		{name: "complete without invoke", lines: []string{metaLine, complete, invoke}, wantLine: 2, wantMsg: "never invoked"},
		{name: "complete twice, last line", lines: []string{metaLine, invoke, complete, complete}, wantLine: 4, wantMsg: "second completion"},
		{name: "bad nemesis phase", lines: []string{metaLine, `{"kind":"nemesis","t":3,"name":"x","phase":"begin"}`, invoke}, wantLine: 2, wantMsg: "phase"},
		{name: "invoke twice", lines: []string{metaLine, invoke, invoke, complete}, wantLine: 3, wantMsg: "second invoke"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, strings.Join(tt.lines, "\n")+"\n")
			_, err := Load(path)
			var ce *CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("Load error = %v, want a *CorruptError", err)
			}
			if ce.Line != tt.wantLine || ce.Path != path {
				t.Errorf("error at %s:%d, want %s:%d", ce.Path, ce.Line, path, tt.wantLine)
			}
			if msg := err.Error(); !strings.Contains(msg, tt.wantMsg) || !strings.HasPrefix(msg, path+":") {
				t.Errorf("error %q: want it to start with the path and mention %q", msg, tt.wantMsg)
			}
		})
	}
}

func TestReadEmpty(t *testing.T) {
	for _, in := range []string{"", "\n\n", `{"kind":"me`} {
		if _, err := Read(strings.NewReader(in)); !errors.Is(err, ErrEmpty) {
			t.Errorf("Read(%q) error = %v, want ErrEmpty", in, err)
		}
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.jsonl")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of a missing file: %v, want os.ErrNotExist", err)
	}
}

// Watch lines, list ops with their items and the resourceVersions reads
// return survive a round trip; the invoke line carries inputs only.
func TestWatchRoundTrip(t *testing.T) {
	r := mustCreate(t)
	list := &Op{Process: 7, Func: "list", Key: "podsafe-register"}
	r.Invoke(list)
	list.Status, list.RV = StatusOK, "40"
	list.Items = []Item{{Key: "k1", Value: "p0-1", RV: "12"}, {Key: "k2", Value: "p1-3", RV: "39"}}
	r.Complete(list)
	lines := []WatchEvent{
		{Watcher: "w0", Stream: 1, Phase: WatchOpen, Resource: "leases.coordination.k8s.io", Namespace: "podsafe-register",
			FromRV: "40", Reason: WatchFromList, List: list.ID},
		{Watcher: "w0", Stream: 1, Phase: WatchDeliver, Type: "ADDED", Key: "k3", Value: "p2-1", RV: "41"},
		{Watcher: "w0", Stream: 1, Phase: WatchDeliver, Type: "BOOKMARK", RV: "44"},
		{Watcher: "w0", Stream: 1, Phase: WatchClose, Error: "too old resource version: 44", Code: 410},
		{Watcher: "w0", Stream: 2, Phase: WatchOpen, Resource: "leases.coordination.k8s.io", Namespace: "podsafe-register",
			FromRV: "44", Reason: WatchResume},
	}
	for _, l := range lines {
		r.Watch(l)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(r.Path())
	if err != nil {
		t.Fatal(err)
	}
	invokeLine := strings.Split(string(raw), "\n")[1]
	if strings.Contains(invokeLine, `"items"`) || strings.Contains(invokeLine, `"rv"`) {
		t.Errorf("invoke line carries outputs: %s", invokeLine)
	}
	h := mustLoad(t, r.Path())
	wantOps := []Op{{ID: list.ID, Process: 7, Func: "list", Key: "podsafe-register", Status: StatusOK, RV: "40",
		Items: list.Items, Invoke: list.Invoke, Return: list.Return}}
	if diff := cmp.Diff(wantOps, h.Ops); diff != "" {
		t.Errorf("ops (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(lines, h.Watch, cmpopts.IgnoreFields(WatchEvent{}, "T")); diff != "" {
		t.Errorf("watch lines (-want +got):\n%s", diff)
	}
	for i := 1; i < len(h.Watch); i++ {
		if h.Watch[i].T < h.Watch[i-1].T {
			t.Errorf("watch line %d at %d before line %d at %d", i, h.Watch[i].T, i-1, h.Watch[i-1].T)
		}
	}
}

// Watch lines load sorted by time; a history written before they existed
// loads as before: no watch lines and no resourceVersions.
func TestReadWatchLinesAndOldHistories(t *testing.T) {
	in := strings.Join([]string{
		metaLine,
		`{"kind":"invoke","t":10,"id":1,"process":0,"f":"get","key":"k","invoke":10}`,
		`{"kind":"complete","t":20,"id":1,"process":0,"f":"get","key":"k","status":"ok","output":"a","found":true,"invoke":10,"return":20}`,
		`{"kind":"watch","t":30,"watcher":"w1","stream":1,"phase":"event","type":"MODIFIED","key":"k","value":"b","rv":"9"}`,
		`{"kind":"watch","t":25,"watcher":"w0","stream":1,"phase":"open","from_rv":"7","reason":"resume"}`,
		``,
	}, "\n")
	h, err := Read(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []WatchEvent{
		{Watcher: "w0", Stream: 1, Phase: WatchOpen, FromRV: "7", Reason: WatchResume, T: 25},
		{Watcher: "w1", Stream: 1, Phase: WatchDeliver, Type: "MODIFIED", Key: "k", Value: "b", RV: "9", T: 30},
	}
	if diff := cmp.Diff(want, h.Watch); diff != "" {
		t.Errorf("watch lines sorted by time (-want +got):\n%s", diff)
	}
	if h.Ops[0].RV != "" || h.Ops[0].Items != nil || len(h.Other) != 0 {
		t.Errorf("op %+v other %+v", h.Ops[0], h.Other)
	}
	old, err := Read(strings.NewReader(strings.Join([]string{metaLine, `{"kind":"log","t":1,"msg":"m","wall":"2026-01-01T00:00:00Z"}`, ``}, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	if old.Watch != nil {
		t.Errorf("old history has watch lines: %+v", old.Watch)
	}
}

func TestLoadRefusesOverlongLine(t *testing.T) {
	meta := `{"kind":"meta","t":0,"scenario":"x"}` + "\n"
	ok := `{"kind":"log","t":1,"msg":"` + strings.Repeat("a", MaxLineBytes-100) + `"}` + "\n"
	long := `{"kind":"log","t":2,"msg":"` + strings.Repeat("b", MaxLineBytes) + `"}` + "\n"

	h, err := Load(writeFile(t, meta+ok))
	if err != nil {
		t.Fatalf("a line just under the limit: %v", err)
	}
	if len(h.Logs) != 1 {
		t.Fatalf("loaded %d logs, want 1", len(h.Logs))
	}
	_, err = Load(writeFile(t, meta+ok+long))
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Line != 3 || !errors.Is(err, errLineTooLong) {
		t.Fatalf("Load of a history whose line 3 is over the limit: %v, want a CorruptError naming line 3", err)
	}
	if !strings.Contains(err.Error(), ":3: line longer than") {
		t.Errorf("error %q does not name the line and the limit", err)
	}
	// Without a newline the limit holds too: an endless first line.
	_, err = Read(io.LimitReader(zeros{}, MaxLineBytes+10))
	if !errors.As(err, &ce) || ce.Line != 1 {
		t.Fatalf("Read of %d zero bytes: %v, want a CorruptError naming line 1", MaxLineBytes+10, err)
	}
}

// zeros reads as an endless run of zero bytes, as /dev/zero does.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestLoadRefusesNonRegularFile(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero here")
	}
	_, err := Load("/dev/zero")
	if err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("Load(/dev/zero) = %v, want a refusal naming a non-regular file", err)
	}
	_, err = Load(t.TempDir())
	if err == nil {
		t.Fatal("Load of a directory succeeded")
	}
}

func TestRecorderNeverWritesOverlongLine(t *testing.T) {
	r := mustCreate(t)
	r.Log("huge", map[string]string{"blob": strings.Repeat("x", MaxLineBytes)})
	r.Log("after", nil)
	if err := r.CloseWith(End{Error: "boom", Interrupted: true}); err != nil {
		t.Fatal(err)
	}
	h := mustLoad(t, r.Path())
	if len(h.Logs) != 2 || h.Logs[0].Msg != "event dropped: longer than a history line may be" || h.Logs[0].Attrs["kind"] != string(KindLog) || h.Logs[1].Msg != "after" {
		t.Fatalf("logs = %+v, want the drop noted, then the next line", h.Logs)
	}
	if !h.Complete || h.Closing.Error != "boom" || !h.Closing.Interrupted {
		t.Errorf("Complete %v, Closing %+v; want the closing record with its error and interruption", h.Complete, h.Closing)
	}
}

func TestLoadSecondClosingRecordIsCorrupt(t *testing.T) {
	content := `{"kind":"meta","t":0}` + "\n" + `{"kind":"end","t":1}` + "\n" + `{"kind":"end","t":2}` + "\n"
	var ce *CorruptError
	if _, err := Load(writeFile(t, content)); !errors.As(err, &ce) || ce.Line != 3 {
		t.Fatalf("Load: %v, want a CorruptError at line 3", err)
	}
}
