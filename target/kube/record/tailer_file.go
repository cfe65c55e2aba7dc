package record

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/podsafe/podsafe/history"
)

// auditFile follows one audit log file; only its goroutine uses it.
type auditFile struct {
	path    string
	rec     *history.Recorder
	ids     *IdentityMap
	start   time.Time
	poll    time.Duration
	maxLine int

	f        *os.File
	off      int64  // bytes read from f
	buf      []byte // read buffer
	pending  []byte // bytes read after the last newline
	lineNo   int    // lines of f begun so far
	skipping bool   // discarding an over-long line up to its newline
	failing  bool   // an error was noted and no read succeeded since
}

// readChunk is the size of one read.
const readChunk = 64 << 10

// follow reads the file as it grows until ctx ends, then once more to its
// end.
func (f *auditFile) follow(ctx context.Context) {
	defer f.closeFile()
	for {
		done := ctx.Err() != nil
		f.readAvailable()
		if done {
			f.flushPending()
			return
		}
		f.checkReplaced()
		sleep(ctx, f.poll)
	}
}

// readAvailable opens the file if it is not open yet and reads it to its
// current end, handing each finished line to line.
func (f *auditFile) readAvailable() {
	if f.f == nil {
		fh, err := os.Open(f.path)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				f.fail(fmt.Errorf("opening audit log: %w", err))
			}
			return
		}
		f.f, f.off, f.pending, f.lineNo, f.skipping = fh, 0, f.pending[:0], 0, false
	}
	if f.buf == nil {
		f.buf = make([]byte, readChunk)
	}
	for {
		n, err := f.f.Read(f.buf)
		if n > 0 {
			f.failing = false
			f.off += int64(n)
			f.consume(f.buf[:n])
		}
		switch {
		case errors.Is(err, io.EOF), err == nil && n == 0:
			return
		case err != nil:
			f.fail(fmt.Errorf("reading audit log: %w", err))
			f.closeFile()
			return
		}
	}
}

// consume splits what was read into lines; the bytes after the last
// newline wait for the rest of their line.
func (f *auditFile) consume(chunk []byte) {
	for len(chunk) > 0 {
		i := bytes.IndexByte(chunk, '\n')
		end := i
		if i < 0 {
			end = len(chunk)
		}
		if !f.skipping && len(f.pending)+end > f.maxLine {
			f.lineNo++
			f.rec.Log(LogAuditUndecodable, map[string]string{"file": f.path, "line": fmt.Sprint(f.lineNo),
				"error": fmt.Sprintf("line longer than %d bytes, skipped", f.maxLine), "text": excerpt(append(f.pending, chunk[:min(end, excerptLen)]...))})
			f.pending, f.skipping = f.pending[:0], true
		}
		if i < 0 {
			if !f.skipping {
				f.pending = append(f.pending, chunk...)
			}
			return
		}
		switch {
		case f.skipping:
			f.skipping = false
		case len(f.pending) == 0:
			f.lineNo++
			f.line(f.lineNo, chunk[:i])
		default:
			f.lineNo++
			f.pending = append(f.pending, chunk[:i]...)
			f.line(f.lineNo, f.pending)
			f.pending = f.pending[:0]
		}
		chunk = chunk[i+1:]
	}
}

// flushPending reads what follows the last newline as a last line: the
// file is left for good, and an API server writes each event whole, so
// it is either a whole event still without its newline or a torn one
// (noted as undecodable).
func (f *auditFile) flushPending() {
	if len(trimSpace(f.pending)) > 0 && !f.skipping {
		f.lineNo++
		f.line(f.lineNo, f.pending)
	}
	f.pending, f.skipping = f.pending[:0], false
}

// checkReplaced starts the file again from its start when it shrank
// (truncated) or when its path now names another file (replaced or
// rotated: the old one is read to its end first).
func (f *auditFile) checkReplaced() {
	if f.f == nil {
		return
	}
	cur, err := f.f.Stat()
	if err != nil {
		return
	}
	st, err := os.Stat(f.path)
	switch {
	case err != nil:
		// Removed: its writer may still append to the open file.
	case !os.SameFile(st, cur):
		f.readAvailable()
		f.flushPending()
		f.closeFile()
		f.rec.Log(LogAuditReopened, map[string]string{"file": f.path, "reason": "replaced"})
	case cur.Size() < f.off:
		if _, err := f.f.Seek(0, io.SeekStart); err != nil {
			f.fail(fmt.Errorf("rewinding truncated audit log: %w", err))
			f.closeFile()
			return
		}
		f.off, f.pending, f.lineNo, f.skipping = 0, f.pending[:0], 0, false
		f.rec.Log(LogAuditReopened, map[string]string{"file": f.path, "reason": "truncated"})
	}
}

// fail notes an error once per run of failures.
func (f *auditFile) fail(err error) {
	if f.failing {
		return
	}
	f.failing = true
	f.rec.Log(LogAuditError, map[string]string{"file": f.path, "error": err.Error()})
}

func (f *auditFile) closeFile() {
	if f.f != nil {
		f.f.Close()
		f.f = nil
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func trimSpace(b []byte) []byte { return bytes.TrimSpace(b) }

// indexFrom returns the index of the first sep in b at or after from, or
// -1.
func indexFrom(b, sep []byte, from int) int {
	if from > len(b) {
		return -1
	}
	i := bytes.Index(b[from:], sep)
	if i < 0 {
		return -1
	}
	return from + i
}
