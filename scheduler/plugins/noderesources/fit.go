// Package noderesources filters nodes by the pod's CPU, memory and pod-count
// requests against allocatable, and scores them by least allocation.
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
	tooBig
)

var rejections = func() [16]*framework.Status {
	var out [16]*framework.Status
	for bits := 1; bits < len(out); bits++ {
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
		code := framework.Unschedulable
		if bits&tooBig != 0 {
			code = framework.UnschedulableAndUnresolvable
		}
		out[bits] = framework.NewStatus(code, reasons...).WithPlugin(Name)
	}
	return out
}()

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
	bits := shortage(req.Resource, ni)
	others, tooBigOther := otherShortage(req, ni)
	switch {
	case len(others) > 0:
		code := framework.Unschedulable
		if bits&tooBig != 0 || tooBigOther {
			code = framework.UnschedulableAndUnresolvable
		}
		return framework.NewStatus(code, append(rejections[bits].Reasons(), others...)...).WithPlugin(Name)
	case bits != 0:
		return rejections[bits]
	}
	return nil
}

// shortage returns the shortage bits of req on ni, 0 if it fits.
func shortage(req framework.Resource, ni *framework.NodeInfo) int {
	bits := 0
	if ni.Requested.Pods+req.Pods > ni.Allocatable.Pods {
		bits |= shortPods
	}
	if req.MilliCPU > 0 && ni.Requested.MilliCPU+req.MilliCPU > ni.Allocatable.MilliCPU {
		bits |= shortCPU
		if req.MilliCPU > ni.Allocatable.MilliCPU {
			bits |= tooBig
		}
	}
	if req.Memory > 0 && ni.Requested.Memory+req.Memory > ni.Allocatable.Memory {
		bits |= shortMemory
		if req.Memory > ni.Allocatable.Memory {
			bits |= tooBig
		}
	}
	return bits
}

// Insufficient lists the resources of ni (CPU, memory, pod slots) that
// cannot take req.
func Insufficient(req framework.Resource, ni *framework.NodeInfo) []string {
	return rejections[shortage(req, ni)].Reasons()
}
