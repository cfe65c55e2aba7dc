package scheduling

import (
	"fmt"
	"math/rand/v2"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Namespaces problems use: most pods share the incoming pod's namespace,
// some live next door so that namespace scoping is exercised.
const (
	NamespaceDefault = "default"
	NamespaceOther   = "other"
)

// Options widen what Generate draws.
type Options struct {
	// BoundPodLevelRequests gives bound pods restartable (sidecar) init
	// containers and pod-level resources too, not only the incoming pod
	// (the oracle's test turns it on by default; NodeInfo accounts bound
	// pods with component-helpers' PodRequests, as kube-scheduler does).
	BoundPodLevelRequests bool
}

// Generate builds the problem of one seed. The same seed and options
// always give the same problem. Problems are small (at most 7 nodes and 14
// pods), labels and values come from small sets so that selectors,
// domains and budgets collide often, and about a third of the problems
// are tight clusters with a high-priority incoming pod, so preemption gets
// exercised.
func Generate(seed uint64, opts Options) *Problem {
	g := &generator{r: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)), opts: opts}
	return g.problem()
}

type generator struct {
	r    *rand.Rand
	opts Options
}

func (g *generator) chance(p float64) bool { return g.r.Float64() < p }

func pick[T any](g *generator, xs ...T) T { return xs[g.r.IntN(len(xs))] }

func (g *generator) problem() *Problem {
	tight := g.chance(0.4)
	p := &Problem{}
	nNodes := 1 + g.r.IntN(7)
	if tight {
		nNodes = 1 + g.r.IntN(5)
	}
	for i := range nNodes {
		p.Nodes = append(p.Nodes, g.node(i, tight))
	}
	nPods := g.r.IntN(9)
	if tight {
		// Enough pods to fill most nodes.
		nPods = min(2*nNodes+g.r.IntN(2*nNodes+1), 14)
	}
	// Distinct start and creation times, so that the order of victims by
	// importance is total (the two orders differ on purpose).
	starts, created := g.r.Perm(nPods+1), g.r.Perm(nPods+1)
	for i := range nPods {
		pod := g.existingPod(i, tight)
		pod.Spec.NodeName = p.Nodes[g.r.IntN(len(p.Nodes))].Name
		pod.CreationTimestamp = At(created[i] * 10)
		start := At(starts[i]*10 + 5)
		pod.Status.StartTime = &start
		p.Pods = append(p.Pods, pod)
	}
	for i := range g.r.IntN(3) {
		p.PDBs = append(p.PDBs, g.pdb(i, p.Pods))
	}
	p.Pod = g.incoming(tight, p.Nodes)
	p.Pod.CreationTimestamp = At(created[nPods] * 10)
	if g.chance(0.3) {
		g.workloads(p)
	}
	return p
}

// workloads makes the incoming pod part of a workload, usually without
// constraints of its own, so the cluster's default constraints apply with
// a selector taken from its owner and the Services selecting it (TS-9).
func (g *generator) workloads(p *Problem) {
	pod := p.Pod
	if g.chance(0.7) {
		pod.Spec.TopologySpreadConstraints = nil
	}
	ns := pod.Namespace
	selector := func() *metav1.LabelSelector {
		switch g.r.IntN(5) {
		case 0:
			return &metav1.LabelSelector{}
		case 1:
			return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"web", "db"}}}}
		default:
			if v, ok := pod.Labels["app"]; ok {
				return &metav1.LabelSelector{MatchLabels: map[string]string{"app": v}}
			}
			return &metav1.LabelSelector{MatchLabels: map[string]string{"tier": pick(g, "fe", "be")}}
		}
	}
	exists := g.chance(0.85)
	meta := func(name, kind string) metav1.ObjectMeta {
		uid := types.UID("uid-" + kind + "-" + name)
		if g.chance(0.1) {
			uid = "uid-a-predecessor"
		}
		return metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid}
	}
	switch g.r.IntN(8) {
	case 0, 1, 2, 3:
		Owner(pod, pick(g, "apps/v1", "apps/v1", "apps/v1", "apps/v1beta2"), "ReplicaSet", "rs")
		if exists {
			p.ReplicaSets = append(p.ReplicaSets, &appsv1.ReplicaSet{ObjectMeta: meta("rs", "ReplicaSet"),
				Spec: appsv1.ReplicaSetSpec{Selector: selector()}})
		}
	case 4, 5:
		Owner(pod, "apps/v1", "StatefulSet", "ss")
		if exists {
			p.StatefulSets = append(p.StatefulSets, &appsv1.StatefulSet{ObjectMeta: meta("ss", "StatefulSet"),
				Spec: appsv1.StatefulSetSpec{Selector: selector()}})
		}
	case 6:
		Owner(pod, "v1", "ReplicationController", "rc")
		if exists {
			rc := &corev1.ReplicationController{ObjectMeta: meta("rc", "ReplicationController")}
			if sel := selector(); sel.MatchLabels != nil {
				rc.Spec.Selector = sel.MatchLabels
			}
			p.ReplicationControllers = append(p.ReplicationControllers, rc)
		}
	default:
		Owner(pod, "batch/v1", "Job", "job")
	}
	for i := range g.r.IntN(3) {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("svc%d", i)}}
		if g.chance(0.15) {
			svc.Namespace = NamespaceOther
			if ns == NamespaceOther {
				svc.Namespace = NamespaceDefault
			}
		}
		switch g.r.IntN(5) {
		case 0:
			svc.Spec.Selector = map[string]string{}
		case 1:
		case 2:
			svc.Spec.Selector = map[string]string{"tier": pick(g, "fe", "be")}
		default:
			svc.Spec.Selector = map[string]string{"app": pick(g, "web", "db")}
		}
		p.Services = append(p.Services, svc)
	}
}

