package workload

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/podsafe/podsafe/history"
)

func init() {
	Add("spread", func() Workload { return &Spread{} })
}

// spreadSets are the constraint sets of the workload's ReplicaSets; set i
// takes spreadSets[i mod len]. They mix zone and hostname keys, hard and
// soft, with maxSkew 1 and 2 (TS-2, TS-3, TS-4).
var spreadSets = [][]spreadRule{
	{{key: corev1.LabelTopologyZone, skew: 1, hard: true}},
	{{key: corev1.LabelHostname, skew: 1, hard: true}, {key: corev1.LabelTopologyZone, skew: 2}},
	{{key: corev1.LabelTopologyZone, skew: 2, hard: true}, {key: corev1.LabelHostname, skew: 1}},
	{{key: corev1.LabelHostname, skew: 2}},
}

// spreadRule is one topology spread constraint, before it names its
// selector.
type spreadRule struct {
	key  string
	skew int32
	hard bool // DoNotSchedule; otherwise ScheduleAnyway
}

// constraint renders the rule for pods labelled app=<app>.
func (r spreadRule) constraint(app string) corev1.TopologySpreadConstraint {
	when := corev1.ScheduleAnyway
	if r.hard {
		when = corev1.DoNotSchedule
	}
	return corev1.TopologySpreadConstraint{MaxSkew: r.skew, TopologyKey: r.key, WhenUnsatisfiable: when,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{labelApp: app}}}
}

func (r spreadRule) String() string {
	when := "soft"
	if r.hard {
		when = "hard"
	}
	key := "zone"
	if r.key == corev1.LabelHostname {
		key = "host"
	}
	return fmt.Sprintf("%s/%s/%d", key, when, r.skew)
}

// Spread is the topology spread workload (TS-*): ReplicaSets whose pods
// carry topologySpreadConstraints over zones and hostnames (DoNotSchedule
// and ScheduleAnyway, maxSkew 1..2), scaled up and down, and bare pods with
// random constraints of their own, deleted with random grace once their
// lifetime is over. The scheduler must judge every placement against the
// spread at the moment of binding (TS-10).
//
// Neighbours in a second namespace carry the labels the constraints select
// but are pinned to one zone: only pods of the incoming pod's own
// namespace may count (TS-6), so they must not sway any placement.
//
// Operations: spread:create, spread:scale, spread:get, spread:list,
// spread:list-pods + spread:delete-pod on the ReplicaSets (keys
// ns/spread<i>); spread:create-pod (key ns/bare-<slot>, Value the
// constraints), spread:get-pod, spread:delete-pod on the bare pods; and
// once at the start spread:create-namespace for both namespaces and
// spread:create-neighbor (key <ns>-neighbors/<group>-<n>).
type Spread struct {
	// Namespace holds the sets and pods (default "podsafe-spread").
	Namespace string
	// Placement, when set, adjusts every pod spec to the cluster (see
	// Placer).
	Placement func(*corev1.PodSpec)
	// Sets is how many ReplicaSets there are (default 3).
	Sets int
	// MaxReplicas bounds every scale (default 4).
	MaxReplicas int
	// Pods is how many bare pod slots there are (default 6); slot j belongs
	// to process j mod processes.
	Pods int
	// Lifetime is a bare pod's mean scaled lifetime (default 60 s).
	Lifetime time.Duration
	// TerminationGrace is spec.terminationGracePeriodSeconds of every pod
	// (default 5).
	TerminationGrace int64
	// MaxDeleteGrace is the longest grace a deletion asks for (default 30).
	MaxDeleteGrace int64
	// Force lets deletions ask for grace 0; off by default.
	Force bool
	// Interval is the mean scaled time between two operations of the whole
	// workload (default 10 s).
	Interval time.Duration
	// OpTimeout bounds each operation in wall time (default 2 s).
	OpTimeout time.Duration
	// SetWeights of create, scale, delete-pod, get and list on the sets
	// the process knows exist (default 0, 4, 2, 1, 1; see Pets.Weights).
	SetWeights [5]int
	// PodWeights of create, get and list on the bare pods when none is due
	// for deletion (default 3, 1, 1).
	PodWeights [3]int
	// SetShare is the percentage of operations on the sets rather than the
	// bare pods (default 60).
	SetShare int
	// InitialReplicas is the replicas every set is created with before the
	// processes start, so the sets spread from the first second (default
	// 2; negative: none, the processes create the sets as they first look
	// at them).
	InitialReplicas int
	// Neighbors is how many pods of each group (every set's and the bare
	// pods') live in the namespace <Namespace>-neighbors, with the group's
	// labels but no constraints, pinned to the first zone (by name) and
	// never deleted (default 3; negative: none). Counted by mistake, they
	// would push the group's own pods out of that zone beyond maxSkew.
	Neighbors int

	// The hard cases of the guarantees, off by default.
	//
	// MinDomains, when > 0, is the minDomains of the hard zone constraints
	// of every other set (the even ones) and of half the bare pods: with
	// fewer zones than that the global minimum is 0 (TS-2), so at most
	// maxSkew matching pods fit in each zone and the rest stay Pending.
	MinDomains int
	// MatchLabelKeys splits the bare pods into two groups by a label
	// (spread-group: g0 or g1) that their constraints name in
	// matchLabelKeys, so each pod spreads among its own group only (TS-1).
	MatchLabelKeys bool
	// NodePolicies gives the constraints nodeAffinityPolicy and
	// nodeTaintsPolicy, Honor or Ignore (each set its own pair in turn, each
	// bare pod a drawn pair; TS-7, TS-8); half the bare pods keep off the
	// first node (by name) through a required node affinity, and half
	// tolerate every taint, so a tainted node (a scenario's topology may
	// taint one) counts for some pods and not for others.
	NodePolicies bool

	// avoid is the node the NodePolicies affinity keeps pods off (Run sets
	// it from the cluster's nodes).
	avoid string

	_ struct{}
}

