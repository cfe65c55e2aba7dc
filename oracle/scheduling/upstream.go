package scheduling

import (
	"context"
	"fmt"
	"math"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	clientsetfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultpreemption"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/podtopologyspread"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/tainttoleration"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"
)

// Upstream runs problems through the kube-scheduler plugins of the pinned
// Kubernetes release, with the release's default feature gates, through
// the upstream framework runtime over an upstream snapshot, as upstream's
// own plugin tests do. Safe for concurrent use.
type Upstream struct {
	fts plfeature.Features
}

// NewUpstream returns the upstream side of the oracle.
func NewUpstream() *Upstream {
	// The framework runtime instruments plugins with the scheduler's
	// metrics, which exist once registered.
	metrics.Register()
	return &Upstream{fts: plfeature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)}
}

// upstreamCycle is one problem's framework and the plugin instances in it.
type upstreamCycle struct {
	fw     framework.Framework
	snap   *internalcache.Snapshot
	spread *podtopologyspread.PodTopologySpread
	fit    *noderesources.Fit
	nodes  []fwk.NodeInfo
	byName map[string]fwk.NodeInfo
}

// profile is the plugins both sides run: the filters a pod with requests,
// node requirements, tolerations and spread constraints meets, in
// kube-scheduler's default order.
func (u *Upstream) newCycle(ctx context.Context, p *Problem) (*upstreamCycle, error) {
	c := &upstreamCycle{snap: internalcache.NewSnapshot(p.Pods, p.Nodes)}
	capture := func(name string, f frameworkruntime.PluginFactory) frameworkruntime.PluginFactory {
		return func(ctx context.Context, args runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			pl, err := f(ctx, args, h)
			if err != nil {
				return nil, fmt.Errorf("building upstream %s: %w", name, err)
			}
			switch pl := pl.(type) {
			case *podtopologyspread.PodTopologySpread:
				c.spread = pl
			case *noderesources.Fit:
				c.fit = pl
			}
			return pl, nil
		}
	}
	registry := frameworkruntime.Registry{
		queuesort.Name:         queuesort.New,
		defaultbinder.Name:     defaultbinder.New,
		tainttoleration.Name:   frameworkruntime.FactoryAdapter(u.fts, tainttoleration.New),
		nodeaffinity.Name:      frameworkruntime.FactoryAdapter(u.fts, nodeaffinity.New),
		noderesources.Name:     capture(noderesources.Name, frameworkruntime.FactoryAdapter(u.fts, noderesources.NewFit)),
		podtopologyspread.Name: capture(podtopologyspread.Name, frameworkruntime.FactoryAdapter(u.fts, podtopologyspread.New)),
	}
	enabled := func(names ...string) config.PluginSet {
		var ps config.PluginSet
		for _, n := range names {
			ps.Enabled = append(ps.Enabled, config.Plugin{Name: n, Weight: 1})
		}
		return ps
	}
	filters := []string{tainttoleration.Name, nodeaffinity.Name, noderesources.Name, podtopologyspread.Name}
	profile := &config.KubeSchedulerProfile{
		SchedulerName: "oracle",
		Plugins: &config.Plugins{
			QueueSort: enabled(queuesort.Name),
			Bind:      enabled(defaultbinder.Name),
			PreFilter: enabled(nodeaffinity.Name, noderesources.Name, podtopologyspread.Name),
			Filter:    enabled(filters...),
			PreScore:  enabled(podtopologyspread.Name),
			Score:     enabled(podtopologyspread.Name),
		},
		PluginConfig: []config.PluginConfig{
			// System defaulting, as both schedulers run by default.
			{Name: podtopologyspread.Name, Args: &config.PodTopologySpreadArgs{DefaultingType: config.SystemDefaulting}},
			{Name: nodeaffinity.Name, Args: &config.NodeAffinityArgs{}},
			{Name: noderesources.Name, Args: &config.NodeResourcesFitArgs{ScoringStrategy: &config.ScoringStrategy{
				Type:      config.LeastAllocated,
				Resources: []config.ResourceSpec{{Name: string(corev1.ResourceCPU), Weight: 1}, {Name: string(corev1.ResourceMemory), Weight: 1}},
			}}},
		},
	}
	informerFactory := informers.NewSharedInformerFactory(clientsetfake.NewClientset(), 0)
	// The listers read the informers' stores, filled here without starting
	// the informers.
	if err := fillStores(informerFactory, p); err != nil {
		return nil, err
	}
	fw, err := frameworkruntime.NewFramework(ctx, registry, profile,
		frameworkruntime.WithSnapshotSharedLister(c.snap),
		frameworkruntime.WithMutableSnapshotLister(c.snap),
		frameworkruntime.WithInformerFactory(informerFactory),
		frameworkruntime.WithPodNominator(noNominations{}),
		frameworkruntime.WithParallelism(1),
		frameworkruntime.WithLogger(klog.Background()),
	)
	if err != nil {
		return nil, fmt.Errorf("building upstream framework: %w", err)
	}
	c.fw = fw
	if c.nodes, err = c.snap.NodeInfos().List(); err != nil {
		return nil, fmt.Errorf("listing upstream nodes: %w", err)
	}
	sort.Slice(c.nodes, func(i, j int) bool { return c.nodes[i].Node().Name < c.nodes[j].Node().Name })
	c.byName = map[string]fwk.NodeInfo{}
	for _, ni := range c.nodes {
		c.byName[ni.Node().Name] = ni
	}
	return c, nil
}

