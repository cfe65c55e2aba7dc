package scheduler

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsafe/podsafe/scheduler/framework"
)

// ScheduleOne takes the next pod from the queue and tries to place it: bind
// it, or preempt for it and requeue it, or requeue it after back-off. A
// pod the scheduler still has, pending, always ends in one of these, never
// dropped (see handleSchedulingFailure).
func (s *Scheduler) ScheduleOne(ctx context.Context) {
	qp, err := s.queue.Pop(ctx)
	if err != nil {
		return
	}
	pod := qp.Pod
	if _, counted := s.cache.PodNode(pod.UID); counted {
		s.queue.Done(pod.UID)
		return
	}
	if node := s.nominator.NodeOf(pod.UID); node != "" && pod.Status.NominatedNodeName != node {
		// The informer has not shown this scheduler's nomination yet; the
		// cycle must see it, or preemption would choose victims again while
		// the first ones are still terminating.
		pod = pod.DeepCopy()
		pod.Status.NominatedNodeName = node
	}
	s.cache.UpdateSnapshot(s.snapshot)
	s.fw.SetSnapshot(s.snapshot)
	state := framework.NewCycleState()
	res, err := s.algo.schedule(ctx, state, pod)
	if err != nil {
		s.handleScheduleError(ctx, state, pod, err)
		return
	}
	// Count the pod on its node before the binding lands, so the next cycle
	// sees the room as taken.
	s.cache.AssumePod(pod, res.Node)
	if err := s.binder.bind(ctx, pod, res.Node); err != nil {
		// Whatever the error (a 404 or 409 from a store that lags behind
		// the informer, a timeout whose binding may or may not have
		// landed, a 5xx), the informer decides what happens to the pod,
		// as in kube-scheduler's handleBindingCycleError: the assumption
		// is forgotten, and a pod still pending is retried after back-off.
		s.cache.ForgetPod(pod.UID)
		s.log.Warn("binding failed", "pod", klogRef(pod), "node", res.Node, "err", err)
		s.handleSchedulingFailure(ctx, pod, corev1.PodReasonSchedulerError, err.Error(), nil)
		return
	}
	s.queue.Done(pod.UID)
	s.nominator.Delete(pod.UID)
	s.log.Debug("pod bound", "pod", klogRef(pod), "node", res.Node,
		"evaluated_nodes", res.EvaluatedNodes, "feasible_nodes", res.FeasibleNodes)
	// A higher-priority pod took the node: lower-priority nominations there
	// are void and those pods may look elsewhere (PR-5).
	s.clearLowerNominations(ctx, pod, res.Node)
}

// minFeasibleNodesToFind is the fewest feasible nodes searched for before
// the search may stop early.
const minFeasibleNodesToFind = 100

// FitError says why a pod fits no node.
type FitError struct {
	Pod      *corev1.Pod
	NumNodes int
	Statuses framework.NodeToStatus
	// PreFilterMsg is the rejection of a PreFilter plugin, which applies to
	// every node; empty when the filters ran.
	PreFilterMsg string
	// PostFilterMsg says why preemption did not help; empty when it did or
	// did not run.
	PostFilterMsg string
}

// Error summarizes the rejection as kube-scheduler words it: "0/3 nodes are
// available: 1 Insufficient cpu, 2 node(s) had untolerated taint(s)." with
// each reason counted over the nodes, or the PreFilter's rejection, then
// preemption's message.
func (e *FitError) Error() string {
	msg := fmt.Sprintf("0/%d nodes are available:", e.NumNodes)
	if e.PreFilterMsg != "" {
		msg += " " + e.PreFilterMsg + "."
	} else {
		counts := map[string]int{}
		for _, st := range e.Statuses {
			for _, r := range st.Reasons() {
				counts[r]++
			}
		}
		var parts []string
		for r, n := range counts {
			parts = append(parts, fmt.Sprintf("%d %s", n, r))
		}
		sort.Strings(parts)
		if len(parts) > 0 {
			msg += " " + strings.Join(parts, ", ") + "."
		}
	}
	if e.PostFilterMsg != "" {
		msg += " " + e.PostFilterMsg + "."
	}
	return msg
}

// ScheduleResult is where a pod should go.
type ScheduleResult struct {
	Node           string
	EvaluatedNodes int
	FeasibleNodes  int
}

// algorithm finds a node for one pod at a time against the framework's
// snapshot. Not safe for concurrent use.
type algorithm struct {
	fw         *framework.Framework
	percentage int32
	nextStart  int
}

