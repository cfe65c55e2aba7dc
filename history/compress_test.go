package history

import (
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// recordSome writes a closed history with a few events of several kinds
// and returns its path.
func recordSome(t *testing.T) string {
	t.Helper()
	r := mustCreate(t)
	for i := range 50 {
		op := &Op{Process: i % 3, Func: "create", Key: "k", Value: strings.Repeat("v", i)}
		r.Invoke(op)
		r.API(APICall{Identity: "workload", Verb: "create", Resource: "leases", Name: "k"})
		r.Store(StoreEvent{Type: "ADDED", Resource: "leases", Namespace: "ns", Name: "k", RV: "1"})
		op.Status = StatusOK
		r.Complete(op)
	}
	r.Log("done", nil)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	return r.Path()
}

func gzipBytes(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestCompressRoundTrip(t *testing.T) {
	path := recordSome(t)
	plain, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := mustLoad(t, path)

	gz, err := Compress(path)
	if err != nil {
		t.Fatalf("Compress: %v", err)
	}
	if gz != path+CompressedExt {
		t.Errorf("Compress wrote %s, want %s", gz, path+CompressedExt)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the plain history is still there after Compress: %v", err)
	}
	if st, err := os.Stat(gz); err != nil || st.Size() >= int64(len(plain)) {
		t.Errorf("compressed history: %v, %d bytes from %d", err, st.Size(), len(plain))
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("Compress left %d files, want the compressed history only: %v", len(entries), entries)
	}
	// The plain name finds the compressed file; the compressed name, and
	// the bytes read from any stream, read as the plain history did.
	for name, load := range map[string]func() (*History, error){
		"plain name": func() (*History, error) { return Load(path) },
		"gz name":    func() (*History, error) { return Load(gz) },
		"stream": func() (*History, error) {
			f, err := os.Open(gz)
			if err != nil {
				return nil, err
			}
			defer f.Close()
			return Read(f)
		},
	} {
		got, err := load()
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: compressed history loads differently (-plain +gz):\n%s", name, diff)
		}
	}
	// The file is plain gzip, which gunzip reads back to the same bytes.
	b, _ := os.ReadFile(gz)
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var back bytes.Buffer
	if _, err := back.ReadFrom(zr); err != nil || !bytes.Equal(back.Bytes(), plain) {
		t.Errorf("gunzip of the compressed history: %v, equal %v", err, bytes.Equal(back.Bytes(), plain))
	}
}

func TestLocatePrefersThePlainHistory(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "history.jsonl")
	if got := Locate(path); got != path {
		t.Errorf("Locate with neither file = %s, want the plain name", got)
	}
	gzMeta := `{"kind":"meta","t":0,"scenario":"from-gz"}` + "\n"
	if err := os.WriteFile(path+CompressedExt, gzipBytes(t, []byte(gzMeta)), 0o644); err != nil {
		t.Fatal(err)
	}
	if h := mustLoad(t, path); h.Meta.Scenario != "from-gz" {
		t.Errorf("with only the compressed file, Load read scenario %q", h.Meta.Scenario)
	}
	// A compression cut short between the rename and the removal leaves
	// both: the plain file, the original, is read.
	if err := os.WriteFile(path, []byte(`{"kind":"meta","t":0,"scenario":"from-plain"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if h := mustLoad(t, path); h.Meta.Scenario != "from-plain" {
		t.Errorf("with both files, Load read scenario %q, want the plain file's", h.Meta.Scenario)
	}
	if got := Locate(path + CompressedExt); got != path+CompressedExt {
		t.Errorf("Locate of a compressed name = %s, want it unchanged", got)
	}
}

func TestLoadCorruptGzip(t *testing.T) {
	path := recordSome(t)
	plain, _ := os.ReadFile(path)
	gz := gzipBytes(t, plain)
	flipped := bytes.Clone(gz)
	flipped[len(flipped)/2] ^= 0xff
	badCRC := bytes.Clone(gz)
	badCRC[len(badCRC)-6] ^= 0xff // the CRC-32 of the trailer
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"truncated mid-stream", gz[:len(gz)/2]},
		{"trailer missing", gz[:len(gz)-8]},
		{"header only", gz[:10]},
		{"magic only", gz[:3]},
		{"damaged block", flipped},
		{"wrong checksum", badCRC},
		{"garbage after the stream", append(bytes.Clone(gz), "not gzip"...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "history.jsonl.gz")
			if err := os.WriteFile(file, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(filepath.Join(filepath.Dir(file), "history.jsonl"))
			var ce *CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorruptGzip) {
				t.Fatalf("Load: %v, want a CorruptError for a corrupt compressed history", err)
			}
			if ce.Path != file || !strings.HasPrefix(err.Error(), file+":") || strings.Count(err.Error(), ErrCorruptGzip.Error()) != 1 {
				t.Errorf("error %q does not name %s once", err, file)
			}
		})
	}
}

func TestLoadGzipKeepsTheLimits(t *testing.T) {
	meta := `{"kind":"meta","t":0,"scenario":"x"}` + "\n"
	long := `{"kind":"log","t":2,"msg":"` + strings.Repeat("b", MaxLineBytes) + `"}` + "\n"
	path := filepath.Join(t.TempDir(), "history.jsonl.gz")
	if err := os.WriteFile(path, gzipBytes(t, []byte(meta+long)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Line != 2 || !errors.Is(err, errLineTooLong) || ce.Path != path {
		t.Fatalf("Load of a compressed history whose line 2 is over the limit: %v, want a CorruptError naming the file and line 2", err)
	}

	// A torn last line (a recorder that failed mid-write, compressed as
	// it was) reads as it does plain.
	torn := meta + `{"kind":"log","t":1,"msg":"a"}` + "\n" + `{"kind":"log","t":2,"ms`
	if err := os.WriteFile(path, gzipBytes(t, []byte(torn)), 0o644); err != nil {
		t.Fatal(err)
	}
	h := mustLoad(t, path)
	if !h.Truncated || h.TruncatedLine != 3 || len(h.Logs) != 1 {
		t.Errorf("torn compressed history: Truncated %v at %d, %d logs; want line 3 dropped", h.Truncated, h.TruncatedLine, len(h.Logs))
	}

	// A corrupt line inside the stream is named by its line as plain.
	bad := meta + `{"kind":"invoke",` + "\n" + `{"kind":"log","t":2,"msg":"a"}` + "\n"
	if err := os.WriteFile(path, gzipBytes(t, []byte(bad)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); !errors.As(err, &ce) || ce.Line != 2 || errors.Is(err, ErrCorruptGzip) {
		t.Errorf("Load of a whole gzip holding a corrupt line 2: %v", err)
	}
}

func TestLoadRefusesNonRegularCompressedFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "history.jsonl.gz"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Load(filepath.Join(dir, "history.jsonl"))
	if err == nil || !strings.Contains(err.Error(), "history.jsonl.gz") {
		t.Fatalf("Load with a directory named history.jsonl.gz: %v, want an error naming it", err)
	}
}

func TestCompressFailureKeepsThePlainHistory(t *testing.T) {
	dir := t.TempDir()
	if _, err := Compress(filepath.Join(dir, "history.jsonl")); err == nil {
		t.Error("Compress of a missing history succeeded")
	}
	if _, err := Compress(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("Compress of a directory: %v", err)
	}
	path := recordSome(t)
	// A directory in the way of the compressed file's name: the rename
	// fails, and the plain history stays whole.
	if err := os.Mkdir(path+CompressedExt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(path+CompressedExt, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Compress(path); err == nil {
		t.Fatal("Compress over a directory succeeded")
	}
	mustLoad(t, path)
	entries, _ := os.ReadDir(filepath.Dir(path))
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("Compress left its temporary file %s", e.Name())
		}
	}
}
