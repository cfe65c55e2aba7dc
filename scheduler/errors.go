package scheduler

import "errors"

// Sentinel errors of the scheduler.
var (
	// ErrInvalidConfig wraps every Config.Validate failure.
	ErrInvalidConfig = errors.New("invalid scheduler configuration")
	// ErrNoNodesAvailable means the snapshot holds no nodes at all.
	ErrNoNodesAvailable = errors.New("no nodes available to schedule pods")
	// ErrQueueClosed is returned by Pop once the queue is closed.
	ErrQueueClosed = errors.New("scheduling queue is closed")
)
