// Package noderesources filters nodes by the pod's requests (CPU, memory, a
// pod slot, ephemeral storage, scalar resources) against what their
// allocatable leaves beside the pods already there, and scores them by
// least allocation.
package noderesources

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsafe/podsafe/scheduler/framework"
)

// Name is the name of the Fit filter.
const Name = "NodeResourcesFit"

// Rejection reasons, one per resource.
const (
	ReasonCPU    = "Insufficient cpu"
	ReasonMemory = "Insufficient memory"
	ReasonPods   = "Too many pods"
	// ReasonEphemeralStorage; an extended resource's reason is
	// "Insufficient " and its name.
	ReasonEphemeralStorage = "Insufficient ephemeral-storage"
)

// Fit rejects nodes whose allocatable cannot hold the pod's requests (CPU,
// memory, a pod slot, ephemeral storage, extended resources) on top of what
// the pods already there request. Removing pods can fix that, so the
// rejection is Unschedulable (preemption may help), unless the pod asks for
// more of a resource than the node has allocatable at all: no removal can
// fix that, and the rejection is UnschedulableAndUnresolvable, so
// preemption does not try the node. Too many pods is always Unschedulable.
type Fit struct{}

var (
	_ framework.PreFilterPlugin = &Fit{}
	_ framework.FilterPlugin    = &Fit{}
)

const stateKey framework.StateKey = "PreFilter" + Name

// Shortage bits; rejections holds one shared status per combination, so
// rejecting thousands of nodes allocates nothing. tooBig marks a request
// beyond the node's allocatable, which no preemption can fix.
const (
	shortPods = 1 << iota
	shortCPU
	shortMemory
	shortEphemeral
	tooBig
)

var rejections = func() [32]*framework.Status {
	var out [32]*framework.Status
	for bits := 1; bits < len(out); bits++ {
		out[bits] = framework.NewStatus(codeOf(bits), reasonsOf(bits)...).WithPlugin(Name)
	}
	return out
}()

func codeOf(bits int) framework.Code {
	if bits&tooBig != 0 {
		return framework.UnschedulableAndUnresolvable
	}
	return framework.Unschedulable
}

func reasonsOf(bits int) []string {
	var reasons []string
	if bits&shortPods != 0 {
		reasons = append(reasons, ReasonPods)
	}
	if bits&shortCPU != 0 {
		reasons = append(reasons, ReasonCPU)
	}
	if bits&shortMemory != 0 {
		reasons = append(reasons, ReasonMemory)
	}
	if bits&shortEphemeral != 0 {
		reasons = append(reasons, ReasonEphemeralStorage)
	}
	return reasons
}

// NewFit builds the plugin.
func NewFit(framework.Handle) (framework.Plugin, error) { return &Fit{}, nil }

// Name implements framework.Plugin.
func (*Fit) Name() string { return Name }

// PreFilter computes the pod's requests once for all nodes.
func (*Fit) PreFilter(_ context.Context, state *framework.CycleState, pod *corev1.Pod, _ []*framework.NodeInfo) *framework.Status {
	state.Write(stateKey, requestsOf(pod))
	return nil
}

// PreFilterExtensions implements framework.PreFilterPlugin: the state does
// not depend on the pods on a node.
func (*Fit) PreFilterExtensions() framework.PreFilterExtensions { return nil }

// Filter implements framework.FilterPlugin.
func (*Fit) Filter(_ context.Context, state *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo) *framework.Status {
	var req *podRequests
	if d, ok := state.Read(stateKey); ok {
		req = d.(*podRequests)
	} else {
		req = requestsOf(pod)
	}
	bits := shortage(&req.Resource, ni)
	if len(req.scalars) == 0 {
		if bits == 0 {
			return nil
		}
		return rejections[bits]
	}
	reasons := reasonsOf(bits)
	for _, name := range req.scalars {
		want, have := req.Scalar[name], ni.Allocatable.Scalar[name]
		if want > have-ni.Requested.Scalar[name] {
			reasons = append(reasons, "Insufficient "+string(name))
			if want > have {
				bits |= tooBig
			}
		}
	}
	if len(reasons) == 0 {
		return nil
	}
	return framework.NewStatus(codeOf(bits), reasons...).WithPlugin(Name)
}

// shortage returns the shortage bits of req on ni for pods, CPU, memory
// and ephemeral storage, 0 if those fit. A resource the pod does not
// request never falls short, whatever the node has left.
func shortage(req *framework.Resource, ni *framework.NodeInfo) int {
	bits := 0
	if ni.Requested.Pods+req.Pods > ni.Allocatable.Pods {
		bits |= shortPods
	}
	short := func(bit int, want, used, have int64) {
		if want > 0 && used+want > have {
			bits |= bit
			if want > have {
				bits |= tooBig
			}
		}
	}
	short(shortCPU, req.MilliCPU, ni.Requested.MilliCPU, ni.Allocatable.MilliCPU)
	short(shortMemory, req.Memory, ni.Requested.Memory, ni.Allocatable.Memory)
	short(shortEphemeral, req.EphemeralStorage, ni.Requested.EphemeralStorage, ni.Allocatable.EphemeralStorage)
	return bits
}

// Insufficient lists the resources of ni (CPU, memory, pod slots,
// ephemeral storage) that cannot take req.
func Insufficient(req framework.Resource, ni *framework.NodeInfo) []string {
	return reasonsOf(shortage(&req, ni))
}
