//go:build unix && !aix && !solaris

package dirlock

import (
	"errors"
	"os"
	"syscall"
)

var errLocked = errors.New("locked")

// tryLock takes f's flock without waiting. flock locks belong to the open
// file description, so a second open of the file in the same process
// conflicts too.
func tryLock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return errLocked
		default:
			return &os.PathError{Op: "flock", Path: f.Name(), Err: err}
		}
	}
}
