// Package atomicfile writes files whole or not at all: the content goes to a
// temporary file in the same directory, is synced, and is renamed over the
// target. A reader (podsafe serve, podsafe check, a browser) sees the old
// file or the new one, never a partial one, and a write that fails (a full
// disk, a read-only directory, a crash midway) leaves the old file intact.
package atomicfile

import (
	"io"
	"os"
	"path/filepath"
)

// WriteFile writes data to path atomically, with permissions perm. Errors
// are the file system's (*os.PathError, *os.LinkError), which name the path.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return Write(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// Write calls write with a temporary file in path's directory and, when it
// returns nil, renames the file to path. On any error the temporary file is
// removed and path is left as it was. It is safe for concurrent use on
// different paths; concurrent writes of one path leave one of them whole.
func Write(path string, perm os.FileMode, write func(io.Writer) error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err := write(f); err != nil {
		return err // the caller's, as it returned it
	}
	// CreateTemp makes the file 0600; the target gets perm as os.WriteFile
	// would give it (the umask aside).
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return nil
}
