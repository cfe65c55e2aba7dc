// Package tainttoleration filters out nodes with NoSchedule or NoExecute
// taints the pod does not tolerate.
package tainttoleration

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"

	"github.com/podsafe/podsafe/scheduler/framework"
)

// Name is the plugin's name.
const Name = "TaintToleration"

// TaintToleration rejects nodes with untolerated scheduling taints.
type TaintToleration struct{}

var _ framework.FilterPlugin = &TaintToleration{}

// New builds the plugin.
func New(framework.Handle) (framework.Plugin, error) { return &TaintToleration{}, nil }

// Name implements framework.Plugin.
func (*TaintToleration) Name() string { return Name }

// Filter implements framework.FilterPlugin.
func (*TaintToleration) Filter(_ context.Context, _ *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo) *framework.Status {
	taint, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), ni.Node().Spec.Taints,
		pod.Spec.Tolerations, SchedulingTaint, false)
	if !untolerated {
		return nil
	}
	return framework.NewStatus(framework.UnschedulableAndUnresolvable,
		fmt.Sprintf("node(s) had untolerated taint {%s: %s}", taint.Key, taint.Value))
}

// SchedulingTaint reports whether a taint keeps pods off a node at
// scheduling time (NoSchedule and NoExecute; PreferNoSchedule only scores).
func SchedulingTaint(t *corev1.Taint) bool {
	return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
}
