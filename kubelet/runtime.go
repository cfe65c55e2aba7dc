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
	// Volumes are the pod's RWO volumes, attached to this node, with the
	// attachment each was attached under (PS-15).
	Volumes []AttachedVolume
}

// AttachedVolume is one RWO volume a pod may write, as the kubelet found it
// attached to its node.
type AttachedVolume struct {
	// Volume is the volume's ID (see VolumeID).
	Volume string
	// Token is the attachment's fencing token: the resourceVersion of the
	// VolumeAttachment the kubelet saw attached, so a newer attachment of
	// the same volume always carries a larger token.
	Token int64
}

// StorageWrite is one write a container makes to a volume.
type StorageWrite struct {
	Volume    string `json:"volume"`
	Node      string `json:"node"`
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	UID       string `json:"uid"`
	Container string `json:"container"`
	Token     int64  `json:"token"`
	// Seq numbers the writes of one container instance from 1.
	Seq int64 `json:"seq"`
}

// Storage is the shared storage a runtime's containers write to (an
// NFS-like server with no locking of its own). Write returns nil when the
// server accepted the write.
type Storage interface {
	Write(ctx context.Context, w StorageWrite) error
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
// ExitNotifier is implemented by a Runtime that can call back when a
// container exits: the kubelet then needs no goroutine blocked in Wait per
// container. f gets what Wait would return, once; it is never called if the
// runtime closes first. f must not block.
type ExitNotifier interface {
	OnExit(id ContainerID, f func(ContainerStatus)) error
}

type Runtime interface {
	// Start creates and starts a container.
	Start(ctx context.Context, cfg ContainerConfig) (ContainerID, error)
	// Signal sends sig to the container's main process. grace is the
	// effective grace period (seconds) the kubelet is applying and reason
	// why it kills (empty for a pod's termination), for the ledger.
	// Signalling an exited container is not an error.
	Signal(ctx context.Context, id ContainerID, sig Signal, grace int64, reason KillReason) error
	// PreStop starts the container's preStop hook and returns once it has
	// started (and is recorded, with reason as for Signal); the channel
	// delivers the hook's result when it ends, or when ctx ends (the hook
	// is then abandoned, never retried).
	PreStop(ctx context.Context, id ContainerID, reason KillReason) (<-chan error, error)
	// Probe runs one probe of a running container; the runtime records
	// each answer it gives in the ledger.
	Probe(ctx context.Context, id ContainerID, kind ProbeKind) (ProbeResult, error)
	// Wait blocks until the container exited and returns its final status.
	Wait(ctx context.Context, id ContainerID) (ContainerStatus, error)
	// List returns every container the runtime holds, running or exited and
	// not yet removed.
	List(ctx context.Context) ([]ContainerStatus, error)
	// Remove forgets an exited container.
	Remove(ctx context.Context, id ContainerID) error
}
