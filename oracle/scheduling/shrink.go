package scheduling

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// maxShrinkSteps bounds the failing checks one shrink may spend.
const maxShrinkSteps = 4000

// Shrink returns a smaller problem that still fails: it drops nodes (with
// their pods), pods, budgets, constraints, labels, taints, tolerations,
// requests and optional fields one at a time, keeping each removal after
// which fails still reports true, until none is left to make. fails must
// be deterministic.
func Shrink(p *Problem, fails func(*Problem) bool) *Problem {
	steps := 0
	for progress := true; progress && steps < maxShrinkSteps; {
		progress = false
		for _, cand := range reductions(p) {
			steps++
			if fails(cand) {
				p, progress = cand, true
				break
			}
			if steps >= maxShrinkSteps {
				break
			}
		}
	}
	return p
}

// reductions lists every problem one step smaller than p, the biggest
// steps first.
func reductions(p *Problem) []*Problem {
	var out []*Problem
	edit := func(f func(q *Problem)) {
		q := p.Clone()
		f(q)
		out = append(out, q)
	}
	for i := range p.Nodes {
		if len(p.Nodes) == 1 {
			break
		}
		edit(func(q *Problem) {
			name := q.Nodes[i].Name
			q.Nodes = append(q.Nodes[:i], q.Nodes[i+1:]...)
			var pods []*corev1.Pod
			for _, pod := range q.Pods {
				if pod.Spec.NodeName != name {
					pods = append(pods, pod)
				}
			}
			q.Pods = pods
		})
	}
	for i := range p.Pods {
		edit(func(q *Problem) { q.Pods = append(q.Pods[:i], q.Pods[i+1:]...) })
	}
	for i := range p.PDBs {
		edit(func(q *Problem) { q.PDBs = append(q.PDBs[:i], q.PDBs[i+1:]...) })
	}
	for i := range p.Services {
		edit(func(q *Problem) { q.Services = append(q.Services[:i], q.Services[i+1:]...) })
	}
	for i := range p.ReplicaSets {
		edit(func(q *Problem) { q.ReplicaSets = append(q.ReplicaSets[:i], q.ReplicaSets[i+1:]...) })
	}
	for i := range p.StatefulSets {
		edit(func(q *Problem) { q.StatefulSets = append(q.StatefulSets[:i], q.StatefulSets[i+1:]...) })
	}
	for i := range p.ReplicationControllers {
		edit(func(q *Problem) {
			q.ReplicationControllers = append(q.ReplicationControllers[:i], q.ReplicationControllers[i+1:]...)
		})
	}
	if len(p.Pod.OwnerReferences) > 0 {
		edit(func(q *Problem) { q.Pod.OwnerReferences = nil })
	}
	if p.Pod.Status.NominatedNodeName != "" {
		edit(func(q *Problem) { q.Pod.Status.NominatedNodeName = "" })
	}
	for i := range p.Pod.Spec.TopologySpreadConstraints {
		edit(func(q *Problem) {
			cs := q.Pod.Spec.TopologySpreadConstraints
			q.Pod.Spec.TopologySpreadConstraints = append(cs[:i], cs[i+1:]...)
		})
	}
	for i := range p.Pod.Spec.TopologySpreadConstraints {
		c := &p.Pod.Spec.TopologySpreadConstraints[i]
		at := func(q *Problem) *corev1.TopologySpreadConstraint { return &q.Pod.Spec.TopologySpreadConstraints[i] }
		if c.MinDomains != nil {
			edit(func(q *Problem) { at(q).MinDomains = nil })
		}
		if c.NodeAffinityPolicy != nil {
			edit(func(q *Problem) { at(q).NodeAffinityPolicy = nil })
		}
		if c.NodeTaintsPolicy != nil {
			edit(func(q *Problem) { at(q).NodeTaintsPolicy = nil })
		}
		for j := range c.MatchLabelKeys {
			edit(func(q *Problem) {
				at(q).MatchLabelKeys = append(at(q).MatchLabelKeys[:j], at(q).MatchLabelKeys[j+1:]...)
			})
		}
		if c.MaxSkew > 1 {
			edit(func(q *Problem) { at(q).MaxSkew = 1 })
		}
	}
	for i, n := range p.Nodes {
		for k := range n.Labels {
			edit(func(q *Problem) { delete(q.Nodes[i].Labels, k) })
		}
		for j := range n.Spec.Taints {
			edit(func(q *Problem) {
				q.Nodes[i].Spec.Taints = append(q.Nodes[i].Spec.Taints[:j], q.Nodes[i].Spec.Taints[j+1:]...)
			})
		}
		for name := range n.Status.Allocatable {
			if name != corev1.ResourceCPU && name != corev1.ResourceMemory && name != corev1.ResourcePods {
				edit(func(q *Problem) {
					delete(q.Nodes[i].Status.Allocatable, name)
					delete(q.Nodes[i].Status.Capacity, name)
				})
			}
		}
		if len(n.Status.Allocatable) > 0 && !isDefaultAllocatable(n) {
			edit(func(q *Problem) { setDefaultAllocatable(q.Nodes[i]) })
		}
	}
	for i, pod := range p.Pods {
		at := func(q *Problem) *corev1.Pod { return q.Pods[i] }
		for k := range pod.Labels {
			edit(func(q *Problem) { delete(at(q).Labels, k) })
		}
		if len(pod.Status.Conditions) > 0 {
			edit(func(q *Problem) { at(q).Status.Conditions = nil })
		}
		if pod.DeletionTimestamp != nil {
			edit(func(q *Problem) { at(q).DeletionTimestamp, at(q).DeletionGracePeriodSeconds = nil, nil })
		}
		if pod.Spec.Priority != nil && *pod.Spec.Priority != 0 {
			edit(func(q *Problem) { at(q).Spec.Priority = nil })
		}
		if len(pod.Spec.Containers[0].Resources.Requests) > 0 {
			edit(func(q *Problem) { at(q).Spec.Containers[0].Resources.Requests = nil })
		}
	}
	for i, pdb := range p.PDBs {
		if len(pdb.Status.DisruptedPods) > 0 {
			edit(func(q *Problem) { q.PDBs[i].Status.DisruptedPods = nil })
		}
	}
	in := p.Pod
	for k := range in.Labels {
		edit(func(q *Problem) { delete(q.Pod.Labels, k) })
	}
	for j := range in.Spec.Tolerations {
		edit(func(q *Problem) {
			q.Pod.Spec.Tolerations = append(q.Pod.Spec.Tolerations[:j], q.Pod.Spec.Tolerations[j+1:]...)
		})
	}
	if in.Spec.NodeSelector != nil {
		edit(func(q *Problem) { q.Pod.Spec.NodeSelector = nil })
	}
	if in.Spec.Affinity != nil {
		edit(func(q *Problem) { q.Pod.Spec.Affinity = nil })
	}
	if in.Spec.PreemptionPolicy != nil {
		edit(func(q *Problem) { q.Pod.Spec.PreemptionPolicy = nil })
	}
	if len(in.Spec.Containers[0].Resources.Requests) > 0 {
		edit(func(q *Problem) { q.Pod.Spec.Containers[0].Resources.Requests = nil })
	}
	// Last: rename what is left, so a reproducer reads n0, n1, … and p0, p1, ….
	if !numbered(p) {
		edit(renumber)
	}
	return out
}

