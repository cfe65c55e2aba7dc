// Package nodename filters out every node but the one a pod names in
// spec.nodeName.
package nodename

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsafe/podsafe/scheduler/framework"
)

// Name is the plugin's name.
const Name = "NodeName"

// ErrReason is the rejection reason.
const ErrReason = "node(s) didn't match the requested node name"

// NodeName rejects nodes other than spec.nodeName when it is set.
type NodeName struct{}

var _ framework.FilterPlugin = &NodeName{}

// New builds the plugin.
func New(framework.Handle) (framework.Plugin, error) { return &NodeName{}, nil }

// Name implements framework.Plugin.
func (*NodeName) Name() string { return Name }

// Filter implements framework.FilterPlugin.
func (*NodeName) Filter(_ context.Context, _ *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo) *framework.Status {
	if pod.Spec.NodeName != "" && pod.Spec.NodeName != ni.Node().Name {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReason)
	}
	return nil
}
