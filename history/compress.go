package history

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/podsafe/podsafe/internal/atomicfile"
)

// CompressedExt ends the name of a compressed history: a run that finished
// replaces its history.jsonl by history.jsonl.gz (see Compress).
const CompressedExt = ".gz"

// gzipMagic opens every gzip stream (RFC 1952); a history line opens with
// '{', so the two forms cannot be mistaken for each other.
var gzipMagic = [2]byte{0x1f, 0x8b}

// Locate returns the file that holds the history saved as path: path itself
// when it exists, else path+CompressedExt when that exists, else path (so
// that an error names the plain file). When both exist the plain file wins.
// Compress removes it only after the compressed copy is whole and durable,
// so both exist only when a compression was cut short between those two
// steps: the plain file is then the original and the compressed one an
// equal copy, and reading the plain one is cheaper and needs no trust in
// the copy. A compressed file is never incomplete under its final name (it
// is renamed into place whole); one damaged afterwards is refused by Read
// with an error naming it.
func Locate(path string) string {
	if strings.HasSuffix(path, CompressedExt) {
		return path
	}
	if _, err := os.Lstat(path); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return path
	}
	if _, err := os.Lstat(path + CompressedExt); err == nil {
		return path + CompressedExt
	}
	return path
}

// Compress replaces the history file at path by its gzip form at
// path+CompressedExt and returns the new path. It is meant for a history
// whose recorder is closed. The compressed file is written under a
// temporary name, synced and renamed into place, its directory is synced,
// and it is read back (gzip checks its CRC and length) and compared in
// length with the plain file; only then is the plain file removed. So at
// every moment one whole copy exists under a name Locate finds; a failure
// leaves the plain file and no compressed one, and returns the error.
func Compress(path string) (string, error) {
	src, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("compressing history: %w", err)
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return "", fmt.Errorf("compressing history: %w", err)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("compressing history %s: not a regular file (%s)", path, st.Mode().Type())
	}
	gz := path + CompressedExt
	var plain int64
	err = atomicfile.Write(gz, st.Mode().Perm(), func(w io.Writer) error {
		bw := bufio.NewWriterSize(w, 1<<16)
		zw := gzip.NewWriter(bw)
		zw.Name = filepath.Base(path)
		n, err := io.Copy(zw, src)
		plain = n
		if err != nil {
			return err
		}
		if err := zw.Close(); err != nil {
			return err
		}
		return bw.Flush()
	})
	if err != nil {
		return "", fmt.Errorf("compressing history %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	fail := func(err error) (string, error) {
		os.Remove(gz)
		syncDir(dir)
		return "", fmt.Errorf("compressing history %s: %w", path, err)
	}
	if err := syncDir(dir); err != nil {
		return fail(err)
	}
	if n, err := gunzippedSize(gz); err != nil {
		return fail(fmt.Errorf("reading back %s: %w", gz, err))
	} else if n != plain || n != st.Size() {
		return fail(fmt.Errorf("%s holds %d bytes, the history %d", gz, n, st.Size()))
	}
	src.Close()
	if err := os.Remove(path); err != nil {
		// Both forms stay; Locate reads the plain one.
		return gz, fmt.Errorf("removing the plain history after compressing it: %w", err)
	}
	return gz, syncDir(dir)
}

// gunzippedSize decompresses the file at path and returns its length;
// gzip's reader fails on a CRC or length that does not match.
func gunzippedSize(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(bufio.NewReaderSize(f, 1<<16))
	if err != nil {
		return 0, err
	}
	return io.Copy(io.Discard, zr)
}

// syncDir makes renames and removals in dir durable. Some file systems
// cannot sync a directory; that is not an error.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, errors.ErrUnsupported) {
		return err
	}
	return nil
}
