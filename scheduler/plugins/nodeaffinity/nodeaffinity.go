// Package nodeaffinity filters nodes by the pod's nodeSelector and required
// node affinity.
package nodeaffinity

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/podsafe/podsafe/scheduler/framework"
)

// Name is the plugin's name.
const Name = "NodeAffinity"

// ErrReason is the rejection reason.
const ErrReason = "node(s) didn't match Pod's node affinity/selector"

const stateKey framework.StateKey = "PreFilter" + Name

// NodeAffinity rejects nodes that fail spec.nodeSelector or
// requiredDuringSchedulingIgnoredDuringExecution.
type NodeAffinity struct{}

var (
	_ framework.PreFilterPlugin = &NodeAffinity{}
	_ framework.FilterPlugin    = &NodeAffinity{}
)

type preFilterState struct {
	required nodeaffinity.RequiredNodeAffinity
}

func (s *preFilterState) Clone() framework.StateData { return s }

// New builds the plugin.
func New(framework.Handle) (framework.Plugin, error) { return &NodeAffinity{}, nil }

// Name implements framework.Plugin.
func (*NodeAffinity) Name() string { return Name }

// PreFilter parses the pod's node requirements once; it skips pods without
// any.
func (*NodeAffinity) PreFilter(_ context.Context, state *framework.CycleState, pod *corev1.Pod, _ []*framework.NodeInfo) *framework.Status {
	if len(pod.Spec.NodeSelector) == 0 && (pod.Spec.Affinity == nil || pod.Spec.Affinity.NodeAffinity == nil ||
		pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil) {
		return framework.NewStatus(framework.Skip)
	}
	state.Write(stateKey, &preFilterState{required: nodeaffinity.GetRequiredNodeAffinity(pod)})
	return nil
}

// PreFilterExtensions implements framework.PreFilterPlugin: the state does
// not depend on pods.
func (*NodeAffinity) PreFilterExtensions() framework.PreFilterExtensions { return nil }

// Filter implements framework.FilterPlugin.
func (*NodeAffinity) Filter(_ context.Context, state *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo) *framework.Status {
	var required nodeaffinity.RequiredNodeAffinity
	if d, ok := state.Read(stateKey); ok {
		required = d.(*preFilterState).required
	} else {
		required = nodeaffinity.GetRequiredNodeAffinity(pod)
	}
	match, err := required.Match(ni.Node())
	if err != nil {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, err.Error())
	}
	if !match {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReason)
	}
	return nil
}