// Run computes upstream's verdict on p.
func (u *Upstream) Run(ctx context.Context, p *Problem) (*Verdict, error) {
	ctx, cancel := context.WithCancel(ctx)
	// NewFramework starts a metrics goroutine that lives as long as ctx.
	defer cancel()
	c, err := u.newCycle(ctx, p)
	if err != nil {
		return nil, err
	}
	v := &Verdict{}
	if err := c.filter(ctx, p.Pod, &v.Filter); err != nil {
		return nil, err
	}
	state := framework.NewCycleState()
	if _, st, _ := c.fw.RunPreFilterPlugins(ctx, state, p.Pod); !st.IsSuccess() {
		return nil, fmt.Errorf("upstream PreFilter: %w", st.AsError())
	}
	v.Filter.Chain = map[string]string{}
	var feasible []fwk.NodeInfo
	for _, ni := range c.nodes {
		st := c.fw.RunFilterPluginsWithNominatedPods(ctx, state, p.Pod, ni)
		switch {
		case st.IsSuccess():
			feasible = append(feasible, ni)
			v.Filter.Feasible = append(v.Filter.Feasible, ni.Node().Name)
		case st.IsRejected():
			v.Filter.Chain[ni.Node().Name] = st.Code().String()
		default:
			return nil, fmt.Errorf("upstream filters on %s: %w", ni.Node().Name, st.AsError())
		}
	}
	if len(feasible) > 0 {
		if v.Score, err = c.score(ctx, p.Pod, feasible); err != nil {
			return nil, err
		}
		return v, nil
	}
	// No node to score: the scheduler goes to PostFilter instead.
	v.Score.Skipped = true
	if v.Preemption, err = u.preempt(ctx, c, state, p, v.Filter.Chain); err != nil {
		return nil, err
	}
	return v, nil
}

// filter runs PodTopologySpread and NodeResourcesFit each on its own, so
// every node gets both plugins' verdicts.
func (c *upstreamCycle) filter(ctx context.Context, pod *corev1.Pod, out *FilterVerdict) error {
	out.Spread, out.Fit = map[string]string{}, map[string]string{}
	state := framework.NewCycleState()
	_, st := c.spread.PreFilter(ctx, state, pod, c.nodes)
	out.SpreadPreFilter = codeOf(st)
	switch {
	case st.IsSkip():
		for _, ni := range c.nodes {
			out.Spread[ni.Node().Name] = CodeSuccess
		}
	case !st.IsSuccess():
		return fmt.Errorf("upstream PodTopologySpread PreFilter: %w", st.AsError())
	default:
		for _, ni := range c.nodes {
			out.Spread[ni.Node().Name] = codeOf(c.spread.Filter(ctx, state, pod, ni))
		}
	}
	state = framework.NewCycleState()
	if _, st := c.fit.PreFilter(ctx, state, pod, c.nodes); !st.IsSuccess() {
		return fmt.Errorf("upstream NodeResourcesFit PreFilter: %w", st.AsError())
	}
	for _, ni := range c.nodes {
		out.Fit[ni.Node().Name] = codeOf(c.fit.Filter(ctx, state, pod, ni))
	}
	return nil
}

