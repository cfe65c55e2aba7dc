package record

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/history"
)

// newRecorder creates a history in a temporary directory.
func newRecorder(t *testing.T) (*history.Recorder, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "history.jsonl")
	rec, err := history.Create(path, history.Meta{RunID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rec.Close() })
	return rec, path
}

// load reads the history written so far (its last line may be torn).
func load(t *testing.T, path string) *history.History {
	t.Helper()
	h, err := history.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// auditLine returns a fixture as the API server writes it: one line.
func auditLine(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "audit", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return append(bytes.TrimSpace(b), '\n')
}

func appendTo(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// eventually waits up to 5 s for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// pastStart puts the fixtures' calls an hour before the recorder's
// start, so that none is after the time it is read (see
// TestAuditTailerClampsFutureTimes) and their order is theirs.
var pastStart = fixtureStart.Add(time.Hour)

// tail runs a tailer over paths until the returned stop is called; stop
// waits for Run to return.
func tail(t *testing.T, rec *history.Recorder, ids *IdentityMap, paths ...string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	tl := &AuditTailer{Rec: rec, Identities: ids, Paths: paths, Start: pastStart, Poll: 5 * time.Millisecond}
	go func() { done <- tl.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Run did not return after its context ended")
		}
	}
	t.Cleanup(stop)
	return stop
}

func logsWith(h *history.History, msg string) []history.LogEntry {
	var out []history.LogEntry
	for _, l := range h.Logs {
		if l.Msg == msg {
			out = append(out, l)
		}
	}
	return out
}

func apiCount(t *testing.T, path string) int { return len(load(t, path).API) }

// The tailer follows a growing file: a half-written line waits for its
// newline, a garbage line is noted and the lines after it are read, a
// watch is one call.
func TestAuditTailerFollowsGrowingFile(t *testing.T) {
	rec, hpath := newRecorder(t)
	log := filepath.Join(t.TempDir(), "audit.log")
	appendTo(t, log, nil)
	stop := tail(t, rec, nil, log)

	appendTo(t, log, auditLine(t, "binding"))
	eventually(t, "the binding", func() bool { return apiCount(t, hpath) == 1 })

	del := auditLine(t, "delete_kubelet")
	appendTo(t, log, del[:len(del)/2])
	time.Sleep(50 * time.Millisecond)
	if n := apiCount(t, hpath); n != 1 {
		t.Fatalf("a half-written line was recorded: %d calls", n)
	}
	appendTo(t, log, del[len(del)/2:])
	eventually(t, "the deletion", func() bool { return apiCount(t, hpath) == 2 })

	appendTo(t, log, []byte("this is not JSON\n\n"))
	appendTo(t, log, auditLine(t, "watch_started"))
	appendTo(t, log, auditLine(t, "watch_complete"))
	appendTo(t, log, auditLine(t, "eviction"))
	eventually(t, "the watch and the eviction", func() bool { return apiCount(t, hpath) == 4 })
	stop()
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}

	h := load(t, hpath)
	var got []string
	for _, c := range h.API {
		got = append(got, c.Identity+" "+c.Verb+" "+c.Resource+"/"+c.Subresource)
	}
	want := []string{"scheduler watch pods/", "scheduler create pods/binding", "admin create pods/eviction", "kubelet:node-1 delete pods/"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("calls (by invoke) = %q, want %q", got, want)
	}
	bad := logsWith(h, LogAuditUndecodable)
	if len(bad) != 1 || bad[0].Attrs["line"] != "3" || bad[0].Attrs["file"] != log || bad[0].Attrs["text"] != "this is not JSON" {
		t.Errorf("undecodable notes = %+v", bad)
	}
	if ids := logsWith(h, LogAuditIdentities); len(ids) != 1 || ids[0].Attrs["system:kube-scheduler"] != "scheduler" {
		t.Errorf("identity notes = %+v", ids)
	}
}

