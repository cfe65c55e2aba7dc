package history

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"sort"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// FuzzRead feeds Read arbitrary bytes. Read never panics; its error is
// ErrEmpty, an I/O error, or a *CorruptError naming a line of the input;
// a loaded history is the same however the bytes arrive, every cut of it
// (a crash in the middle of a write) loads too, and writing it back out in
// the Recorder's line format and reading that gives the same history.
func FuzzRead(f *testing.F) {
	// testdata/fuzz/FuzzRead/recorded is a history the Recorder wrote, with
	// a line of every kind. (A Recorder made here, in each fuzz worker,
	// stalls the workers.)
	small := []byte(`{"kind":"meta","t":0,"run_id":"r","start":"2026-01-02T03:04:05Z"}` + "\n" +
		`{"kind":"invoke","t":5,"id":1,"process":0,"f":"create","key":"k","value":"a","invoke":5}` + "\n" +
		`{"kind":"complete","t":9,"id":1,"process":0,"f":"create","key":"k","value":"a","status":"ok","invoke":5,"return":9}` + "\n" +
		`{"kind":"nemesis","t":10,"id":1,"name":"partition","phase":"start","targets":["m1"],"wall":"2026-01-02T03:04:06Z"}` + "\n" +
		`{"kind":"nemesis","t":20,"id":1,"name":"partition","phase":"end","wall":"2026-01-02T03:04:07Z"}` + "\n" +
		`{"kind":"nemesis","t":30,"name":"kill","phase":"end","wall":"2026-01-02T03:04:08Z"}` + "\n" +
		`{"kind":"nemesis","t":31,"name":"pause","phase":"start","wall":"2026-01-02T03:04:08Z"}` + "\n")
	f.Add(small)
	f.Add(small[:len(small)-7]) // torn last line
	// Compressed: whole, cut short, and with a damaged block.
	var zbuf bytes.Buffer
	zw := gzip.NewWriter(&zbuf)
	zw.Write(small)
	zw.Close()
	gz := zbuf.Bytes()
	f.Add(gz)
	f.Add(gz[:len(gz)/2])
	damaged := bytes.Clone(gz)
	damaged[len(damaged)/2] ^= 0x55
	f.Add(damaged)
	f.Add(bytes.ReplaceAll(small, []byte("\n"), []byte("\r\n")))
	for _, s := range []string{
		"",
		"\n\n",
		`{"kind":"meta","t":0,"run_id":"x","start":"2026-01-02T03:04:05Z"}`,
		`{"kind":"meta","t":0}` + "\n" + `{"kind":"meta","t":1}` + "\n",
		`{"kind":"invoke","t":0,"id":1}` + "\n",
		`{"kind":"meta","t":0}` + "\n" + `{"kind":"complete","t":1,"id":9,"status":"ok"}` + "\n",
		`{"kind":"meta","t":0}` + "\n" + `{"kind":"invoke","t":1,"id":1,"invoke":5}` + "\n" + `{"kind":"invoke","t":2,"id":1}` + "\n",
		`{"kind":"meta","t":0}` + "\n" + `{"kind":"nemesis","t":3,"name":"x","phase":"middle"}` + "\n",
		`{"kind":"meta","t":0}` + "\n" + `{"kind":"future","t":9,"x":[1,2]}` + "\n" + `{"kind":"log","t":-4,"msg":"m","wall":"2026-01-02T03:04:05+01:00"}` + "\n",
		`{"kind":"meta","t":0}` + "\n" + `not json` + "\n" + `{"kind":"log","t":1}` + "\n",
		`{"kind":"meta","t":0}` + "\n" + `{"kind":"store","t":1,"type":"ADDED","resource":"pods","name":"p","rv":"1","object":{ "a" : [1, 2] , "b":"<&>"}}` + "\n",
		`{"KIND":"meta","T":0}` + "\n" + `{"kind":"api","t":1,"verb":"delete","grace":-1,"invoke":2,"return":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		defer time.AfterFunc(10*time.Second, func() {
			buf := make([]byte, 1<<20)
			panic(fmt.Sprintf("FuzzRead hangs on %q:\n%s", data, buf[:runtime.Stack(buf, true)]))
		}).Stop()
		if bytes.HasPrefix(data, gzipMagic[:]) {
			checkCompressed(t, data)
			return
		}
		h, err := Read(bytes.NewReader(data))
		lines := countLines(data)
		if err != nil {
			var ce *CorruptError
			switch {
			case errors.Is(err, ErrEmpty):
			case errors.As(err, &ce):
				if ce.Line < 1 || ce.Line > lines || ce.Path != "" {
					t.Fatalf("CorruptError names line %d (path %q) of an input of %d lines: %v", ce.Line, ce.Path, lines, err)
				}
			default:
				t.Fatalf("Read of bytes: %v, want ErrEmpty or a *CorruptError", err)
			}
		} else {
			checkLoaded(t, h, lines)
		}

		// However the bytes arrive, the answer is the same.
		h2, err2 := Read(iotest.OneByteReader(bytes.NewReader(data)))
		if diff := cmp.Diff(errString(err), errString(err2)); diff != "" {
			t.Fatalf("Read one byte at a time errs differently (-whole +bytewise):\n%s", diff)
		}
		if !cmp.Equal(h, h2, historyOpts...) {
			t.Fatalf("Read one byte at a time loads differently (-whole +bytewise):\n%s", cmp.Diff(h, h2, historyOpts...))
		}

		// A reader that fails is an I/O error, unless a line before it was
		// corrupt.
		boom := errors.New("disk on fire")
		_, err = Read(io.MultiReader(bytes.NewReader(data), iotest.ErrReader(boom)))
		var ce *CorruptError
		if !errors.Is(err, boom) && !errors.As(err, &ce) {
			t.Fatalf("Read from a failing reader: %v, want the reader's error or a *CorruptError", err)
		}

		if h == nil || h.Truncated {
			return
		}
		// A crash in the middle of a write leaves a prefix: it loads (or is
		// empty, before the meta line is whole).
		for _, cut := range cuts(len(data)) {
			p, err := Read(bytes.NewReader(data[:cut]))
			if err != nil && !errors.Is(err, ErrEmpty) {
				t.Fatalf("the first %d of %d bytes do not load: %v", cut, len(data), err)
			}
			if p != nil && cut < len(data) && data[cut-1] == '\n' && p.Truncated {
				t.Fatalf("the first %d bytes end a line, yet load as truncated at line %d", cut, p.TruncatedLine)
			}
		}

		// Written back out line by line, it loads as itself.
		out, err := Encode(h)
		if err != nil {
			t.Fatalf("encoding a loaded history: %v", err)
		}
		back, err := Read(bytes.NewReader(out))
		if err != nil {
			t.Fatalf("reloading the re-encoded history: %v\n%s", err, out)
		}
		if c, cb := canonical(h), canonical(back); !cmp.Equal(c, cb, reloadOpts...) {
			t.Fatalf("re-encoded history loads differently (-loaded +reloaded):\n%s\n%s", cmp.Diff(c, cb, reloadOpts...), out)
		}
	})
}

// checkLoaded checks what Read promises of a history it returns.
func checkLoaded(t *testing.T, h *History, lines int) {
	t.Helper()
	if h.Truncated && (h.TruncatedLine < 1 || h.TruncatedLine != lines) {
		t.Fatalf("truncated at line %d of %d, want the last", h.TruncatedLine, lines)
	}
	if !h.Truncated && h.TruncatedLine != 0 {
		t.Fatalf("not truncated, yet TruncatedLine is %d", h.TruncatedLine)
	}
	if h.End < 0 {
		t.Fatalf("End %d < 0", h.End)
	}
	for i, op := range h.Ops {
		if op.Status == "" || op.Status == StatusUnknown && op.Return != math.MaxInt64 {
			t.Fatalf("op %d: status %q, return %d", op.ID, op.Status, op.Return)
		}
		if i > 0 && (h.Ops[i-1].Invoke > op.Invoke || h.Ops[i-1].Invoke == op.Invoke && h.Ops[i-1].ID >= op.ID) {
			t.Fatalf("ops %d and %d out of order", h.Ops[i-1].ID, op.ID)
		}
	}
	if !sort.SliceIsSorted(h.API, func(i, j int) bool { return h.API[i].Invoke < h.API[j].Invoke }) {
		t.Fatal("API calls out of invoke order")
	}
	if !sort.SliceIsSorted(h.Watch, func(i, j int) bool { return h.Watch[i].T < h.Watch[j].T }) {
		t.Fatal("watch lines out of time order")
	}
	if !sort.SliceIsSorted(h.Nemesis, func(i, j int) bool { return h.Nemesis[i].Start < h.Nemesis[j].Start }) {
		t.Fatal("faults out of start order")
	}
	for _, in := range h.Nemesis {
		if !in.Healed && in.End != h.End {
			t.Fatalf("unhealed fault %q ends at %d, not at the history's end %d", in.Name, in.End, h.End)
		}
	}
	ts := []int64{}
	for _, c := range h.API {
		ts = append(ts, c.T)
	}
	for _, e := range h.Ledger {
		ts = append(ts, e.T)
	}
	for _, e := range h.Store {
		ts = append(ts, e.T)
	}
	for _, e := range h.Logs {
		ts = append(ts, e.T)
	}
	for _, e := range h.Watch {
		ts = append(ts, e.T)
	}
	for _, e := range h.Other {
		ts = append(ts, e.T)
	}
	for _, x := range ts {
		if x > h.End {
			t.Fatalf("an event at t=%d is after the history's end %d", x, h.End)
		}
	}
}

// checkCompressed checks Read of bytes that open as gzip: a stream that
// gunzip reads to its end loads as its content does plain; one it cannot is
// a *CorruptError (ErrCorruptGzip, or a line over the limit found first).
func checkCompressed(t *testing.T, data []byte) {
	t.Helper()
	h, err := Read(bytes.NewReader(data))
	var plain []byte
	zr, perr := gzip.NewReader(bytes.NewReader(data))
	if perr == nil {
		plain, perr = io.ReadAll(io.LimitReader(zr, 64<<20))
	}
	if perr != nil {
		var ce *CorruptError
		if !errors.As(err, &ce) || !(errors.Is(err, ErrCorruptGzip) || errors.Is(err, errLineTooLong)) {
			t.Fatalf("Read of a gzip stream gunzip fails on (%v): %v, want a CorruptError", perr, err)
		}
		return
	}
	if bytes.HasPrefix(plain, gzipMagic[:]) {
		return // compressed twice: Read decompresses once, as gunzip does
	}
	hp, errp := Read(bytes.NewReader(plain))
	if diff := cmp.Diff(errString(errp), errString(err)); diff != "" {
		t.Fatalf("compressed errs differently from plain (-plain +gz):\n%s", diff)
	}
	if !cmp.Equal(hp, h, historyOpts...) {
		t.Fatalf("compressed loads differently from plain (-plain +gz):\n%s", cmp.Diff(hp, h, historyOpts...))
	}
}

// countLines counts the lines as Read does: a last line without a newline
// counts.
func countLines(data []byte) int {
	n := bytes.Count(data, []byte("\n"))
	if len(data) > 0 && data[len(data)-1] != '\n' {
		n++
	}
	return n
}

// cuts picks up to 8 cut points in (0, n], spread over the input, so that
// one run stays fast.
func cuts(n int) []int {
	if n == 0 {
		return nil
	}
	step := max(1, n/8)
	var out []int
	for c := step; c < n; c += step {
		out = append(out, c)
	}
	return append(out, n)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

var historyOpts = []cmp.Option{cmp.Transformer("raw", rawJSON)}

// reloadOpts compare a history with its re-encoding: a raw JSON object
// comes back compacted, empty and absent lists are alike, and unknown
// lines keep their content but not their line numbers.
var reloadOpts = []cmp.Option{
	// EquateEmpty compares two empty raw messages.
	cmp.FilterValues(func(a, b json.RawMessage) bool { return len(a) > 0 || len(b) > 0 }, cmp.Transformer("raw", rawJSON)),
	cmpopts.EquateEmpty(),
	cmpopts.IgnoreFields(RawEvent{}, "Line"),
	cmpopts.IgnoreFields(History{}, "Truncated", "TruncatedLine"),
}

// rawJSON decodes a raw message for comparison; one that does not decode
// compares as its bytes.
func rawJSON(m json.RawMessage) any {
	var v any
	if err := json.Unmarshal(m, &v); err != nil {
		return string(m)
	}
	return v
}

// canonical is the part of h that the line format carries, with the faults
// in a total order: faults alike in start, name and ID keep the order of
// their lines, which re-encoding does not keep.
func canonical(h *History) *History {
	c := &History{Meta: h.Meta, Ops: h.Ops, API: h.API, Ledger: h.Ledger, Store: h.Store, Logs: h.Logs,
		Watch: h.Watch, Other: h.Other, End: h.End}
	c.Nemesis = append([]Interval(nil), h.Nemesis...)
	sort.SliceStable(c.Nemesis, func(i, j int) bool {
		return fmt.Sprintf("%020d %+v", uint64(c.Nemesis[i].Start)^1<<63, c.Nemesis[i]) <
			fmt.Sprintf("%020d %+v", uint64(c.Nemesis[j].Start)^1<<63, c.Nemesis[j])
	})
	return c
}