// schedule runs PreFilter, Filter, Score and returns the best node, or a
// *FitError when the pod fits nowhere.
func (a *algorithm) schedule(ctx context.Context, state *framework.CycleState, pod *corev1.Pod) (ScheduleResult, error) {
	snap := a.fw.Snapshot()
	nodes := snap.List()
	if len(nodes) == 0 {
		return ScheduleResult{}, ErrNoNodesAvailable
	}
	if st := a.fw.RunPreFilterPlugins(ctx, state, pod); !st.IsSuccess() {
		if st.Code() == framework.Error {
			return ScheduleResult{}, fmt.Errorf("running PreFilter for pod %s/%s: %w", pod.Namespace, pod.Name, st.AsError())
		}
		fe := &FitError{Pod: pod, NumNodes: len(nodes), Statuses: framework.NodeToStatus{}, PreFilterMsg: st.Message()}
		for _, ni := range nodes {
			fe.Statuses[ni.Node().Name] = st
		}
		return ScheduleResult{}, fe
	}
	// A nominated node is tried first: preemption made room there.
	if nn := snap.Get(pod.Status.NominatedNodeName); nn != nil {
		if st := a.fw.RunFilterPluginsWithNominatedPods(ctx, state, pod, nn); st.IsSuccess() {
			return ScheduleResult{Node: nn.Node().Name, EvaluatedNodes: 1, FeasibleNodes: 1}, nil
		}
	}
	want := a.numFeasibleNodesToFind(len(nodes))
	feasible, statuses, evaluated, err := a.findFeasible(ctx, state, pod, nodes, want)
	if err != nil {
		return ScheduleResult{}, err
	}
	start := a.nextStart % len(nodes)
	a.nextStart = (start + evaluated) % len(nodes)
	if len(feasible) == 0 {
		return ScheduleResult{}, &FitError{Pod: pod, NumNodes: len(nodes), Statuses: statuses}
	}
	res := ScheduleResult{EvaluatedNodes: evaluated, FeasibleNodes: len(feasible)}
	if len(feasible) == 1 {
		res.Node = feasible[0].Node().Name
		return res, nil
	}
	scores, st := a.fw.RunScorePlugins(ctx, state, pod, feasible)
	if !st.IsSuccess() {
		return ScheduleResult{}, fmt.Errorf("scoring pod %s/%s: %w", pod.Namespace, pod.Name, st.AsError())
	}
	res.Node = scores[selectBest(scores, rand.IntN)].Name
	return res, nil
}

// findFeasible filters nodes from nextStart on, wrapping around, until want
// feasible nodes are found or every node was tried. Nodes are filtered in
// batches on Parallelism goroutines; results are taken in node order, so
// the outcome does not depend on the parallelism. evaluated counts the
// nodes taken, not the extra ones a batch may have filtered.
func (a *algorithm) findFeasible(ctx context.Context, state *framework.CycleState, pod *corev1.Pod, nodes []*framework.NodeInfo, want int) ([]*framework.NodeInfo, framework.NodeToStatus, int, error) {
	start := a.nextStart % len(nodes)
	workers := framework.Parallelism()
	var feasible, rejected []*framework.NodeInfo
	var reasons []*framework.Status
	results := make([]*framework.Status, min(len(nodes), max(want, 16*workers)))
	evaluated := 0
	for evaluated < len(nodes) && len(feasible) < want {
		batch := min(len(nodes)-evaluated, max(want-len(feasible), 16*workers), len(results))
		base := start + evaluated
		framework.Parallelize(ctx, workers, batch, func(i int) {
			results[i] = a.fw.RunFilterPluginsWithNominatedPods(ctx, state, pod, nodes[(base+i)%len(nodes)])
		})
		if err := ctx.Err(); err != nil {
			return nil, nil, 0, fmt.Errorf("filtering nodes for pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		for i := 0; i < batch && len(feasible) < want; i++ {
			ni, st := nodes[(base+i)%len(nodes)], results[i]
			evaluated++
			switch {
			case st.IsSuccess():
				feasible = append(feasible, ni)
			case st.Code() == framework.Error:
				return nil, nil, 0, fmt.Errorf("filtering node %s for pod %s/%s: %w", ni.Node().Name, pod.Namespace, pod.Name, st.AsError())
			default:
				rejected, reasons = append(rejected, ni), append(reasons, st)
			}
		}
	}
	statuses := make(framework.NodeToStatus, len(rejected))
	for i, ni := range rejected {
		statuses[ni.Node().Name] = reasons[i]
	}
	return feasible, statuses, evaluated, nil
}

// numFeasibleNodesToFind bounds the search on large clusters: the adaptive
// share shrinks from 50 % as the cluster grows, never below 5 % or 100
// nodes.
func (a *algorithm) numFeasibleNodesToFind(n int) int {
	if n <= minFeasibleNodesToFind || a.percentage >= 100 {
		return n
	}
	pct := int(a.percentage)
	if pct == 0 {
		pct = max(50-n/125, 5)
	}
	return max(n*pct/100, minFeasibleNodesToFind)
}

// selectBest returns the index of the highest score; among equal highest
// scores it picks one uniformly (reservoir sampling with intn), as
// Kubernetes' selectHost does, so that equally good nodes share the load
// instead of the first in filter order taking every tie.
func selectBest(scores []framework.NodeScore, intn func(int) int) int {
	best, ties := 0, 1
	for i := 1; i < len(scores); i++ {
		switch {
		case scores[i].Score > scores[best].Score:
			best, ties = i, 1
		case scores[i].Score == scores[best].Score:
			ties++
			if intn(ties) == 0 {
				best = i
			}
		}
	}
	return best
}