func (g *generator) node(i int, tight bool) *corev1.Node {
	cpu := pick(g, int64(1000), 2000, 4000)
	mem := pick(g, int64(1024), 2048, 4096)
	pods := pick(g, int64(2), 3, 5, 10, 110)
	if tight {
		cpu, mem, pods = pick(g, int64(1000), 1000, 2000), pick(g, int64(1024), 2048), pick(g, int64(1), 2, 3, 4, 110)
	}
	switch {
	case g.chance(0.03):
		cpu = -1
	case g.chance(0.03):
		mem = -1
	case g.chance(0.02):
		pods = -1
	}
	n := NewNode(fmt.Sprintf("n%d", i), cpu, mem, pods)
	if g.chance(0.6) {
		setAllocatable(n, corev1.ResourceEphemeralStorage, resource.MustParse(pick(g, "1Gi", "10Gi")))
	}
	if g.chance(0.3) {
		setAllocatable(n, ResourceGPU, *resource.NewQuantity(int64(g.r.IntN(3)), resource.DecimalSI))
	}
	if g.chance(0.08) {
		delete(n.Labels, LabelHostname)
	}
	switch {
	case g.chance(0.03):
		// An empty value is a value: a domain of its own.
		n.Labels[LabelZone] = ""
	case !g.chance(0.15):
		n.Labels[LabelZone] = pick(g, "za", "zb", "zc")
	}
	if !g.chance(0.25) {
		n.Labels[LabelRegion] = pick(g, "r1", "r2")
	}
	if g.chance(0.5) {
		n.Labels[LabelRack] = pick(g, "k0", "k1", "k2")
	}
	if g.chance(0.4) {
		n.Labels[LabelDisk] = pick(g, "ssd", "hdd")
	}
	for range g.r.IntN(3) {
		if g.chance(0.6) {
			break
		}
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{
			Key:    pick(g, "dedicated", "gpu", "maint"),
			Value:  pick(g, "", "a"),
			Effect: pick(g, corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute),
		})
	}
	return n
}

// podLabels draws labels from a small vocabulary, sometimes none.
func (g *generator) podLabels() map[string]string {
	l := map[string]string{}
	if g.chance(0.7) {
		l["app"] = pick(g, "web", "db")
	}
	if g.chance(0.4) {
		l["tier"] = pick(g, "fe", "be")
	}
	if g.chance(0.3) {
		l["ver"] = pick(g, "v1", "v2")
	}
	if len(l) == 0 {
		return nil
	}
	return l
}

func (g *generator) priority() *int32 {
	if g.chance(0.1) {
		return nil
	}
	v := pick(g, int32(-5), 0, 10, 10, 100, 1000)
	return &v
}

func (g *generator) existingPod(i int, tight bool) *corev1.Pod {
	ns := NamespaceDefault
	if g.chance(0.25) {
		ns = NamespaceOther
	}
	cpu, mem := pick(g, int64(0), 100, 250, 500, 1000), pick(g, int64(0), 128, 256, 512, 1024)
	if tight {
		cpu, mem = pick(g, int64(0), 250, 500, 500, 1000), pick(g, int64(0), 256, 512, 512, 1024)
	}
	pod := NewPod(ns, fmt.Sprintf("p%d", i), cpu, mem)
	pod.Labels = g.podLabels()
	pod.Spec.Priority = g.priority()
	g.decorate(pod, g.opts.BoundPodLevelRequests)
	if g.chance(0.15) {
		t := At(1000)
		pod.DeletionTimestamp = &t
		grace := int64(30)
		pod.DeletionGracePeriodSeconds = &grace
		if g.chance(0.5) {
			// What the scheduler marks its victims with.
			pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
				Reason: corev1.PodReasonPreemptionByScheduler}}
		}
	}
	return pod
}