// score runs PodTopologySpread's PreScore, Score and NormalizeScore over
// the feasible nodes.
func (c *upstreamCycle) score(ctx context.Context, pod *corev1.Pod, feasible []fwk.NodeInfo) (ScoreVerdict, error) {
	state := framework.NewCycleState()
	st := c.spread.PreScore(ctx, state, pod, feasible)
	if st.IsSkip() {
		return ScoreVerdict{Skipped: true}, nil
	}
	if !st.IsSuccess() {
		return ScoreVerdict{}, fmt.Errorf("upstream PodTopologySpread PreScore: %w", st.AsError())
	}
	scores := make(fwk.NodeScoreList, len(feasible))
	for i, ni := range feasible {
		s, st := c.spread.Score(ctx, state, pod, ni)
		if !st.IsSuccess() {
			return ScoreVerdict{}, fmt.Errorf("upstream PodTopologySpread Score on %s: %w", ni.Node().Name, st.AsError())
		}
		scores[i] = fwk.NodeScore{Name: ni.Node().Name, Score: s}
	}
	if st := c.spread.ScoreExtensions().NormalizeScore(ctx, state, pod, scores); !st.IsSuccess() {
		return ScoreVerdict{}, fmt.Errorf("upstream PodTopologySpread NormalizeScore: %w", st.AsError())
	}
	out := ScoreVerdict{Scores: map[string]int64{}}
	for _, s := range scores {
		out.Scores[s.Name] = s.Score
	}
	return out, nil
}

// preempt runs DefaultPreemption's evaluation as Evaluator.Preempt does,
// without actuating it: eligibility, the Unschedulable nodes as potential
// candidates, a dry run on every one of them (the candidate count covers
// all nodes of a small cluster, so the random offset changes nothing),
// and the pick. All candidates are kept, so the tie set of the pick can
// be computed.
func (u *Upstream) preempt(ctx context.Context, c *upstreamCycle, state fwk.CycleState, p *Problem, chain map[string]string) (*PreemptionVerdict, error) {
	pl, err := defaultpreemption.New(ctx, &config.DefaultPreemptionArgs{MinCandidateNodesPercentage: 10, MinCandidateNodesAbsolute: 100}, c.fw, u.fts)
	if err != nil {
		return nil, fmt.Errorf("building upstream DefaultPreemption: %w", err)
	}
	out := &PreemptionVerdict{Candidates: map[string][]string{}}
	var nominatedStatus *fwk.Status
	if nn := p.Pod.Status.NominatedNodeName; nn != "" {
		nominatedStatus = fwk.NewStatus(fwk.UnschedulableAndUnresolvable)
		if code, ok := chain[nn]; ok && code == CodeUnschedulable {
			nominatedStatus = fwk.NewStatus(fwk.Unschedulable)
		}
	}
	if ok, _ := pl.PodEligibleToPreemptOthers(ctx, p.Pod, nominatedStatus); !ok {
		return out, nil
	}
	var potential []fwk.NodeInfo
	for _, ni := range c.nodes {
		if chain[ni.Node().Name] == CodeUnschedulable {
			potential = append(potential, ni)
		}
	}
	if len(potential) == 0 {
		return out, nil
	}
	n := int32(len(potential))
	_, num := pl.GetOffsetAndNumCandidates(n)
	candidates, _, err := pl.Evaluator.DryRunPreemption(ctx, state, p.Pod, potential, p.PDBs, 0, num)
	if err != nil && len(candidates) == 0 {
		return nil, fmt.Errorf("upstream preemption dry run: %w", err)
	}
	if len(candidates) == 0 {
		return out, nil
	}
	victims := map[string]*extenderv1.Victims{}
	for _, cand := range candidates {
		victims[cand.Name()] = cand.Victims()
		out.Candidates[cand.Name()] = podNames(cand.Victims().Pods)
	}
	best := pl.Evaluator.SelectCandidate(ctx, candidates)
	out.Node, out.Victims = best.Name(), podNames(best.Victims().Pods)
	out.Ties = ties(victims)
	if !containsString(out.Ties, out.Node) {
		return nil, fmt.Errorf("oracle: upstream picked %s outside the computed tie set %v", out.Node, out.Ties)
	}
	return out, nil
}