// Name implements Workload.
func (w *Spread) Name() string { return "spread" }

// Describe implements Workload.
func (w *Spread) Describe() string {
	return "ReplicaSets and bare pods with zone/hostname topology spread constraints (hard and soft, maxSkew 1..2), scaled and deleted, beside look-alike pods of another namespace pinned to one zone"
}

// Needs implements Workload.
func (w *Spread) Needs() Needs {
	return Needs{Kubelets: true, Scheduler: true, Controllers: true, MinNodes: 2, Zones: 2}
}

func (w *Spread) defaults() {
	if w.Namespace == "" {
		w.Namespace = "podsafe-spread"
	}
	if w.Sets == 0 {
		w.Sets = 3
	}
	if w.MaxReplicas == 0 {
		w.MaxReplicas = 4
	}
	if w.Pods == 0 {
		w.Pods = 6
	}
	if w.Lifetime == 0 {
		w.Lifetime = 60 * time.Second
	}
	if w.TerminationGrace == 0 {
		w.TerminationGrace = 5
	}
	if w.MaxDeleteGrace == 0 {
		w.MaxDeleteGrace = defaultMaxDeleteGrace
	}
	if w.Interval == 0 {
		w.Interval = defaultInterval
	}
	if w.OpTimeout == 0 {
		w.OpTimeout = defaultOpTimeout
	}
	if w.SetWeights == [5]int{} {
		w.SetWeights = [5]int{0, 4, 2, 1, 1}
	}
	if w.PodWeights == [3]int{} {
		w.PodWeights = [3]int{3, 1, 1}
	}
	if w.SetShare == 0 {
		w.SetShare = 60
	}
	if w.InitialReplicas == 0 {
		w.InitialReplicas = 2
	}
	if w.Neighbors == 0 {
		w.Neighbors = 3
	}
}

// Validate reports the first unusable field, after defaults.
func (w *Spread) Validate() error {
	c := *w
	c.defaults()
	switch {
	case c.Sets < 0, c.MaxReplicas < 0, c.Pods < 0, c.Lifetime < 0, c.TerminationGrace < 0, c.MaxDeleteGrace < 0,
		c.Interval < 0, c.OpTimeout < 0:
		return fmt.Errorf("%w: spread: counts, durations and graces must not be negative", ErrInvalidWorkload)
	case c.MinDomains < 0:
		return fmt.Errorf("%w: spread: MinDomains is a count of domains, got %d", ErrInvalidWorkload, c.MinDomains)
	case c.SetShare < 0 || c.SetShare > 100:
		return fmt.Errorf("%w: spread: SetShare is a percentage, 0..100, got %d", ErrInvalidWorkload, c.SetShare)
	}
	if err := validWeights("spread sets", c.SetWeights[:]); err != nil {
		return err
	}
	return validWeights("spread pods", c.PodWeights[:])
}

// spreadPlanner splits a process's operations between the sets and its bare
// pod slots.
type spreadPlanner struct {
	rng   *rand.Rand
	share int
	sets  *setPlanner // nil when there are no sets
	pods  *slotPlanner
}

// spreadAction is a set action (onSet) or a slot action.
type spreadAction struct {
	onSet bool
	set   setAction
	slot  slotAction
}

func (a spreadAction) String() string {
	if a.onSet {
		return "set " + a.set.String()
	}
	return "pod " + a.slot.String()
}

