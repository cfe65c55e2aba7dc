package history

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
)

// History is a loaded history. It is a plain value: checkers read it and
// never change it.
type History struct {
	Meta Meta
	// Ops are the client operations, paired, sorted by invoke time. An
	// operation that never completed has status unknown and Return
	// math.MaxInt64.
	Ops []Op
	// API holds the recorded API calls, sorted by invoke time.
	API []APICall
	// Nemesis holds the faults, sorted by start time.
	Nemesis []Interval
	Ledger  []LedgerEntry
	Store   []StoreEvent
	Logs    []LogEntry
	// Watch holds the watch lines, sorted by time; the lines of one
	// watcher keep their recorded order.
	Watch []WatchEvent
	// Other keeps lines of kinds this version does not know.
	Other []RawEvent
	// End is the largest t of any event: the end of the history.
	End int64
	// Truncated reports that the last line was torn (a crash during a
	// write) and was dropped, or lacked its newline.
	Truncated bool
	// TruncatedLine is the number of the torn line when Truncated.
	TruncatedLine int
	// Complete reports that the history ends with its closing record: the
	// run's recorder was closed. A history without one was left by a run
	// that was killed (or crashed) before it finished.
	Complete bool
	// Closing is the closing record, when Complete.
	Closing End
}

// MaxLineBytes bounds one line of a history. A Kubernetes object is at most
// about 1.5 MiB in etcd; a line is one event, so 16 MiB leaves room for the
// largest list or store event while keeping a reader's memory bounded. Read
// refuses a longer line; a Recorder never writes one.
const MaxLineBytes = 16 << 20

// Load reads the history saved at path, plain or compressed: when path does
// not exist, path+CompressedExt is read (see Locate), and a file is read as
// gzip when it opens with gzip's magic bytes, whatever its name. Errors about
// the content are *CorruptError values naming the file read and the line; a
// compressed file that is truncated or damaged is one (ErrCorruptGzip).
func Load(path string) (*History, error) {
	path = Locate(path)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("loading history: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return nil, fmt.Errorf("loading history: %w", err)
	} else if !st.Mode().IsRegular() {
		// A device or a pipe may never end (/dev/zero): only files are
		// histories.
		return nil, fmt.Errorf("loading history %s: not a regular file (%s)", path, st.Mode().Type())
	}
	h, err := Read(f)
	if err != nil {
		var ce *CorruptError
		if errors.As(err, &ce) {
			ce.Path = path
			return nil, ce
		}
		return nil, fmt.Errorf("loading history %s: %w", path, err)
	}
	return h, nil
}

// header is the part of every line that says how to decode the rest.
type header struct {
	Kind Kind   `json:"kind"`
	T    *int64 `json:"t"`
}

// Read parses a history from r, plain or gzip-compressed (told apart by
// gzip's magic bytes). A last line that does not decode is taken to be torn
// by a crash: it is dropped and reported by Truncated. A line before the
// last that does not decode, or any line that contradicts the lines before
// it, is a *CorruptError; so is a compressed stream that is truncated or
// damaged (ErrCorruptGzip), since a history is compressed only once its run
// is over and whole. MaxLineBytes bounds a decompressed line as it bounds a
// plain one.
func Read(r io.Reader) (*History, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	compressed := false
	if magic, _ := br.Peek(len(gzipMagic)); bytes.Equal(magic, gzipMagic[:]) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, &CorruptError{Err: fmt.Errorf("%w: %w", ErrCorruptGzip, err)}
		}
		br, compressed = bufio.NewReaderSize(zr, 1<<16), true
	}
	// corrupt is the error for a bad line. In a compressed history a bad
	// line is more likely damage to the stream than a line written wrong
	// (a flipped bit decodes to garbage well before gzip's checksum at the
	// end), so the rest of the stream is checked first, up to a bound.
	corrupt := func(line int, err error) error {
		if compressed {
			if _, zerr := io.CopyN(io.Discard, br, maxDrain); zerr != nil && zerr != io.EOF {
				return &CorruptError{Line: line, Err: fmt.Errorf("%w: %w", ErrCorruptGzip, zerr)}
			}
		}
		return &CorruptError{Line: line, Err: err}
	}
	ld := loader{h: &History{}, invoked: map[uint64]int{}, completed: map[uint64]bool{}}
	var pending []byte // the previous line, decoded only once we know it is not the last
	pendingNo, lineNo := 0, 0
	for {
		line, err := readLine(br)
		if errors.Is(err, errLineTooLong) {
			return nil, &CorruptError{Line: lineNo + 1, Err: err}
		}
		if err != nil && err != io.EOF {
			if compressed {
				return nil, &CorruptError{Line: lineNo + 1, Err: fmt.Errorf("%w: %w", ErrCorruptGzip, err)}
			}
			return nil, fmt.Errorf("reading history: %w", err)
		}
		if len(line) > 0 {
			lineNo++
			if pending != nil {
				if derr := ld.line(pendingNo, pending); derr != nil {
					return nil, corrupt(pendingNo, derr)
				}
			}
			pending, pendingNo = line, lineNo
		}
		if err == io.EOF {
			break
		}
	}
	if pending != nil {
		complete := bytes.HasSuffix(pending, []byte("\n"))
		if derr := ld.line(pendingNo, pending); derr != nil {
			var ce *contradiction
			if errors.As(derr, &ce) {
				return nil, corrupt(pendingNo, derr)
			}
			ld.h.Truncated, ld.h.TruncatedLine = true, pendingNo
		} else if !complete {
			ld.h.Truncated, ld.h.TruncatedLine = true, pendingNo
		}
	}
	if !ld.sawMeta {
		return nil, ErrEmpty
	}
	return ld.finish(), nil
}

