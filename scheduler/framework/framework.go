// Package framework holds the scheduler's plugin interfaces, the cycle state
// plugins share, the NodeInfo snapshot they read, and the runtime that runs
// them in order: PreFilter, Filter, PostFilter (preemption), PreScore, Score.
package framework

import (
	"context"
	"math"
	"time"

	"github.com/pingcap/failpoint"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// MaxNodeScore is the highest score a Score plugin returns after
// normalization.
const MaxNodeScore int64 = 100

// Plugin is the base of every plugin.
type Plugin interface {
	Name() string
}

// PreFilterPlugin computes per-pod state once, before Filter runs per node.
// It may return Skip when the pod needs nothing from the plugin, or a
// rejection that applies to every node.
type PreFilterPlugin interface {
	Plugin
	PreFilter(ctx context.Context, state *CycleState, pod *corev1.Pod, nodes []*NodeInfo) *Status
	// PreFilterExtensions returns nil if the plugin's state does not depend on
	// the pods on a node.
	PreFilterExtensions() PreFilterExtensions
}

// PreFilterExtensions keep a PreFilter plugin's state right when preemption
// dry-runs removing (or re-adding) pods on a node.
type PreFilterExtensions interface {
	AddPod(ctx context.Context, state *CycleState, podToSchedule *corev1.Pod, podToAdd *PodInfo, nodeInfo *NodeInfo) *Status
	RemovePod(ctx context.Context, state *CycleState, podToSchedule *corev1.Pod, podToRemove *PodInfo, nodeInfo *NodeInfo) *Status
}

// FilterPlugin decides whether the pod may run on one node. It must not
// change state; it may be called concurrently for different nodes.
type FilterPlugin interface {
	Plugin
	Filter(ctx context.Context, state *CycleState, pod *corev1.Pod, nodeInfo *NodeInfo) *Status
}

// PostFilterPlugin runs when no node passed the filters; preemption is one.
type PostFilterPlugin interface {
	Plugin
	PostFilter(ctx context.Context, state *CycleState, pod *corev1.Pod, statuses NodeToStatus) (*PostFilterResult, *Status)
}

// PostFilterResult is what a PostFilter decided: the node nominated for the
// pod and the pods that must go first.
type PostFilterResult struct {
	NominatedNodeName string
	Victims           []*corev1.Pod
}

// PreemptableBelow is the priority a pod must be below to be preempted by a
// pod of priority prio: prio itself, as preemption only ever removes pods of
// strictly lower priority (PR-10). Victim selection and the scheduler's
// last check before deleting a victim both ask it.
func PreemptableBelow(prio int32) int32 {
	// Planted bug of the bug zoo (scheduler-preempts-equal-priority): pods
	// of the preemptor's own priority count as victims too, breaking PR-10.
	failpoint.InjectContext(failpoints, "preemptsEqualPriority", func() {
		if prio < math.MaxInt32 {
			prio++
		}
	})
	return prio
}

// PreScorePlugin computes per-pod scoring state over the feasible nodes.
type PreScorePlugin interface {
	Plugin
	PreScore(ctx context.Context, state *CycleState, pod *corev1.Pod, nodes []*NodeInfo) *Status
}

// ScorePlugin ranks a feasible node. Scores of plugins that are not
// ScoreNormalizers must already lie in 0..MaxNodeScore.
type ScorePlugin interface {
	Plugin
	Score(ctx context.Context, state *CycleState, pod *corev1.Pod, nodeInfo *NodeInfo) (int64, *Status)
}

// ScoreNormalizer is an optional capability of a ScorePlugin: it rescales the
// raw scores of all feasible nodes into 0..MaxNodeScore.
type ScoreNormalizer interface {
	NormalizeScore(ctx context.Context, state *CycleState, pod *corev1.Pod, scores []NodeScore) *Status
}

// NodeScore is one node's score.
type NodeScore struct {
	Name  string
	Score int64
}

// NodeToStatus records why each node was rejected.
type NodeToStatus map[string]*Status

// Handle is what plugins that need more than their arguments (preemption)
// see of the framework.
type Handle interface {
	// Snapshot is the view of the current cycle.
	Snapshot() *Snapshot
	// RunFilterPlugins runs every filter on one node.
	RunFilterPlugins(ctx context.Context, state *CycleState, pod *corev1.Pod, nodeInfo *NodeInfo) *Status
	// RunFilterPluginsWithNominatedPods runs every filter on one node with the
	// pods nominated there at the pod's priority or above counted as present.
	RunFilterPluginsWithNominatedPods(ctx context.Context, state *CycleState, pod *corev1.Pod, nodeInfo *NodeInfo) *Status
	// RunPreFilterExtensionAddPod and RunPreFilterExtensionRemovePod update
	// every PreFilter plugin's state for a pod added to or removed from a node.
	RunPreFilterExtensionAddPod(ctx context.Context, state *CycleState, podToSchedule *corev1.Pod, podToAdd *PodInfo, nodeInfo *NodeInfo) *Status
	RunPreFilterExtensionRemovePod(ctx context.Context, state *CycleState, podToSchedule *corev1.Pod, podToRemove *PodInfo, nodeInfo *NodeInfo) *Status
	// PodDisruptionBudgets lists the budgets known to the scheduler.
	PodDisruptionBudgets() []*policyv1.PodDisruptionBudget
	// NamespaceLabels returns a namespace's labels (nil if unknown), for
	// the namespaceSelector of inter-pod affinity terms.
	NamespaceLabels(ns string) labels.Set
	// Now is the scheduler's clock reading.
	Now() time.Time
}