func (w *Spread) planner(rng *rand.Rand, worker, workers int) *spreadPlanner {
	pw := [4]int{w.PodWeights[0], w.PodWeights[1], w.PodWeights[2], 0}
	sp := &spreadPlanner{rng: rng, share: w.SetShare,
		pods: newSlotPlanner(rng, w.Pods, worker, workers, w.Lifetime, w.MaxDeleteGrace, w.Force, pw)}
	if w.Sets > 0 {
		sp.sets = newSetPlanner(rng, w.Sets, w.MaxReplicas, w.MaxDeleteGrace, w.Force, w.SetWeights)
	}
	return sp
}

// next chooses the next operation at scaled time now; pure given the seed,
// now and the outcomes observed.
func (sp *spreadPlanner) next(now time.Time) spreadAction {
	onSet := sp.sets != nil && (len(sp.pods.owned) == 0 || sp.rng.IntN(100) < sp.share)
	if onSet {
		return spreadAction{onSet: true, set: sp.sets.next()}
	}
	return spreadAction{slot: sp.pods.next(now)}
}

// Run implements Workload.
func (w *Spread) Run(ctx context.Context, env Env) error {
	if err := w.Validate(); err != nil {
		return err
	}
	w.defaults()
	if w.NodePolicies && len(env.Nodes) > 0 {
		w.avoid = slices.Min(env.Nodes)
	}
	fam := &setFamily{ns: w.Namespace, prefix: "spread", replicaSet: w.replicaSet}
	zone := firstZone(env.Zones)
	return runProcs(ctx, env, w.Name(), w.OpTimeout,
		func(ctx context.Context, p *proc) error { return w.setup(ctx, p, fam, zone) },
		func(runCtx context.Context, p *proc) {
			ctx := context.WithoutCancel(runCtx)
			sp := w.planner(p.rng, p.worker, p.workers)
			for p.think(runCtx, w.Interval) {
				a := sp.next(p.clock.Now())
				if a.onSet {
					fam.run(ctx, p, sp.sets, a.set)
					continue
				}
				runSlot(ctx, p, sp.pods, w.Namespace, "bare-", p.clock.Now, a.slot,
					func(slot int, variant uint64) error {
						pod, value := w.barePod(slot, variant)
						return createPod(ctx, p, pod, value)
					}, nil)
			}
		})
}

// setup creates the namespace and the sets of fam, then the neighbours'
// namespace and the neighbours, pinned to zone.
func (w *Spread) setup(ctx context.Context, p *proc, fam *setFamily, zone string) error {
	if err := p.ensureNamespace(ctx, w.Namespace); err != nil {
		return err
	}
	for i := range w.Sets {
		replicas := int32(min(w.InitialReplicas, w.MaxReplicas))
		if replicas <= 0 {
			break
		}
		if err := p.ensure(ctx, "create", fam.key(fam.name(i)), func(ctx context.Context, _ *history.Op) error {
			_, err := p.cs.AppsV1().ReplicaSets(w.Namespace).Create(ctx, w.replicaSet(i, replicas), metav1.CreateOptions{})
			return err
		}); err != nil {
			return err
		}
	}
	pods := w.neighbors(zone)
	if len(pods) == 0 {
		return nil
	}
	if err := p.ensureNamespace(ctx, w.neighborNamespace()); err != nil {
		return err
	}
	for _, pod := range pods {
		if err := p.ensure(ctx, "create-neighbor", pod.Namespace+"/"+pod.Name, func(ctx context.Context, _ *history.Op) error {
			_, err := p.cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

func (w *Spread) neighborNamespace() string { return w.Namespace + "-neighbors" }

// neighbors builds the neighbour pods: Neighbors of each group, labelled as
// the group's pods are, without constraints, pinned to zone (anywhere when
// zone is ""). It is pure.
func (w *Spread) neighbors(zone string) []*corev1.Pod {
	if w.Neighbors <= 0 {
		return nil
	}
	groups := []string{bareApp}
	for i := range w.Sets {
		groups = append(groups, "spread"+strconv.Itoa(i))
	}
	var sel map[string]string
	if zone != "" {
		sel = map[string]string{corev1.LabelTopologyZone: zone}
	}
	var out []*corev1.Pod
	for _, g := range groups {
		for n := range w.Neighbors {
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: g + "-" + strconv.Itoa(n), Namespace: w.neighborNamespace(),
					Labels: map[string]string{labelApp: g}},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To(w.TerminationGrace),
					NodeSelector:                  sel,
					Containers:                    []corev1.Container{simContainer("app")},
				},
			}
			place(w.Placement, &p.Spec)
			out = append(out, p)
		}
	}
	return out
}

// firstZone is the smallest zone name of the nodes, "" when none has one.
func firstZone(zones map[string]string) string {
	first := ""
	for _, z := range zones {
		if z != "" && (first == "" || z < first) {
			first = z
		}
	}
	return first
}

// replicaSet builds set i with replicas. It is pure.
func (w *Spread) replicaSet(i int, replicas int32) *appsv1.ReplicaSet {
	name := "spread" + strconv.Itoa(i)
	var cs []corev1.TopologySpreadConstraint
	for _, r := range spreadSets[i%len(spreadSets)] {
		c := r.constraint(name)
		if i%2 == 0 {
			w.withMinDomains(&c)
		}
		if w.NodePolicies {
			c.NodeAffinityPolicy, c.NodeTaintsPolicy = nodePolicies(i)
		}
		cs = append(cs, c)
	}
	set := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.Namespace},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{labelApp: name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{labelApp: name}},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To(w.TerminationGrace),
					TopologySpreadConstraints:     cs,
					Containers:                    []corev1.Container{simContainer("app")},
				},
			},
		},
	}
	place(w.Placement, &set.Spec.Template.Spec)
	return set
}

