package kubelet

import "errors"

// Sentinel errors of the kubelet and its runtimes.
var (
	// ErrInvalidConfig wraps every Config.Validate failure.
	ErrInvalidConfig = errors.New("invalid kubelet config")
	// ErrInvalidScript wraps every container script parse failure.
	ErrInvalidScript = errors.New("invalid container script")
	// ErrNoContainer is returned for a container ID the runtime does not know.
	ErrNoContainer = errors.New("no such container")
	// ErrNotRunning is returned when an operation needs a running container.
	ErrNotRunning = errors.New("container not running")
	// ErrRuntimeClosed is returned by a runtime after Close.
	ErrRuntimeClosed = errors.New("runtime closed")
	// ErrPoweredOff is returned when starting a container on a node that is
	// powered off.
	ErrPoweredOff = errors.New("node powered off")
)
