package history

import (
	"errors"
	"fmt"
)

// Sentinel errors returned by the Recorder and the loader.
var (
	// ErrClosed is reported by Err when an event was recorded after Close; the
	// event was dropped.
	ErrClosed = errors.New("history recorder closed")
	// ErrNotInvoked is reported when Complete is called on an operation that
	// Invoke never saw (its ID is zero); the completion was dropped.
	ErrNotInvoked = errors.New("operation completed without an invoke")
	// ErrCompletedTwice is reported when Complete is called again on an
	// operation; the second completion was dropped.
	ErrCompletedTwice = errors.New("operation completed twice")
	// ErrEmpty is returned by Read and Load for a history with no events.
	ErrEmpty = errors.New("history is empty")
	// ErrCorruptGzip is the cause of a *CorruptError for a compressed
	// history that cannot be decompressed to its end: truncated, or damaged
	// (a bad header, block or checksum).
	ErrCorruptGzip = errors.New("compressed history is truncated or corrupt")
)

// CorruptError reports a line of a history that cannot be decoded or that
// contradicts earlier lines. Path is empty when the history was read from a
// stream rather than a file.
type CorruptError struct {
	Path string
	Line int
	Err  error
}

// Error renders the error as path:line: cause, the shape editors jump to
// (path: cause when no line is to blame, such as a bad gzip header).
func (e *CorruptError) Error() string {
	switch {
	case e.Line == 0 && e.Path == "":
		return e.Err.Error()
	case e.Line == 0:
		return fmt.Sprintf("%s: %v", e.Path, e.Err)
	}
	if e.Path == "" {
		return fmt.Sprintf("line %d: %v", e.Line, e.Err)
	}
	return fmt.Sprintf("%s:%d: %v", e.Path, e.Line, e.Err)
}

// Unwrap returns the cause.
func (e *CorruptError) Unwrap() error { return e.Err }