// bareApp labels the bare pods, which spread among themselves.
const bareApp = "spread-bare"

// barePod builds the pod of slot with one or two random constraints drawn
// from variant, and renders them for the op's Value. It is pure.
func (w *Spread) barePod(slot int, variant uint64) (*corev1.Pod, string) {
	rng := rand.New(rand.NewPCG(variant, uint64(slot)))
	keys := []string{corev1.LabelTopologyZone, corev1.LabelHostname}
	rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	n := 1 + rng.IntN(2)
	var cs []corev1.TopologySpreadConstraint
	var desc []string
	// The hard cases draw from a stream of their own, so that the plain
	// constraints of a slot and variant stay what they were without them.
	hardRng := rand.New(rand.NewPCG(variant, uint64(slot)+1<<32))
	minDomains := hardRng.IntN(2) == 0
	policy := hardRng.IntN(4)
	for _, key := range keys[:n] {
		r := spreadRule{key: key, skew: 1 + rng.Int32N(2), hard: rng.IntN(2) == 0}
		c := r.constraint(bareApp)
		d := r.String()
		if minDomains && w.withMinDomains(&c) {
			d += fmt.Sprintf("/minDomains=%d", w.MinDomains)
		}
		if w.MatchLabelKeys {
			c.MatchLabelKeys = []string{labelSpreadGroup}
		}
		if w.NodePolicies {
			c.NodeAffinityPolicy, c.NodeTaintsPolicy = nodePolicies(policy)
			d += fmt.Sprintf("/affinity=%s/taints=%s", *c.NodeAffinityPolicy, *c.NodeTaintsPolicy)
		}
		cs = append(cs, c)
		desc = append(desc, d)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "bare-" + strconv.Itoa(slot), Namespace: w.Namespace,
			Labels: map[string]string{labelApp: bareApp}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To(w.TerminationGrace),
			TopologySpreadConstraints:     cs,
			Containers:                    []corev1.Container{simContainer("app")},
		},
	}
	if w.MatchLabelKeys {
		pod.Labels[labelSpreadGroup] = fmt.Sprintf("g%d", slot%2)
		desc = append(desc, "group="+pod.Labels[labelSpreadGroup])
	}
	if w.NodePolicies {
		if w.avoid != "" && hardRng.IntN(2) == 0 {
			pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpNotIn, Values: []string{w.avoid}}},
				}}}}}
			desc = append(desc, "avoid="+w.avoid)
		}
		if hardRng.IntN(2) == 0 {
			pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists})
			desc = append(desc, "tolerates-all")
		}
	}
	place(w.Placement, &pod.Spec)
	return pod, "spread=" + strings.Join(desc, ",")
}

// labelSpreadGroup splits the bare pods into groups for matchLabelKeys.
const labelSpreadGroup = "spread-group"

// withMinDomains sets the workload's minDomains on c when it is a hard zone
// constraint (minDomains needs DoNotSchedule) and reports whether it did.
func (w *Spread) withMinDomains(c *corev1.TopologySpreadConstraint) bool {
	if w.MinDomains <= 0 || c.WhenUnsatisfiable != corev1.DoNotSchedule || c.TopologyKey != corev1.LabelTopologyZone {
		return false
	}
	c.MinDomains = ptr.To(int32(w.MinDomains))
	return true
}

// nodePolicies is the i-th of the four pairs of nodeAffinityPolicy and
// nodeTaintsPolicy.
func nodePolicies(i int) (affinity, taints *corev1.NodeInclusionPolicy) {
	pick := func(honor bool) *corev1.NodeInclusionPolicy {
		if honor {
			return ptr.To(corev1.NodeInclusionPolicyHonor)
		}
		return ptr.To(corev1.NodeInclusionPolicyIgnore)
	}
	return pick(i%2 == 0), pick(i/2%2 == 0)
}
