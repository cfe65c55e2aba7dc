package podtopologyspread

import (
	"math"

	"github.com/pingcap/failpoint"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/podsafe/podsafe/scheduler/framework"
	"github.com/podsafe/podsafe/scheduler/plugins/tainttoleration"
)

// constraint is a TopologySpreadConstraint resolved for one incoming pod.
type constraint struct {
	maxSkew       int32
	minDomains    int32
	topologyKey   string
	selector      labels.Selector
	honorAffinity bool
	honorTaints   bool
}

// constraintsOf resolves the pod's constraints with the given
// whenUnsatisfiable: its own, or, if it has none at all, the defaults with
// the owner's selector.
func (pl *PodTopologySpread) constraintsOf(pod *corev1.Pod, action corev1.UnsatisfiableConstraintAction) ([]constraint, error) {
	if len(pod.Spec.TopologySpreadConstraints) > 0 {
		var out []constraint
		for _, c := range pod.Spec.TopologySpreadConstraints {
			if whenUnsatisfiable(c) != action {
				continue
			}
			sel, err := selectorOf(pod, c)
			if err != nil {
				return nil, err
			}
			out = append(out, resolve(c, sel))
		}
		return out, nil
	}
	if len(pl.defaults) == 0 {
		return nil, nil
	}
	sel := pl.defaultSelector(pod)
	if sel == nil || sel.Empty() {
		return nil, nil
	}
	var out []constraint
	for _, c := range pl.defaults {
		if whenUnsatisfiable(c) == action {
			out = append(out, resolve(c, sel))
		}
	}
	return out, nil
}

func whenUnsatisfiable(c corev1.TopologySpreadConstraint) corev1.UnsatisfiableConstraintAction {
	if c.WhenUnsatisfiable == "" {
		return corev1.DoNotSchedule
	}
	return c.WhenUnsatisfiable
}

func resolve(c corev1.TopologySpreadConstraint, sel labels.Selector) constraint {
	out := constraint{
		maxSkew:     c.MaxSkew,
		minDomains:  1,
		topologyKey: c.TopologyKey,
		selector:    sel,
		// nodeAffinityPolicy defaults to Honor, nodeTaintsPolicy to Ignore.
		honorAffinity: c.NodeAffinityPolicy == nil || *c.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor,
		honorTaints:   c.NodeTaintsPolicy != nil && *c.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor,
	}
	if c.MinDomains != nil {
		out.minDomains = *c.MinDomains
	}
	return out
}

// selectorOf is the constraint's labelSelector ANDed with the incoming pod's
// values of matchLabelKeys; keys the pod lacks are ignored.
func selectorOf(pod *corev1.Pod, c corev1.TopologySpreadConstraint) (labels.Selector, error) {
	if c.LabelSelector == nil {
		// A nil selector matches nothing, so the constraint counts no pods.
		return labels.Nothing(), nil
	}
	sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
	if err != nil {
		return nil, err
	}
	for _, key := range c.MatchLabelKeys {
		v, ok := pod.Labels[key]
		if !ok {
			continue
		}
		req, err := labels.NewRequirement(key, selection.Equals, []string{v})
		if err != nil {
			return nil, err
		}
		sel = sel.Add(*req)
	}
	return sel, nil
}

// hasAllKeys reports whether node carries every constraint's topology key.
func hasAllKeys(node *corev1.Node, cs []constraint) bool {
	for _, c := range cs {
		if _, ok := node.Labels[c.topologyKey]; !ok {
			return false
		}
	}
	return true
}

// nodeFilter decides, per constraint, whether a node's domain takes part in
// the skew computation (TS-7, TS-8).
type nodeFilter struct {
	affinity    nodeaffinity.RequiredNodeAffinity
	tolerations []corev1.Toleration
}

func newNodeFilter(pod *corev1.Pod) nodeFilter {
	return nodeFilter{affinity: nodeaffinity.GetRequiredNodeAffinity(pod), tolerations: pod.Spec.Tolerations}
}

func (f nodeFilter) includes(c constraint, node *corev1.Node) bool {
	if c.honorAffinity {
		if ok, err := f.affinity.Match(node); err != nil || !ok {
			return false
		}
	}
	if c.honorTaints {
		if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints,
			f.tolerations, tainttoleration.SchedulingTaint, false); untolerated {
			return false
		}
	}
	return true
}

