// Package dirlock takes an exclusive lock on a directory, so that two
// processes (or two opens in one process) never share a data directory. The
// lock is a file in the directory, locked with flock(2) and holding the
// holder's pid: a second taker is told who holds it at once, instead of
// waiting out another lock's timeout. The kernel drops the lock when its
// holder dies, so a crash (kill -9) leaves no stale lock behind, only a stale
// pid in a file nobody locks.
package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// FileName is the lock file in a locked directory.
const FileName = "LOCK"

// ErrInUse: the directory is locked by someone else (see InUseError).
var ErrInUse = errors.New("directory is in use")

// InUseError reports the holder of a directory's lock.
type InUseError struct {
	Dir string
	// PID is the holder's process ID as its lock file says, or 0 when the
	// holder has not written it yet.
	PID int
}

// Error names the directory and the holder.
func (e *InUseError) Error() string {
	if e.PID == 0 {
		return fmt.Sprintf("%s is in use by another process", e.Dir)
	}
	if e.PID == os.Getpid() {
		return fmt.Sprintf("%s is in use by pid %d (this process)", e.Dir, e.PID)
	}
	return fmt.Sprintf("%s is in use by pid %d", e.Dir, e.PID)
}

// Is makes errors.Is(err, ErrInUse) hold.
func (e *InUseError) Is(target error) bool { return target == ErrInUse }

// Lock is a held directory lock. Release it once.
type Lock struct {
	f *os.File
}

// Acquire locks dir, which must exist, and records this process's pid in
// its lock file. It does not wait: a directory locked elsewhere (another
// process, or another Acquire in this one) is an *InUseError.
func Acquire(dir string) (*Lock, error) {
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	if err := tryLock(f); err != nil {
		f.Close()
		if errors.Is(err, errLocked) {
			return nil, &InUseError{Dir: dir, PID: readPID(path)}
		}
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	if err := writePID(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	return &Lock{f: f}, nil
}

// Release clears the pid and drops the lock.
func (l *Lock) Release() error {
	// Clearing first: a later reader of an unlocked file finds no pid
	// rather than a stale one.
	terr := l.f.Truncate(0)
	return errors.Join(terr, l.f.Close())
}

func writePID(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		return err
	}
	return f.Sync()
}

func readPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return pid
}