// An API server that died mid-line and, restarted, appended to the same
// file: the torn start is noted, the whole event after it is read.
func TestAuditTailerRestartAppends(t *testing.T) {
	rec, hpath := newRecorder(t)
	log := filepath.Join(t.TempDir(), "audit.log")
	stop := tail(t, rec, nil, log)
	b := auditLine(t, "binding")
	appendTo(t, log, b)
	appendTo(t, log, auditLine(t, "delete_graceful")[:300]) // dies
	time.Sleep(20 * time.Millisecond)
	appendTo(t, log, auditLine(t, "eviction")) // restarted
	appendTo(t, log, auditLine(t, "list"))
	eventually(t, "three calls", func() bool { return apiCount(t, hpath) == 3 })
	stop()
	rec.Close()
	h := load(t, hpath)
	torn := logsWith(h, LogAuditTorn)
	if len(torn) != 1 || torn[0].Attrs["line"] != "2" || !strings.HasPrefix(torn[0].Attrs["text"], `{"kind":"Event"`) {
		t.Errorf("torn notes = %+v", torn)
	}
	if bad := logsWith(h, LogAuditUndecodable); len(bad) != 0 {
		t.Errorf("undecodable notes = %+v", bad)
	}
	for _, c := range h.API {
		if c.Subresource == "" && c.Verb == "delete" {
			t.Errorf("the torn deletion was recorded: %+v", c)
		}
	}
}

