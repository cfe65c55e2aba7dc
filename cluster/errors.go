package cluster

import "errors"

// Sentinel errors of the cluster package.
var (
	// ErrInvalidTopology: the topology or config cannot be built.
	ErrInvalidTopology = errors.New("invalid topology")
	// ErrNotDurable: restarting a member needs durable storage (an in-memory
	// member that restarts empty would break raft's safety).
	ErrNotDurable = errors.New("member restart needs durable storage")
	// ErrMemberDown: the member is crashed.
	ErrMemberDown = errors.New("member is down")
	// ErrMemberUp: the member is already running.
	ErrMemberUp = errors.New("member is already running")
)
