package scheduling

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/podsafe/podsafe/scheduler/framework"
	"github.com/podsafe/podsafe/scheduler/plugins/defaultpreemption"
	"github.com/podsafe/podsafe/scheduler/plugins/nodeaffinity"
	"github.com/podsafe/podsafe/scheduler/plugins/noderesources"
	"github.com/podsafe/podsafe/scheduler/plugins/podtopologyspread"
	"github.com/podsafe/podsafe/scheduler/plugins/tainttoleration"
)

// Podsafe runs problems through podsafe's own scheduler plugins, built
// into a framework over a snapshot as the scheduler builds them. Safe for
// concurrent use.
type Podsafe struct{}

// spreadArgs are the scheduler's: the built-in default constraints, with
// the selector of the pod's workloads taken from listers over the
// problem's Services and controllers, as the scheduler's informers give
// it.
func spreadArgs(p *Problem) (podtopologyspread.Args, error) {
	idx := func(objs ...any) (cache.Indexer, error) {
		i := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		for _, o := range objs {
			if err := i.Add(o); err != nil {
				return nil, fmt.Errorf("filling a podsafe lister: %w", err)
			}
		}
		return i, nil
	}
	var w podtopologyspread.Workloads
	var objs [4][]any
	for _, o := range p.Services {
		objs[0] = append(objs[0], o)
	}
	for _, o := range p.ReplicationControllers {
		objs[1] = append(objs[1], o)
	}
	for _, o := range p.ReplicaSets {
		objs[2] = append(objs[2], o)
	}
	for _, o := range p.StatefulSets {
		objs[3] = append(objs[3], o)
	}
	var idxs [4]cache.Indexer
	for i := range objs {
		var err error
		if idxs[i], err = idx(objs[i]...); err != nil {
			return podtopologyspread.Args{}, err
		}
	}
	w.Services = corelisters.NewServiceLister(idxs[0])
	w.ReplicationControllers = corelisters.NewReplicationControllerLister(idxs[1])
	w.ReplicaSets = appslisters.NewReplicaSetLister(idxs[2])
	w.StatefulSets = appslisters.NewStatefulSetLister(idxs[3])
	return podtopologyspread.Args{DefaultSelector: w.Selector}, nil
}

// Run computes podsafe's verdict on p. PodTopologySpread scores the nodes
// named in scoreOn, which should be upstream's feasible nodes, so that
// scores are compared on the same nodes even where the filters disagree
// (the filter part reports that); nil scores podsafe's own feasible nodes.
func (Podsafe) Run(ctx context.Context, p *Problem, scoreOn []string) (*Verdict, error) {
	pdbs := p.PDBs
	args, err := spreadArgs(p)
	if err != nil {
		return nil, err
	}
	fw, err := framework.NewFramework([]framework.PluginSpec{
		{Factory: tainttoleration.New},
		{Factory: nodeaffinity.New},
		{Factory: noderesources.NewFit},
		{Factory: podtopologyspread.New(args)},
		{Factory: defaultpreemption.New(defaultpreemption.Args{})},
	}, framework.Options{PodDisruptionBudgets: func() []*policyv1.PodDisruptionBudget { return pdbs }})
	if err != nil {
		return nil, fmt.Errorf("building podsafe framework: %w", err)
	}
	snap := framework.NewSnapshot(p.Pods, p.Nodes)
	fw.SetSnapshot(snap)
	v := &Verdict{}
	if err := podsafeFilter(ctx, fw, args, snap, p.Pod, &v.Filter); err != nil {
		return nil, err
	}
	state := framework.NewCycleState()
	if st := fw.RunPreFilterPlugins(ctx, state, p.Pod); !st.IsSuccess() {
		return nil, fmt.Errorf("podsafe PreFilter: %w", st.AsError())
	}
	v.Filter.Chain = map[string]string{}
	statuses := framework.NodeToStatus{}
	var feasible []*framework.NodeInfo
	for _, ni := range snap.List() {
		st := fw.RunFilterPluginsWithNominatedPods(ctx, state, p.Pod, ni)
		switch {
		case st.IsSuccess():
			feasible = append(feasible, ni)
			v.Filter.Feasible = append(v.Filter.Feasible, ni.Node().Name)
		case st.IsRejected():
			statuses[ni.Node().Name] = st
			v.Filter.Chain[ni.Node().Name] = st.Code().String()
		default:
			return nil, fmt.Errorf("podsafe filters on %s: %w", ni.Node().Name, st.AsError())
		}
	}
	toScore := feasible
	if scoreOn != nil {
		toScore = nil
		for _, name := range scoreOn {
			if ni := snap.Get(name); ni != nil {
				toScore = append(toScore, ni)
			}
		}
	}
	v.Score.Skipped = true
	if len(toScore) > 0 {
		if v.Score, err = podsafeScore(ctx, fw, args, p.Pod, toScore); err != nil {
			return nil, err
		}
	}
	if len(feasible) > 0 {
		return v, nil
	}
	v.Preemption = &PreemptionVerdict{}
	res, st := fw.RunPostFilterPlugins(ctx, state, p.Pod, statuses)
	switch {
	case st.IsSuccess() && res != nil:
		v.Preemption.Node, v.Preemption.Victims = res.NominatedNodeName, podNames(res.Victims)
	case st.Code() == framework.Error:
		return nil, fmt.Errorf("podsafe preemption: %w", st.AsError())
	}
	return v, nil
}

