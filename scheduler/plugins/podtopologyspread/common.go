package podtopologyspread

import (
	"math"

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

// countMatching counts the pods of ni in namespace ns that sel matches,
// ignoring pods already being deleted. Pods on tainted nodes count (TS-11).
func countMatching(pods []*framework.PodInfo, ns string, sel labels.Selector) int {
	n := 0
	for _, pi := range pods {
		if podMatches(pi.Pod, ns, sel) {
			n++
		}
	}
	return n
}

func podMatches(p *corev1.Pod, ns string, sel labels.Selector) bool {
	return p.Namespace == ns && p.DeletionTimestamp == nil && sel.Matches(labels.Set(p.Labels))
}

// domainCounts holds the matching-pod count of every eligible domain of one
// constraint and keeps the global minimum up to date.
type domainCounts struct {
	counts   map[string]int
	min      int
	minCount int // how many domains hold min
}

func newDomainCounts() *domainCounts { return &domainCounts{counts: map[string]int{}} }

func (d *domainCounts) clone() *domainCounts {
	out := &domainCounts{counts: make(map[string]int, len(d.counts)), min: d.min, minCount: d.minCount}
	for k, v := range d.counts {
		out.counts[k] = v
	}
	return out
}

func (d *domainCounts) recomputeMin() {
	d.min, d.minCount = math.MaxInt, 0
	for _, v := range d.counts {
		switch {
		case v < d.min:
			d.min, d.minCount = v, 1
		case v == d.min:
			d.minCount++
		}
	}
}

// add changes a known domain's count by delta.
func (d *domainCounts) add(domain string, delta int) {
	old, ok := d.counts[domain]
	if !ok {
		return
	}
	now := old + delta
	d.counts[domain] = now
	switch {
	case now < d.min:
		d.min, d.minCount = now, 1
	case now == d.min:
		d.minCount++
		if old == d.min {
			d.minCount--
		}
	case old == d.min:
		d.minCount--
		if d.minCount == 0 {
			d.recomputeMin()
		}
	}
}

// globalMin is the smallest count over eligible domains, or 0 when there are
// fewer eligible domains than minDomains (TS-2).
func (d *domainCounts) globalMin(minDomains int32) int {
	if len(d.counts) < int(minDomains) || len(d.counts) == 0 {
		return 0
	}
	return d.min
}
