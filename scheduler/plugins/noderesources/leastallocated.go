package noderesources

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsafe/podsafe/scheduler/framework"
)

// LeastAllocatedName is the name of the scoring plugin.
const LeastAllocatedName = "NodeResourcesLeastAllocated"

// LeastAllocated prefers nodes with the most CPU and memory left after
// placing the pod: the mean over both of free/allocatable, scaled to
// 0..MaxNodeScore.
type LeastAllocated struct{}

var (
	_ framework.PreScorePlugin = &LeastAllocated{}
	_ framework.ScorePlugin    = &LeastAllocated{}
)

const scoreStateKey framework.StateKey = "PreScore" + LeastAllocatedName

// scoreState is the incoming pod's requests, computed once per cycle.
type scoreState struct{ framework.Resource }

// Clone implements framework.StateData; scoring state is read-only.
func (s *scoreState) Clone() framework.StateData { return s }

// NewLeastAllocated builds the plugin.
func NewLeastAllocated(framework.Handle) (framework.Plugin, error) { return &LeastAllocated{}, nil }

// Name implements framework.Plugin.
func (*LeastAllocated) Name() string { return LeastAllocatedName }

// PreScore computes the pod's requests once for every node scored.
func (*LeastAllocated) PreScore(_ context.Context, state *framework.CycleState, pod *corev1.Pod, _ []*framework.NodeInfo) *framework.Status {
	state.Write(scoreStateKey, &scoreState{framework.PodRequests(pod)})
	return nil
}

// Score implements framework.ScorePlugin.
func (*LeastAllocated) Score(_ context.Context, state *framework.CycleState, pod *corev1.Pod, ni *framework.NodeInfo) (int64, *framework.Status) {
	var req framework.Resource
	if d, ok := state.Read(scoreStateKey); ok {
		req = d.(*scoreState).Resource
	} else {
		req = framework.PodRequests(pod)
	}
	cpu := free(ni.Allocatable.MilliCPU, ni.Requested.MilliCPU+req.MilliCPU)
	mem := free(ni.Allocatable.Memory, ni.Requested.Memory+req.Memory)
	return (cpu + mem) / 2, nil
}

func free(allocatable, requested int64) int64 {
	if allocatable <= 0 || requested > allocatable {
		return 0
	}
	return (allocatable - requested) * framework.MaxNodeScore / allocatable
}
