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

var _ framework.FilterPlugin = &Fit{}

// NewFit builds the plugin.
func NewFit(framework.Handle) (framework.Plugin, error) { return &Fit{}, nil }

// Name implements framework.Plugin.
func (*Fit) Name() string { return Name }

// Filter implements framework.FilterPlugin.
func (*Fit) Filter(_ context.Context, _ *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo) *framework.Status {
	if reasons := Insufficient(framework.PodRequests(pod), ni); len(reasons) > 0 {
		return framework.NewStatus(framework.Unschedulable, reasons...)
	}
	return nil
}

// Insufficient lists the resources of ni that cannot take req.
func Insufficient(req framework.Resource, ni *framework.NodeInfo) []string {
	var reasons []string
	if ni.Requested.Pods+req.Pods > ni.Allocatable.Pods {
		reasons = append(reasons, ReasonPods)
	}
	if req.MilliCPU > 0 && ni.Requested.MilliCPU+req.MilliCPU > ni.Allocatable.MilliCPU {
		reasons = append(reasons, ReasonCPU)
	}
	if req.Memory > 0 && ni.Requested.Memory+req.Memory > ni.Allocatable.Memory {
		reasons = append(reasons, ReasonMemory)
	}
	return reasons
}