// countMatching counts the pods that count toward a constraint with
// selector sel for an incoming pod of namespace ns, as kube-scheduler counts
// them: pods of ns, not being deleted, whose labels sel matches. An empty
// selector (labelSelector {} with no matchLabelKeys value merged in)
// counts no pod at all, though the incoming pod still matches it itself; a
// nil labelSelector (labels.Nothing) matches nothing. Pods on tainted nodes
// count (TS-11).
func countMatching(pods []*framework.PodInfo, ns string, sel labels.Selector) int {
	anyNamespace := false
	// Planted bug of the bug zoo (scheduler-counts-other-namespaces):
	// matching pods of every namespace count, not only the incoming pod's
	// (breaks TS-6).
	failpoint.InjectContext(failpoints, "countsOtherNamespaces", func() { anyNamespace = true })
	if sel.Empty() {
		return 0
	}
	n := 0
	for _, pi := range pods {
		if podMatches(pi.Pod, ns, sel) || anyNamespace && podMatches(pi.Pod, pi.Pod.Namespace, sel) {
			n++
		}
	}
	return n
}

func podMatches(p *corev1.Pod, ns string, sel labels.Selector) bool {
	return p.Namespace == ns && p.DeletionTimestamp == nil && sel.Matches(labels.Set(p.Labels))
}

// dryRunMatches reports whether adding or removing pod p, as preemption's
// dry runs do, changes a count of a constraint with selector sel. It is
// kube-scheduler's rule for AddPod and RemovePod, which is looser than its
// rule for counting (countMatching): a pod being deleted, and any pod of
// the namespace under an empty selector, change the count too. So removing
// such a pod in a dry run lowers its domain's count below what PreFilter
// counted; podsafe does the same, so preemption picks what kube-scheduler
// picks.
func dryRunMatches(p *corev1.Pod, ns string, sel labels.Selector) bool {
	return p.Namespace == ns && sel.Matches(labels.Set(p.Labels))
}

// domainCounts is one cycle's view of a constraint's per-domain counts: a
// shared table plus the changes preemption's dry-runs made to it. Cloning
// copies only the changes, which touch one node's domain at a time.
type domainCounts struct {
	base  *domainTable
	delta []domainDelta
	// min is the smallest count over eligible domains with delta applied.
	min int
}

type domainDelta struct {
	id int32
	n  int
}

func newDomainCounts(t *domainTable) domainCounts { return domainCounts{base: t, min: t.min} }

func (d *domainCounts) clone() domainCounts {
	out := *d
	if len(d.delta) > 0 {
		out.delta = append([]domainDelta(nil), d.delta...)
	}
	return out
}

// count is the number of matching pods in domain (0 if not eligible).
func (d *domainCounts) count(domain string) int {
	id, n, ok := d.base.lookup(domain)
	if !ok {
		return 0
	}
	for _, dd := range d.delta {
		if dd.id == id {
			return n + dd.n
		}
	}
	return n
}

// add changes an eligible domain's count by n. The minimum is kept here,
// not computed in Filter, so filters running at once only read.
func (d *domainCounts) add(domain string, n int) {
	id, _, ok := d.base.lookup(domain)
	if !ok {
		return
	}
	found := false
	for i := range d.delta {
		if d.delta[i].id == id {
			d.delta[i].n += n
			found = true
			break
		}
	}
	if !found {
		d.delta = append(d.delta, domainDelta{id: id, n: n})
	}
	d.min = d.computeMin()
}

func (d *domainCounts) computeMin() int {
	b := d.base
	m, covered := math.MaxInt, 0
	for _, dd := range d.delta {
		v := int(b.counts[dd.id])
		m = min(m, v+dd.n)
		if v == b.min {
			covered++
		}
	}
	if covered < b.minCount {
		return min(m, b.min)
	}
	// Every domain at the table's minimum changed: scan the rest.
	for id, v := range b.counts {
		if v >= 0 && !d.changed(int32(id)) {
			m = min(m, int(v))
		}
	}
	return m
}

func (d *domainCounts) changed(id int32) bool {
	for _, dd := range d.delta {
		if dd.id == id {
			return true
		}
	}
	return false
}

// globalMin is the smallest count over eligible domains, or 0 when there are
// fewer eligible domains than minDomains (TS-2).
func (d *domainCounts) globalMin(minDomains int32) int {
	if d.base.domains < int(minDomains) || d.base.domains == 0 {
		return 0
	}
	return d.min
}
