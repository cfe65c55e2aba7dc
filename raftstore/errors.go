package raftstore

import "errors"

// Sentinel errors returned (possibly wrapped) by Store. The API server maps each
// to one HTTP status.
var (
	// ErrNotFound: no object under the key (404).
	ErrNotFound = errors.New("raftstore: object not found")
	// ErrExists: Create found an object under the key (409 AlreadyExists).
	ErrExists = errors.New("raftstore: object already exists")
	// ErrConflict: a precondition (resourceVersion or UID) did not hold (409 Conflict).
	ErrConflict = errors.New("raftstore: precondition failed")
	// ErrTooOld: a watch asked for a resourceVersion older than the compaction
	// window (410 Gone, "too old resource version").
	ErrTooOld = errors.New("raftstore: too old resource version")
	// ErrUnavailable: the request was definitely not applied (no leader known,
	// leader unreachable before the proposal was sent) (503).
	ErrUnavailable = errors.New("raftstore: no leader available")
	// ErrTimeout: the request may or may not have been applied (leadership lost
	// after proposing, forwarding connection cut mid-request, deadline hit) (504).
	ErrTimeout = errors.New("raftstore: outcome unknown")
	// ErrClosed: the store has been shut down.
	ErrClosed = errors.New("raftstore: store closed")
	// ErrInvalid: the object bytes are not a JSON object with metadata (400).
	ErrInvalid = errors.New("raftstore: invalid object")
)