// ResourceGPU is the extended resource problems use.
const ResourceGPU corev1.ResourceName = "example.com/gpu"

func setAllocatable(n *corev1.Node, name corev1.ResourceName, q resource.Quantity) {
	n.Status.Allocatable[name] = q
	n.Status.Capacity[name] = q
}

// decorate gives a pod, now and then, requests beyond its one container's
// CPU and memory: ephemeral storage, an extended resource, an init
// container, overhead, and with podLevel a restartable sidecar init
// container or pod-level resources. The draws are the same either way, so
// options change no other part of a problem.
func (g *generator) decorate(pod *corev1.Pod, podLevel bool) {
	req := pod.Spec.Containers[0].Resources.Requests
	add := func(name corev1.ResourceName, q resource.Quantity) {
		if req == nil {
			req = corev1.ResourceList{}
			pod.Spec.Containers[0].Resources.Requests = req
		}
		req[name] = q
	}
	if g.chance(0.06) {
		add(corev1.ResourceEphemeralStorage, resource.MustParse(pick(g, "512Mi", "2Gi")))
	}
	if g.chance(0.04) {
		add(ResourceGPU, *resource.NewQuantity(1, resource.DecimalSI))
	}
	if g.chance(0.08) {
		init := corev1.Container{Name: "init", Image: "pause", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewMilliQuantity(pick(g, int64(100), 500, 1500), resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(pick(g, int64(64), 512, 1536)<<20, resource.BinarySI),
		}}}
		if g.chance(0.5) && podLevel {
			always := corev1.ContainerRestartPolicyAlways
			init.RestartPolicy = &always
		}
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, init)
	}
	if g.chance(0.04) {
		pod.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	}
	if len(pod.Spec.InitContainers) == 0 && g.chance(0.04) && podLevel {
		// Pod-level requests, at least what the container asks.
		cpu, mem := req.Cpu().DeepCopy(), req.Memory().DeepCopy()
		cpu.Add(resource.MustParse("200m"))
		mem.Add(resource.MustParse("128Mi"))
		pod.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem}}
	}
}

func (g *generator) pdb(i int, pods []*corev1.Pod) *policyv1.PodDisruptionBudget {
	var sel *metav1.LabelSelector
	switch g.r.IntN(6) {
	case 0:
		sel = nil
	case 1:
		sel = &metav1.LabelSelector{}
	case 2:
		// Matches pods without labels too.
		sel = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: pick(g, "tier", "app"), Operator: metav1.LabelSelectorOpDoesNotExist}}}
	default:
		sel = &metav1.LabelSelector{MatchLabels: map[string]string{"app": pick(g, "web", "db")}}
	}
	ns := NamespaceDefault
	if g.chance(0.2) {
		ns = NamespaceOther
	}
	pdb := NewPDB(ns, fmt.Sprintf("b%d", i), sel, pick(g, int32(0), 0, 1, 2))
	if len(pods) > 0 && g.chance(0.2) {
		pdb.Status.DisruptedPods = map[string]metav1.Time{pods[g.r.IntN(len(pods))].Name: At(900)}
	}
	return pdb
}