// ties returns the candidate nodes that score best on every criterion of
// upstream's pickOneNodeForPreemption (fewest budget violations, lowest
// highest victim priority, lowest sum of priorities, fewest victims,
// latest earliest start among the highest-priority victims); upstream
// takes the first of them in an order that depends on the dry run's
// goroutines, so any is correct.
func ties(victims map[string]*extenderv1.Victims) []string {
	type key struct {
		violations, highest, sum, count int64
		start                           int64
	}
	keyOf := func(v *extenderv1.Victims) key {
		k := key{violations: v.NumPDBViolations, highest: math.MinInt64, count: int64(len(v.Pods))}
		for _, pod := range v.Pods {
			prio := int64(corev1helpers.PodPriority(pod))
			k.highest = max(k.highest, prio)
			k.sum += prio + math.MaxInt32 + 1
		}
		if t := schedutil.GetEarliestPodStartTime(v); t != nil {
			k.start = t.UnixNano()
		}
		return k
	}
	better := func(a, b key) bool {
		switch {
		case a.violations != b.violations:
			return a.violations < b.violations
		case a.highest != b.highest:
			return a.highest < b.highest
		case a.sum != b.sum:
			return a.sum < b.sum
		case a.count != b.count:
			return a.count < b.count
		}
		return a.start > b.start
	}
	var best key
	var out []string
	for _, node := range sortedKeys(victims) {
		k := keyOf(victims[node])
		switch {
		case out == nil || better(k, best):
			best, out = k, []string{node}
		case k == best:
			out = append(out, node)
		}
	}
	return out
}

func podNames(pods []*corev1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	sort.Strings(out)
	return out
}

func containsString(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

func codeOf(st *fwk.Status) string {
	switch st.Code() {
	case fwk.Success:
		return CodeSuccess
	case fwk.Unschedulable:
		return CodeUnschedulable
	case fwk.UnschedulableAndUnresolvable:
		return CodeUnresolvable
	case fwk.Skip:
		return CodeSkip
	}
	return st.Code().String() + ": " + st.Message()
}

// noNominations is a PodNominator with no nominated pods: problems carry
// none, and the upstream framework needs one to filter with nominated pods.
type noNominations struct{}

func (noNominations) AddNominatedPod(klog.Logger, fwk.PodInfo, *fwk.NominatingInfo) {}
func (noNominations) DeleteNominatedPodIfExists(*corev1.Pod)                        {}
func (noNominations) UpdateNominatedPod(klog.Logger, *corev1.Pod, fwk.PodInfo)      {}
func (noNominations) NominatedPodsForNode(string) []fwk.PodInfo                     { return nil }

var _ fwk.PodNominator = noNominations{}

// fillStores puts the problem's workloads into the informers' stores.
func fillStores(f informers.SharedInformerFactory, p *Problem) error {
	add := func(inf cache.SharedIndexInformer, obj any) error {
		if err := inf.GetIndexer().Add(obj); err != nil {
			return fmt.Errorf("filling the upstream informer store: %w", err)
		}
		return nil
	}
	for _, o := range p.Services {
		if err := add(f.Core().V1().Services().Informer(), o); err != nil {
			return err
		}
	}
	for _, o := range p.ReplicationControllers {
		if err := add(f.Core().V1().ReplicationControllers().Informer(), o); err != nil {
			return err
		}
	}
	for _, o := range p.ReplicaSets {
		if err := add(f.Apps().V1().ReplicaSets().Informer(), o); err != nil {
			return err
		}
	}
	for _, o := range p.StatefulSets {
		if err := add(f.Apps().V1().StatefulSets().Informer(), o); err != nil {
			return err
		}
	}
	for _, o := range p.PDBs {
		if err := add(f.Policy().V1().PodDisruptionBudgets().Informer(), o); err != nil {
			return err
		}
	}
	return nil
}
