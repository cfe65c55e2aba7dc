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

// Fit rejects nodes whose allocatable cannot hold the pod's requests on top
// of what the pods already there request. Removing pods can fix that, so
// the rejection is Unschedulable (preemption may help).
type Fit struct{}

var (
	_ framework.PreFilterPlugin = &Fit{}
	_ framework.FilterPlugin    = &Fit{}
)

const stateKey framework.StateKey = "PreFilter" + Name

// requests is the pod's requests, computed once per cycle.
type requests framework.Resource

func (r *requests) Clone() framework.StateData { return r }

// Shortage bits; rejections holds one shared status per combination, so
// rejecting thousands of nodes allocates nothing.
const (
	shortPods = 1 << iota
	shortCPU
	shortMemory
)

var rejections = func() [8]*framework.Status {
	var out [8]*framework.Status
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
		out[bits] = framework.NewStatus(framework.Unschedulable, reasons...).WithPlugin(Name)
	}
	return out
}()

// NewFit builds the plugin.
func NewFit(framework.Handle) (framework.Plugin, error) { return &Fit{}, nil }

// Name implements framework.Plugin.
func (*Fit) Name() string { return Name }

// PreFilter computes the pod's requests once for all nodes.
func (*Fit) PreFilter(_ context.Context, state *framework.CycleState, pod *corev1.Pod, _ []*framework.NodeInfo) *framework.Status {
	r := requests(framework.PodRequests(pod))
	state.Write(stateKey, &r)
	return nil
}

// PreFilterExtensions implements framework.PreFilterPlugin: the state does
// not depend on the pods on a node.
func (*Fit) PreFilterExtensions() framework.PreFilterExtensions { return nil }

// Filter implements framework.FilterPlugin.
func (*Fit) Filter(_ context.Context, state *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo) *framework.Status {
	var req framework.Resource
	if d, ok := state.Read(stateKey); ok {
		req = framework.Resource(*d.(*requests))
	} else {
		req = framework.PodRequests(pod)
	}
	if bits := shortage(req, ni); bits != 0 {
		return rejections[bits]
	}
	return nil
}

func shortage(req framework.Resource, ni *framework.NodeInfo) int {
	bits := 0
	if ni.Requested.Pods+req.Pods > ni.Allocatable.Pods {
		bits |= shortPods
	}
	if req.MilliCPU > 0 && ni.Requested.MilliCPU+req.MilliCPU > ni.Allocatable.MilliCPU {
		bits |= shortCPU
	}
	if req.Memory > 0 && ni.Requested.Memory+req.Memory > ni.Allocatable.Memory {
		bits |= shortMemory
	}
	return bits
}

// Insufficient lists the resources of ni that cannot take req.
func Insufficient(req framework.Resource, ni *framework.NodeInfo) []string {
	return rejections[shortage(req, ni)].Reasons()
}
