package netns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Owner files: each live Network writes ownerDir/<prefix> with its
// process's pid and start time (so a reused pid is not taken for it). A
// run killed with SIGKILL cannot remove its namespaces, so every New first
// sweeps the prefixes whose owner is gone: nothing of a dead run stays
// behind past the next run.
const ownerDirPath = "/run/podsafe-netns"

// ownerDir is ownerDirPath, or a directory in the temporary directory when
// /run is not writable (as the lock file does).
func ownerDir() string {
	if err := os.MkdirAll(ownerDirPath, 0o700); err == nil {
		return ownerDirPath
	}
	d := filepath.Join(os.TempDir(), "podsafe-netns")
	os.MkdirAll(d, 0o700) //nolint:errcheck // a failure shows when writing
	return d
}

// processStart is the start time of process pid in clock ticks since
// boot (field 22 of /proc/PID/stat), "" when it does not exist.
func processStart(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	fields := strings.Fields(s[i+1:])
	// After the command come state (field 3) and the rest: start time is
	// field 22, the 20th after the command.
	if len(fields) < 20 {
		return ""
	}
	return fields[19]
}

// writeOwner records this process as prefix's owner.
func writeOwner(prefix string) error {
	pid := os.Getpid()
	body := fmt.Sprintf("%d %s\n", pid, processStart(pid))
	if err := os.WriteFile(filepath.Join(ownerDir(), prefix), []byte(body), 0o600); err != nil {
		return fmt.Errorf("netns: recording the owner of %s: %w", prefix, err)
	}
	return nil
}

// removeOwner forgets prefix's owner.
func removeOwner(prefix string) {
	os.Remove(filepath.Join(ownerDir(), prefix))
}

// ownerAlive reports whether the owner recorded in body still runs.
func ownerAlive(body string) bool {
	f := strings.Fields(body)
	if len(f) != 2 {
		return false
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 0 {
		return false
	}
	return processStart(pid) == f[1]
}

// sweepStale removes the networks whose owner process is gone. The caller
// holds the machine lock.
func sweepStale(ctx context.Context, log *slog.Logger) error {
	dir := ownerDir()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil // nothing recorded
	}
	var errs []error
	for _, e := range entries {
		prefix := e.Name()
		if checkPrefix(prefix) != nil {
			continue
		}
		body, err := os.ReadFile(filepath.Join(dir, prefix))
		if err != nil || ownerAlive(string(body)) {
			continue
		}
		log.Info("netns: removing the network of a run that died", "prefix", prefix, "owner", strings.TrimSpace(string(body)))
		if err := cleanup(ctx, prefix, log); err != nil {
			errs = append(errs, fmt.Errorf("netns: removing the leftovers of %s: %w", prefix, err))
			continue
		}
		removeOwner(prefix)
	}
	return errors.Join(errs...)
}
