// Package nodeunschedulable filters out cordoned nodes (spec.unschedulable)
// unless the pod tolerates the unschedulable taint.
package nodeunschedulable

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"

	"github.com/podsafe/podsafe/scheduler/framework"
)

// Name is the plugin's name.
const Name = "NodeUnschedulable"

// ErrReason is the rejection reason.
const ErrReason = "node(s) were unschedulable"

// NodeUnschedulable rejects cordoned nodes.
type NodeUnschedulable struct{}

var _ framework.FilterPlugin = &NodeUnschedulable{}

// New builds the plugin.
func New(framework.Handle) (framework.Plugin, error) { return &NodeUnschedulable{}, nil }

// Name implements framework.Plugin.
func (*NodeUnschedulable) Name() string { return Name }

// Filter implements framework.FilterPlugin.
func (*NodeUnschedulable) Filter(_ context.Context, _ *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo) *framework.Status {
	if !ni.Node().Spec.Unschedulable {
		return nil
	}
	taint := &corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}
	if corev1helpers.TolerationsTolerateTaint(klog.Background(), pod.Spec.Tolerations, taint, false) {
		return nil
	}
	return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReason)
}