var (
	defaultCPU  = resource.MustParse("4")
	defaultMem  = resource.MustParse("4Gi")
	defaultPods = resource.MustParse("110")
)

func isDefaultAllocatable(n *corev1.Node) bool {
	a := n.Status.Allocatable
	return len(a) == 3 && a.Cpu().Cmp(defaultCPU) == 0 && a.Memory().Cmp(defaultMem) == 0 && a.Pods().Cmp(defaultPods) == 0
}

// setDefaultAllocatable gives a node roomy allocatable, so a reproducer
// that does not depend on resources does not show odd amounts.
func setDefaultAllocatable(n *corev1.Node) {
	n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: defaultCPU, corev1.ResourceMemory: defaultMem, corev1.ResourcePods: defaultPods}
	n.Status.Capacity = n.Status.Allocatable.DeepCopy()
}

// numbered reports whether renumber would change nothing.
func numbered(p *Problem) bool {
	for i, n := range p.Nodes {
		if n.Name != "n"+strconv.Itoa(i) {
			return false
		}
	}
	for i, pod := range p.Pods {
		if pod.Name != "p"+strconv.Itoa(i) {
			return false
		}
	}
	return true
}

// renumber names nodes n0, n1, … and pods p0, p1, … in order, keeping
// bindings, hostname labels and budgets' disrupted pods consistent.
func renumber(q *Problem) {
	names := map[string]string{}
	for i, n := range q.Nodes {
		nn := "n" + strconv.Itoa(i)
		names[n.Name] = nn
		n.Name, n.UID = nn, types.UID("node-"+nn)
		if _, ok := n.Labels[LabelHostname]; ok {
			n.Labels[LabelHostname] = nn
		}
	}
	if nn, ok := names[q.Pod.Status.NominatedNodeName]; ok {
		q.Pod.Status.NominatedNodeName = nn
	}
	podNames := map[string]string{}
	for i, pod := range q.Pods {
		pn := "p" + strconv.Itoa(i)
		podNames[pod.Name] = pn
		pod.Name = pn
		pod.UID = types.UID(pod.Namespace + "-" + pod.Name)
		pod.Spec.NodeName = names[pod.Spec.NodeName]
	}
	for _, pdb := range q.PDBs {
		if len(pdb.Status.DisruptedPods) == 0 {
			continue
		}
		renamed := map[string]metav1.Time{}
		for k, v := range pdb.Status.DisruptedPods {
			if nk, ok := podNames[k]; ok {
				k = nk
			}
			renamed[k] = v
		}
		pdb.Status.DisruptedPods = renamed
	}
}