func (g *generator) incoming(tight bool, nodes []*corev1.Node) *corev1.Pod {
	ns := NamespaceDefault
	if g.chance(0.15) {
		ns = NamespaceOther
	}
	cpu, mem := pick(g, int64(0), 100, 250, 500, 1000), pick(g, int64(0), 128, 256, 512)
	if tight {
		cpu, mem = pick(g, int64(250), 500, 1000, 1500), pick(g, int64(0), 256, 512, 1024)
		if g.chance(0.05) {
			cpu, mem = 3000, 3000 // more than any node has
		}
	}
	pod := NewPod(ns, "incoming", cpu, mem)
	pod.Labels = g.podLabels()
	pod.Spec.Priority = g.priority()
	g.decorate(pod, true)
	if tight && g.chance(0.15) {
		pod.Status.NominatedNodeName = nodes[g.r.IntN(len(nodes))].Name
	}
	if tight && g.chance(0.8) {
		v := pick(g, int32(100), 1000, 5000)
		pod.Spec.Priority = &v
	}
	if g.chance(0.15) {
		never := corev1.PreemptNever
		pod.Spec.PreemptionPolicy = &never
	} else if g.chance(0.3) {
		lower := corev1.PreemptLowerPriority
		pod.Spec.PreemptionPolicy = &lower
	}
	if g.chance(0.12) {
		pod.Spec.NodeSelector = map[string]string{pick(g, LabelZone, LabelDisk): pick(g, "za", "zb", "ssd")}
	}
	if g.chance(0.15) {
		pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
				{MatchExpressions: []corev1.NodeSelectorRequirement{g.nodeRequirement()}}}}}}
	}
	for range g.r.IntN(3) {
		if g.chance(0.4) {
			break
		}
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, g.toleration())
	}
	n := 0
	switch x := g.r.Float64(); {
	case x < 0.2:
	case x < 0.6:
		n = 1
	case x < 0.9:
		n = 2
	default:
		n = 3
	}
	for range n {
		pod.Spec.TopologySpreadConstraints = append(pod.Spec.TopologySpreadConstraints, g.constraint())
	}
	return pod
}

func (g *generator) nodeRequirement() corev1.NodeSelectorRequirement {
	switch g.r.IntN(4) {
	case 0:
		return corev1.NodeSelectorRequirement{Key: LabelZone, Operator: corev1.NodeSelectorOpIn, Values: []string{pick(g, "za", "zb"), "zc"}}
	case 1:
		return corev1.NodeSelectorRequirement{Key: LabelZone, Operator: corev1.NodeSelectorOpNotIn, Values: []string{pick(g, "za", "zc")}}
	case 2:
		return corev1.NodeSelectorRequirement{Key: LabelRack, Operator: corev1.NodeSelectorOpExists}
	default:
		return corev1.NodeSelectorRequirement{Key: LabelDisk, Operator: corev1.NodeSelectorOpDoesNotExist}
	}
}

func (g *generator) toleration() corev1.Toleration {
	if g.chance(0.1) {
		return corev1.Toleration{Operator: corev1.TolerationOpExists}
	}
	t := corev1.Toleration{Key: pick(g, "dedicated", "gpu", "maint")}
	if g.chance(0.5) {
		t.Operator = corev1.TolerationOpExists
	} else {
		t.Operator, t.Value = corev1.TolerationOpEqual, pick(g, "", "a")
	}
	if g.chance(0.6) {
		t.Effect = pick(g, corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute)
	}
	return t
}

func (g *generator) constraint() corev1.TopologySpreadConstraint {
	c := corev1.TopologySpreadConstraint{
		MaxSkew:           int32(1 + g.r.IntN(3)),
		TopologyKey:       pick(g, LabelHostname, LabelZone, LabelZone, LabelRegion, LabelRack),
		WhenUnsatisfiable: pick(g, corev1.DoNotSchedule, corev1.ScheduleAnyway),
	}
	if c.WhenUnsatisfiable == corev1.DoNotSchedule && g.chance(0.3) {
		m := int32(1 + g.r.IntN(4))
		c.MinDomains = &m
	}
	selKeys := map[string]bool{}
	switch g.r.IntN(10) {
	case 0:
		c.LabelSelector = nil
	case 1:
		c.LabelSelector = &metav1.LabelSelector{}
	case 2, 3:
		op := pick(g, metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn, metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist)
		req := metav1.LabelSelectorRequirement{Key: "app", Operator: op}
		if op == metav1.LabelSelectorOpIn || op == metav1.LabelSelectorOpNotIn {
			req.Values = []string{pick(g, "web", "db")}
		}
		c.LabelSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{req}}
		selKeys["app"] = true
	default:
		c.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": pick(g, "web", "db")}}
		selKeys["app"] = true
	}
	// matchLabelKeys need a labelSelector and may not repeat its keys.
	if c.LabelSelector != nil && g.chance(0.3) {
		for _, k := range []string{"tier", "ver", "app"} {
			if !selKeys[k] && g.chance(0.5) {
				c.MatchLabelKeys = append(c.MatchLabelKeys, k)
			}
		}
	}
	if g.chance(0.4) {
		v := pick(g, corev1.NodeInclusionPolicyHonor, corev1.NodeInclusionPolicyIgnore)
		c.NodeAffinityPolicy = &v
	}
	if g.chance(0.4) {
		v := pick(g, corev1.NodeInclusionPolicyHonor, corev1.NodeInclusionPolicyIgnore)
		c.NodeTaintsPolicy = &v
	}
	return c
}
