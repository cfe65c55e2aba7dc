package fencing

import "errors"

// Sentinel errors of the fencing package. Errors returned by this package
// wrap one of them (or an API or agent error) with the node and step.
var (
	// ErrInvalidConfig reports a Config that cannot work; the wrapped
	// message names the field and the fix.
	ErrInvalidConfig = errors.New("invalid fencing configuration")
	// ErrAgentFailed reports that a fence agent did not confirm a fence (or
	// an unfence); the wrapped error names the agent and carries its error.
	ErrAgentFailed = errors.New("fence agent failed")
)
