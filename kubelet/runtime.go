package kubelet

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// ContainerID names one container instance (one attempt) in a runtime.
type ContainerID string

// Signal is what the kubelet asks the runtime to send a container's main
// process.
type Signal string

// The signals a runtime delivers.
const (
	SignalTerm Signal = "TERM"
	SignalKill Signal = "KILL"
)

// ProbeKind names one of a container's probes.
type ProbeKind string

// The probes of LC-9.
const (
	ProbeStartup   ProbeKind = "startup"
	ProbeLiveness  ProbeKind = "liveness"
	ProbeReadiness ProbeKind = "readiness"
)

// ProbeResult is the outcome of one probe (LC-9).
type ProbeResult string

// The probe outcomes.
const (
	ProbeSuccess ProbeResult = "Success"
	ProbeFailure ProbeResult = "Failure"
	ProbeUnknown ProbeResult = "Unknown"
)

// Exit codes a runtime reports for containers stopped by a signal (128 + the
// signal number, as a shell reports them).
const (
	ExitCodeTerm = 143
	ExitCodeKill = 137
)

// ContainerConfig is everything a runtime needs to start one container.
type ContainerConfig struct {
	Node      string
	Namespace string
	Pod       string
	UID       string
	// Container is the container's spec; Init says it is an init container.
	Container corev1.Container
	Init      bool
	// Annotations are the pod's annotations (the simulated runtime reads
	// container scripts from them).
	Annotations map[string]string
	// Attempt counts restarts of this container in this pod, from 0.
	Attempt int
}

// ContainerStatus is what a runtime knows about one container instance.
type ContainerStatus struct {
	ID        ContainerID
	Namespace string
	Pod       string
	UID       string
	Container string
	Init      bool
	Attempt   int
	Running   bool
	StartedAt time.Time
	// FinishedAt, ExitCode and Reason are set once the container exited.
	FinishedAt time.Time
	ExitCode   int
	Reason     string
}

// Runtime runs containers on one node. It outlives the kubelet: containers
// keep running while the kubelet is down, and a restarted kubelet finds them
// with List. Implementations write every start, signal and exit to the ledger
// themselves. All methods are safe for concurrent use; every blocking call
// returns early when ctx ends.
type Runtime interface {
	// Start creates and starts a container.
	Start(ctx context.Context, cfg ContainerConfig) (ContainerID, error)
	// Signal sends sig to the container's main process. grace is the
	// effective grace period (seconds) the kubelet is applying, for the
	// ledger. Signalling an exited container is not an error.
	Signal(ctx context.Context, id ContainerID, sig Signal, grace int64) error
	// PreStop starts the container's preStop hook and returns once it has
	// started (and is recorded); the channel delivers the hook's result when
	// it ends, or when ctx ends (the hook is then abandoned, never retried).
	PreStop(ctx context.Context, id ContainerID) (<-chan error, error)
	// Probe runs one probe of a running container.
	Probe(ctx context.Context, id ContainerID, kind ProbeKind) (ProbeResult, error)
	// Wait blocks until the container exited and returns its final status.
	Wait(ctx context.Context, id ContainerID) (ContainerStatus, error)
	// List returns every container the runtime holds, running or exited and
	// not yet removed.
	List(ctx context.Context) ([]ContainerStatus, error)
	// Remove forgets an exited container.
	Remove(ctx context.Context, id ContainerID) error
}
