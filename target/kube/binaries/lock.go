package binaries

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// lockPoll is how often a Build waiting for another one retries the lock.
const lockPoll = 250 * time.Millisecond

// lockKey takes an exclusive lock on one pair of versions in cacheDir, so
// that concurrent Builds (several test processes, two make runs) compile
// them once. It waits until the lock is free or ctx is done. The lock is an
// flock on a file: the kernel releases it when a build is killed.
func lockKey(ctx context.Context, cacheDir, key string, log io.Writer) (unlock func(), err error) {
	path := filepath.Join(cacheDir, "."+key+".lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the build lock %s: %w", path, err)
	}
	waiting := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		if !waiting {
			fmt.Fprintf(log, "waiting for another build of %s to finish\n", key)
			waiting = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for the build lock %s: %w", path, ctx.Err())
		case <-time.After(lockPoll):
		}
	}
}
