package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "results.json")
	if err := WriteFile(path, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new\n" {
		t.Errorf("content %q, want %q", b, "new\n")
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm()&0o044 == 0 {
		t.Errorf("mode %v: the file is not readable by others, as os.WriteFile's 0644 would be", st.Mode())
	}
	assertOnly(t, dir, "results.json")
}

// TestWriteFailureKeepsOld: a write that fails midway leaves the old file
// whole and no temporary file behind.
func TestWriteFailureKeepsOld(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "results.json")
	if err := WriteFile(path, []byte(`{"verdict":"Ok"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("disk full")
	err := Write(path, 0o644, func(w io.Writer) error {
		io.WriteString(w, `{"verd`)
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Write error = %v, want %v", err, boom)
	}
	if b, _ := os.ReadFile(path); string(b) != `{"verdict":"Ok"}` {
		t.Errorf("after a failed write the file holds %q", b)
	}
	assertOnly(t, dir, "results.json")
}

// TestWriteReadOnlyDirKeepsOld: in a directory podsafe may not write, the
// write fails and the old file stays (os.WriteFile would have truncated it,
// the file itself being writable).
func TestWriteReadOnlyDirKeepsOld(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root writes into read-only directories")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "results.json")
	if err := WriteFile(path, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
	if err := WriteFile(path, []byte("new\n"), 0o644); err == nil {
		t.Fatal("writing into a read-only directory succeeded")
	}
	if b, _ := os.ReadFile(path); string(b) != "old\n" {
		t.Errorf("after a failed write the file holds %q", b)
	}
}

func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if len(got) != len(names) {
		t.Errorf("directory holds %q, want %q", got, names)
	}
}
