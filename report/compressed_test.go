package report

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/podsafe/podsafe/history"
)

// A finished run keeps its history compressed: every reader of a run
// (RenderDir, FindRuns, serve's index and renderer) reads it there.
func TestCompressedHistoryIsRead(t *testing.T) {
	store, srv, renders := servedStore(t, 1)
	dir := filepath.Join(store, "run-0")
	if _, err := history.Compress(filepath.Join(dir, HistoryFile)); err != nil {
		t.Fatal(err)
	}
	// A run with a compressed history and no results is a run too.
	lone := filepath.Join(store, "crashed-later")
	if err := os.MkdirAll(lone, 0o755); err != nil {
		t.Fatal(err)
	}
	testHistory(t, lone)
	if _, err := history.Compress(filepath.Join(lone, HistoryFile)); err != nil {
		t.Fatal(err)
	}
	runs, err := FindRuns(store)
	if err != nil || len(runs) != 2 || !IsRunDir(lone) {
		t.Fatalf("FindRuns = %v, %v; IsRunDir(history.jsonl.gz only) = %v", runs, err, IsRunDir(lone))
	}

	// serve renders the report from the compressed history (the faults
	// are in the history only) and lists the compressed file.
	rec := getReport(t, srv, "run-0")
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "kill-kubelet") {
		t.Fatalf("GET run-0/report.html: %d, the history's faults missing: %.300s", rec.Code, rec.Body)
	}
	idx := httptest.NewRecorder()
	srv.ServeHTTP(idx, httptest.NewRequest("GET", "/", nil))
	if body := idx.Body.String(); !strings.Contains(body, `href="/run-0/history.jsonl.gz"`) || strings.Contains(body, `href="/run-0/history.jsonl"`) {
		t.Errorf("the index does not link the compressed history alone:\n%s", body)
	}
	// The compressed history dates the cached report as the plain one did.
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(dir, CompressedHistoryFile), later, later); err != nil {
		t.Fatal(err)
	}
	mustReport(t, srv, "run-0")
	if n := renders.Load(); n != 2 {
		t.Errorf("%d renders after the compressed history changed, want 2", n)
	}

	// podsafe report's RenderDir reads it too.
	os.Remove(filepath.Join(dir, ReportFile))
	if err := RenderDir(dir); err != nil {
		t.Fatalf("RenderDir: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, ReportFile)); !strings.Contains(string(b), "kill-kubelet") {
		t.Error("report.html rendered by RenderDir lacks the history's faults")
	}
}