// maxDrain bounds how much of a compressed history Read decompresses past
// a bad line to tell damage to the stream from a bad line.
const maxDrain = 1 << 30

// errLineTooLong is the cause of a CorruptError for a line over MaxLineBytes.
var errLineTooLong = fmt.Errorf("line longer than %d bytes", MaxLineBytes)

// readLine is bufio.Reader.ReadBytes('\n') bounded by MaxLineBytes: past
// the limit it stops reading and returns errLineTooLong.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(line)+len(frag) > MaxLineBytes {
			return nil, errLineTooLong
		}
		if err == nil || !errors.Is(err, bufio.ErrBufferFull) {
			if line == nil {
				return bytes.Clone(frag), err
			}
			return append(line, frag...), err
		}
		line = append(line, frag...)
	}
}

// contradiction marks a line that decoded but conflicts with earlier lines;
// unlike a torn line it is an error even when it is the last.
type contradiction struct{ msg string }

func (c *contradiction) Error() string { return c.msg }

func contradict(format string, args ...any) error {
	return &contradiction{msg: fmt.Sprintf(format, args...)}
}

type openFault struct {
	ev    NemesisEvent
	start int64
}

// faultKey identifies an open fault: by ID when the nemesis gave one, else
// by name.
type faultKey struct {
	id   uint64
	name string
}

func keyOf(ev NemesisEvent) faultKey {
	if ev.ID != 0 {
		return faultKey{id: ev.ID}
	}
	return faultKey{name: ev.Name}
}

type loader struct {
	h         *History
	sawMeta   bool
	invoked   map[uint64]int // op ID → index in h.Ops
	completed map[uint64]bool
	open      map[faultKey][]openFault
	orphanEnd []NemesisEvent // ends that closed nothing
}