// When the context ends the files are read to their end: a whole last
// line without its newline counts, a torn one is noted.
func TestAuditTailerFinalDrain(t *testing.T) {
	rec, hpath := newRecorder(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.log"), filepath.Join(dir, "b.log")
	appendTo(t, a, auditLine(t, "binding"))
	appendTo(t, a, bytes.TrimSpace(auditLine(t, "eviction")))
	appendTo(t, b, auditLine(t, "list"))
	appendTo(t, b, auditLine(t, "conflict")[:200])
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tl := &AuditTailer{Rec: rec, Paths: []string{a, b}, Start: pastStart}
	if err := tl.Run(ctx); err != nil {
		t.Fatal(err)
	}
	rec.Close()
	h := load(t, hpath)
	if len(h.API) != 3 {
		t.Errorf("%d calls, want 3: %+v", len(h.API), h.API)
	}
	if bad := logsWith(h, LogAuditUndecodable); len(bad) != 1 || bad[0].Attrs["file"] != b || bad[0].Attrs["line"] != "2" {
		t.Errorf("undecodable notes = %+v", bad)
	}
}

// Several API servers' files are merged; a file that does not exist yet
// is waited for; own users are left out.
func TestAuditTailerSeveralFiles(t *testing.T) {
	rec, hpath := newRecorder(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "apiserver-0.log"), filepath.Join(dir, "apiserver-1.log")
	ids := NewIdentityMap()
	ids.AddOwn("podsafe:admin", apiserver.IdentityAdmin)
	stop := tail(t, rec, ids, a, b)
	appendTo(t, a, auditLine(t, "binding"))
	appendTo(t, a, auditLine(t, "eviction")) // own user's
	time.Sleep(30 * time.Millisecond)
	appendTo(t, b, auditLine(t, "delete_kubelet"))
	appendTo(t, b, auditLine(t, "create_generated"))
	appendTo(t, a, auditLine(t, "node_status_patch"))
	eventually(t, "four calls", func() bool { return apiCount(t, hpath) == 4 })
	stop()
	rec.Close()
	h := load(t, hpath)
	for _, c := range h.API {
		if c.Identity == apiserver.IdentityAdmin {
			t.Errorf("own user's call recorded: %+v", c)
		}
	}
	if own := logsWith(h, LogAuditOwnUsers); len(own) != 1 || own[0].Attrs["users"] != "podsafe:admin" {
		t.Errorf("own-user notes = %+v", own)
	}
	if errs := logsWith(h, LogAuditError); len(errs) != 0 {
		t.Errorf("a missing file was an error: %+v", errs)
	}
}

// A file that shrinks, or is replaced, is read again from its start.
func TestAuditTailerTruncatedAndReplaced(t *testing.T) {
	rec, hpath := newRecorder(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "audit.log")
	appendTo(t, log, auditLine(t, "binding"))
	appendTo(t, log, auditLine(t, "list"))
	stop := tail(t, rec, nil, log)
	eventually(t, "two calls", func() bool { return apiCount(t, hpath) == 2 })

	if err := os.Truncate(log, 0); err != nil {
		t.Fatal(err)
	}
	time.Sleep(30 * time.Millisecond)
	appendTo(t, log, auditLine(t, "eviction"))
	eventually(t, "the call after the truncation", func() bool { return apiCount(t, hpath) == 3 })

	next := filepath.Join(dir, "audit.log.new")
	appendTo(t, next, auditLine(t, "version"))
	appendTo(t, log, auditLine(t, "conflict")) // the old file's last line
	if err := os.Rename(next, log); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the replaced file's call", func() bool { return apiCount(t, hpath) == 5 })
	stop()
	rec.Close()
	h := load(t, hpath)
	var reasons []string
	for _, l := range logsWith(h, LogAuditReopened) {
		reasons = append(reasons, l.Attrs["reason"])
	}
	if strings.Join(reasons, ",") != "truncated,replaced" {
		t.Errorf("reopen notes: %q", reasons)
	}
}

// A line longer than MaxLine is skipped and noted; the next is read.
func TestAuditTailerLongLine(t *testing.T) {
	rec, hpath := newRecorder(t)
	log := filepath.Join(t.TempDir(), "audit.log")
	long := bytes.Repeat([]byte("x"), 200<<10) // longer than a read
	appendTo(t, log, append(long, '\n'))
	appendTo(t, log, auditLine(t, "binding"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tl := &AuditTailer{Rec: rec, Paths: []string{log}, Start: pastStart, MaxLine: 4096}
	if err := tl.Run(ctx); err != nil {
		t.Fatal(err)
	}
	rec.Close()
	h := load(t, hpath)
	bad := logsWith(h, LogAuditUndecodable)
	if len(h.API) != 1 || len(bad) != 1 || bad[0].Attrs["line"] != "1" || !strings.Contains(bad[0].Attrs["error"], "longer than 4096") {
		t.Errorf("calls %+v, notes %+v", h.API, bad)
	}
}

// A call's Return is never after the time it was read: an API server
// whose clock runs ahead does not put calls in the future.
func TestAuditTailerClampsFutureTimes(t *testing.T) {
	rec, hpath := newRecorder(t)
	log := filepath.Join(t.TempDir(), "audit.log")
	ev := fixture(t, "binding")
	future := time.Now().Add(time.Hour)
	ev.RequestReceivedTimestamp, ev.StageTimestamp = future, future.Add(time.Millisecond)
	line := []byte(strings.Replace(strings.Replace(string(auditLine(t, "binding")),
		"2026-11-24T12:00:01.250000Z", ev.RequestReceivedTimestamp.UTC().Format(time.RFC3339Nano), 1),
		"2026-11-24T12:00:01.262417Z", ev.StageTimestamp.UTC().Format(time.RFC3339Nano), 1))
	appendTo(t, log, line)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := (&AuditTailer{Rec: rec, Paths: []string{log}}).Run(ctx); err != nil {
		t.Fatal(err)
	}
	rec.Close()
	h := load(t, hpath)
	if len(h.API) != 1 {
		t.Fatalf("calls %+v", h.API)
	}
	if c := h.API[0]; c.Return > c.T || c.Invoke > c.Return {
		t.Errorf("call invoke %d return %d recorded at %d", c.Invoke, c.Return, c.T)
	}
}

func TestAuditTailerNeedsRecorder(t *testing.T) {
	if err := (&AuditTailer{}).Run(context.Background()); err == nil {
		t.Error("Run without a recorder succeeded")
	}
}
