package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/podsafe/podsafe/checker"
)

// TestWriteResultsAtomic: results.json is replaced whole, with no temporary
// file left beside it, and a write that cannot happen (a read-only run
// directory) leaves the old results intact rather than truncated.
func TestWriteResultsAtomic(t *testing.T) {
	dir := t.TempDir()
	if err := WriteResults(dir, Results{Scenario: "register", Verdict: checker.Ok}); err != nil {
		t.Fatal(err)
	}
	if err := WriteResults(dir, Results{Scenario: "register", Verdict: checker.Illegal}); err != nil {
		t.Fatal(err)
	}
	r, err := ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r.Verdict != checker.Illegal {
		t.Errorf("verdict %s after the rewrite, want %s", r.Verdict, checker.Illegal)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != ResultsFile {
			t.Errorf("%s left beside results.json", e.Name())
		}
	}

	if os.Geteuid() == 0 {
		t.Skip("root writes into read-only directories")
	}
	old, _ := os.ReadFile(filepath.Join(dir, ResultsFile))
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
	err = WriteResults(dir, Results{Scenario: "register", Verdict: checker.Unknown})
	if err == nil || !strings.Contains(err.Error(), "writing results") {
		t.Fatalf("WriteResults into a read-only directory: %v", err)
	}
	if now, _ := os.ReadFile(filepath.Join(dir, ResultsFile)); string(now) != string(old) {
		t.Errorf("a failed write changed results.json:\n%s", now)
	}
}