func (ld *loader) line(no int, raw []byte) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil
	}
	var hd header
	if err := json.Unmarshal(raw, &hd); err != nil {
		return fmt.Errorf("decoding event: %w", err)
	}
	if hd.Kind == "" || hd.T == nil {
		return fmt.Errorf("event without kind or t")
	}
	t := *hd.T
	if t > ld.h.End {
		ld.h.End = t
	}
	if !ld.sawMeta && hd.Kind != KindMeta {
		return contradict("first event is %q, want %q", hd.Kind, KindMeta)
	}
	switch hd.Kind {
	case KindMeta:
		if ld.sawMeta {
			return contradict("second meta event")
		}
		if err := json.Unmarshal(raw, &ld.h.Meta); err != nil {
			return fmt.Errorf("decoding meta event: %w", err)
		}
		ld.sawMeta = true
	case KindInvoke:
		var op Op
		if err := json.Unmarshal(raw, &op); err != nil {
			return fmt.Errorf("decoding invoke event: %w", err)
		}
		if _, dup := ld.invoked[op.ID]; dup {
			return contradict("second invoke of op %d", op.ID)
		}
		op.Status, op.Return = StatusUnknown, math.MaxInt64
		ld.invoked[op.ID] = len(ld.h.Ops)
		ld.h.Ops = append(ld.h.Ops, op)
	case KindComplete:
		var op Op
		if err := json.Unmarshal(raw, &op); err != nil {
			return fmt.Errorf("decoding complete event: %w", err)
		}
		i, ok := ld.invoked[op.ID]
		if !ok {
			return contradict("completion of op %d, which was never invoked", op.ID)
		}
		if ld.completed[op.ID] {
			return contradict("second completion of op %d", op.ID)
		}
		ld.completed[op.ID] = true
		op.Invoke = ld.h.Ops[i].Invoke
		if op.Status == "" {
			op.Status = StatusUnknown
		}
		if op.Status == StatusUnknown {
			op.Return = math.MaxInt64
		}
		ld.h.Ops[i] = op
	case KindAPI:
		var c APICall
		if err := json.Unmarshal(raw, &c); err != nil {
			return fmt.Errorf("decoding api event: %w", err)
		}
		c.T = t
		ld.h.API = append(ld.h.API, c)
	case KindNemesis:
		var ev NemesisEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return fmt.Errorf("decoding nemesis event: %w", err)
		}
		ev.T = t
		if err := ld.nemesis(ev); err != nil {
			return err
		}
	case KindLedger:
		var e LedgerEntry
		if err := json.Unmarshal(raw, &e); err != nil {
			return fmt.Errorf("decoding ledger event: %w", err)
		}
		e.T = t
		ld.h.Ledger = append(ld.h.Ledger, e)
	case KindStore:
		var e StoreEvent
		if err := json.Unmarshal(raw, &e); err != nil {
			return fmt.Errorf("decoding store event: %w", err)
		}
		e.T = t
		ld.h.Store = append(ld.h.Store, e)
	case KindLog:
		var e LogEntry
		if err := json.Unmarshal(raw, &e); err != nil {
			return fmt.Errorf("decoding log event: %w", err)
		}
		e.T = t
		ld.h.Logs = append(ld.h.Logs, e)
	case KindWatch:
		var e WatchEvent
		if err := json.Unmarshal(raw, &e); err != nil {
			return fmt.Errorf("decoding watch event: %w", err)
		}
		e.T = t
		ld.h.Watch = append(ld.h.Watch, e)
	case KindEnd:
		if ld.h.Complete {
			return contradict("second closing record")
		}
		if err := json.Unmarshal(raw, &ld.h.Closing); err != nil {
			return fmt.Errorf("decoding end event: %w", err)
		}
		ld.h.Complete = true
	default:
		ld.h.Other = append(ld.h.Other, RawEvent{Kind: hd.Kind, T: t, Line: no, Raw: bytes.Clone(raw)})
	}
	return nil
}

func (ld *loader) nemesis(ev NemesisEvent) error {
	if ld.open == nil {
		ld.open = map[faultKey][]openFault{}
	}
	k := keyOf(ev)
	switch ev.Phase {
	case PhaseStart:
		ld.open[k] = append(ld.open[k], openFault{ev: ev, start: ev.T})
	case PhaseEnd:
		q := ld.open[k]
		if len(q) == 0 {
			ld.orphanEnd = append(ld.orphanEnd, ev)
			return nil
		}
		s := q[0]
		if len(q) == 1 {
			delete(ld.open, k)
		} else {
			ld.open[k] = q[1:]
		}
		iv := intervalOf(s.ev, s.start, ev.T)
		iv.Healed, iv.EndWall = true, ev.Wall
		ld.h.Nemesis = append(ld.h.Nemesis, iv)
	default:
		return contradict("nemesis event %q has phase %q, want %q or %q", ev.Name, ev.Phase, PhaseStart, PhaseEnd)
	}
	return nil
}

func (ld *loader) finish() *History {
	h := ld.h
	for _, q := range ld.open {
		for _, s := range q {
			h.Nemesis = append(h.Nemesis, intervalOf(s.ev, s.start, h.End))
		}
	}
	// An end whose start was never recorded still shows the fault was
	// active before it; when it began is unknown, so the interval spans
	// from the start of the history.
	for _, ev := range ld.orphanEnd {
		iv := intervalOf(ev, 0, ev.T)
		iv.Healed, iv.StartWall, iv.EndWall = true, h.Meta.Start, ev.Wall
		h.Nemesis = append(h.Nemesis, iv)
	}
	sort.SliceStable(h.Ops, func(i, j int) bool {
		if h.Ops[i].Invoke != h.Ops[j].Invoke {
			return h.Ops[i].Invoke < h.Ops[j].Invoke
		}
		return h.Ops[i].ID < h.Ops[j].ID
	})
	sort.SliceStable(h.API, func(i, j int) bool { return h.API[i].Invoke < h.API[j].Invoke })
	// Lines are written in the order their writers take the file's lock,
	// which may differ a little from the order of their times; one
	// watcher's lines come from one goroutine, so a stable sort keeps them
	// in order.
	sort.SliceStable(h.Watch, func(i, j int) bool { return h.Watch[i].T < h.Watch[j].T })
	sort.SliceStable(h.Nemesis, func(i, j int) bool {
		a, b := h.Nemesis[i], h.Nemesis[j]
		if a.Start != b.Start {
			return a.Start < b.Start
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.ID < b.ID
	})
	return h
}