func podsafeFilter(ctx context.Context, fw *framework.Framework, args podtopologyspread.Args, snap *framework.Snapshot, pod *corev1.Pod, out *FilterVerdict) error {
	out.Spread, out.Fit = map[string]string{}, map[string]string{}
	p, err := podtopologyspread.New(args)(fw)
	if err != nil {
		return fmt.Errorf("building podsafe PodTopologySpread: %w", err)
	}
	spread := p.(*podtopologyspread.PodTopologySpread)
	state := framework.NewCycleState()
	st := spread.PreFilter(ctx, state, pod, snap.List())
	out.SpreadPreFilter = st.Code().String()
	switch {
	case st.IsSkip():
		for _, ni := range snap.List() {
			out.Spread[ni.Node().Name] = CodeSuccess
		}
	case !st.IsSuccess():
		return fmt.Errorf("podsafe PodTopologySpread PreFilter: %w", st.AsError())
	default:
		for _, ni := range snap.List() {
			out.Spread[ni.Node().Name] = psCode(spread.Filter(ctx, state, pod, ni))
		}
	}
	fit := &noderesources.Fit{}
	state = framework.NewCycleState()
	if st := fit.PreFilter(ctx, state, pod, snap.List()); !st.IsSuccess() {
		return fmt.Errorf("podsafe NodeResourcesFit PreFilter: %w", st.AsError())
	}
	for _, ni := range snap.List() {
		out.Fit[ni.Node().Name] = psCode(fit.Filter(ctx, state, pod, ni))
	}
	return nil
}

func podsafeScore(ctx context.Context, fw *framework.Framework, args podtopologyspread.Args, pod *corev1.Pod, feasible []*framework.NodeInfo) (ScoreVerdict, error) {
	p, err := podtopologyspread.New(args)(fw)
	if err != nil {
		return ScoreVerdict{}, fmt.Errorf("building podsafe PodTopologySpread: %w", err)
	}
	spread := p.(*podtopologyspread.PodTopologySpread)
	state := framework.NewCycleState()
	st := spread.PreScore(ctx, state, pod, feasible)
	if st.IsSkip() {
		return ScoreVerdict{Skipped: true}, nil
	}
	if !st.IsSuccess() {
		return ScoreVerdict{}, fmt.Errorf("podsafe PodTopologySpread PreScore: %w", st.AsError())
	}
	scores := make([]framework.NodeScore, len(feasible))
	for i, ni := range feasible {
		s, st := spread.Score(ctx, state, pod, ni)
		if !st.IsSuccess() {
			return ScoreVerdict{}, fmt.Errorf("podsafe PodTopologySpread Score on %s: %w", ni.Node().Name, st.AsError())
		}
		scores[i] = framework.NodeScore{Name: ni.Node().Name, Score: s}
	}
	if st := spread.NormalizeScore(ctx, state, pod, scores); !st.IsSuccess() {
		return ScoreVerdict{}, fmt.Errorf("podsafe PodTopologySpread NormalizeScore: %w", st.AsError())
	}
	out := ScoreVerdict{Scores: map[string]int64{}}
	for _, s := range scores {
		out.Scores[s.Name] = s.Score
	}
	return out, nil
}

func psCode(st *framework.Status) string {
	switch st.Code() {
	case framework.Success:
		return CodeSuccess
	case framework.Unschedulable:
		return CodeUnschedulable
	case framework.UnschedulableAndUnresolvable:
		return CodeUnresolvable
	case framework.Skip:
		return CodeSkip
	}
	return st.Code().String() + ": " + st.Message()
}
