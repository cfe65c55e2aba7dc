// Package st builds pods and nodes for scheduler tests:
// MakePod().Name("p").Label("foo", "bar").Node("n1").Obj().
package st

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PodWrapper builds a pod.
type PodWrapper struct{ corev1.Pod }

// MakePod starts a pod in namespace "default" with one container.
func MakePod() *PodWrapper {
	return &PodWrapper{corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
	}}
}

// Obj returns the pod.
func (p *PodWrapper) Obj() *corev1.Pod { return &p.Pod }

// Name sets the name and, unless set, a UID derived from it.
func (p *PodWrapper) Name(n string) *PodWrapper {
	p.Pod.Name = n
	if p.Pod.UID == "" {
		p.Pod.UID = types.UID(n)
	}
	return p
}

// UID sets the UID.
func (p *PodWrapper) UID(u string) *PodWrapper { p.Pod.UID = types.UID(u); return p }

// Namespace sets the namespace.
func (p *PodWrapper) Namespace(ns string) *PodWrapper { p.Pod.Namespace = ns; return p }

// Label adds a label.
func (p *PodWrapper) Label(k, v string) *PodWrapper {
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Labels[k] = v
	return p
}

// Node binds the pod to node.
func (p *PodWrapper) Node(n string) *PodWrapper { p.Spec.NodeName = n; return p }

// Priority sets spec.priority.
func (p *PodWrapper) Priority(v int32) *PodWrapper { p.Spec.Priority = &v; return p }

// PreemptionPolicy sets spec.preemptionPolicy.
func (p *PodWrapper) PreemptionPolicy(v corev1.PreemptionPolicy) *PodWrapper {
	p.Spec.PreemptionPolicy = &v
	return p
}

// Req sets the first container's CPU and memory requests ("" leaves one
// unset).
func (p *PodWrapper) Req(cpu, mem string) *PodWrapper {
	p.Spec.Containers[0].Resources.Requests = resources(cpu, mem)
	return p
}

// resources builds a resource list of CPU and memory ("" leaves one out).
func resources(cpu, mem string) corev1.ResourceList {
	r := corev1.ResourceList{}
	if cpu != "" {
		r[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		r[corev1.ResourceMemory] = resource.MustParse(mem)
	}
	return r
}

// Request adds a request of q of resource name to the first container.
func (p *PodWrapper) Request(name corev1.ResourceName, q string) *PodWrapper {
	if p.Spec.Containers[0].Resources.Requests == nil {
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{}
	}
	p.Spec.Containers[0].Resources.Requests[name] = resource.MustParse(q)
	return p
}

// InitContainer adds an init container that runs to completion before the
// containers, requesting cpu and mem.
func (p *PodWrapper) InitContainer(cpu, mem string) *PodWrapper {
	p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: fmt.Sprintf("init%d", len(p.Spec.InitContainers)),
		Image: "pause", Resources: corev1.ResourceRequirements{Requests: resources(cpu, mem)}})
	return p
}

// Sidecar adds a restartable init container (restartPolicy Always), which
// runs beside the containers, requesting cpu and mem.
func (p *PodWrapper) Sidecar(cpu, mem string) *PodWrapper {
	always := corev1.ContainerRestartPolicyAlways
	p.InitContainer(cpu, mem)
	p.Spec.InitContainers[len(p.Spec.InitContainers)-1].RestartPolicy = &always
	return p
}

// PodLevelReq sets pod-level requests (spec.resources), which replace the
// containers' CPU and memory.
func (p *PodWrapper) PodLevelReq(cpu, mem string) *PodWrapper {
	p.Spec.Resources = &corev1.ResourceRequirements{Requests: resources(cpu, mem)}
	return p
}

// Overhead sets spec.overhead, what running the pod costs beyond its
// containers.
func (p *PodWrapper) Overhead(cpu, mem string) *PodWrapper {
	p.Spec.Overhead = resources(cpu, mem)
	return p
}

// Condition adds a status condition of type typ with status True and
// reason.
func (p *PodWrapper) Condition(typ corev1.PodConditionType, reason string) *PodWrapper {
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: typ, Status: corev1.ConditionTrue, Reason: reason})
	return p
}

// PreemptedByScheduler marks the pod as the scheduler marks its victims
// before deleting them: condition DisruptionTarget=True, reason
// PreemptionByScheduler, and being deleted.
func (p *PodWrapper) PreemptedByScheduler() *PodWrapper {
	return p.Condition(corev1.DisruptionTarget, corev1.PodReasonPreemptionByScheduler).Terminating()
}

// NodeSelector adds a nodeSelector entry.
func (p *PodWrapper) NodeSelector(k, v string) *PodWrapper {
	if p.Spec.NodeSelector == nil {
		p.Spec.NodeSelector = map[string]string{}
	}
	p.Spec.NodeSelector[k] = v
	return p
}

// NodeAffinityNotIn requires node label key not to be any of values.
func (p *PodWrapper) NodeAffinityNotIn(key string, values ...string) *PodWrapper {
	return p.nodeAffinity(corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpNotIn, Values: values})
}

// NodeAffinityIn requires node label key to be one of values.
func (p *PodWrapper) NodeAffinityIn(key string, values ...string) *PodWrapper {
	return p.nodeAffinity(corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values})
}

func (p *PodWrapper) nodeAffinity(req corev1.NodeSelectorRequirement) *PodWrapper {
	p.affinity().NodeAffinity = &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{req}}},
		},
	}
	return p
}

// Toleration adds a toleration of key (Exists) for effect.
func (p *PodWrapper) Toleration(key string, effect corev1.TaintEffect) *PodWrapper {
	p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: effect})
	return p
}

// Terminating marks the pod as being deleted.
func (p *PodWrapper) Terminating() *PodWrapper {
	now := metav1.Now()
	p.DeletionTimestamp = &now
	return p
}

// StartTime sets status.startTime, when the kubelet started the pod.
func (p *PodWrapper) StartTime(t time.Time) *PodWrapper {
	st := metav1.NewTime(t)
	p.Status.StartTime = &st
	return p
}

// Created sets metadata.creationTimestamp.
func (p *PodWrapper) Created(t time.Time) *PodWrapper {
	p.CreationTimestamp = metav1.NewTime(t)
	return p
}

// NominatedNode sets status.nominatedNodeName.
func (p *PodWrapper) NominatedNode(n string) *PodWrapper { p.Status.NominatedNodeName = n; return p }

// OwnedBy makes kind/name the pod's controller, with the apiVersion the
// kind is served at (v1 for ReplicationController, apps/v1 otherwise).
func (p *PodWrapper) OwnedBy(kind, name string) *PodWrapper {
	yes := true
	apiVersion := "apps/v1"
	if kind == "ReplicationController" {
		apiVersion = "v1"
	}
	p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{Kind: kind, Name: name, Controller: &yes, APIVersion: apiVersion})
	return p
}

// TermOpt changes one inter-pod affinity term.
type TermOpt func(*corev1.PodAffinityTerm)

// TermNamespaces sets the namespaces a term looks in.
func TermNamespaces(ns ...string) TermOpt {
	return func(t *corev1.PodAffinityTerm) { t.Namespaces = ns }
}

// TermNamespaceSelector makes a term look in the namespaces carrying the
// labels in match ({} for every namespace).
func TermNamespaceSelector(match map[string]string) TermOpt {
	return func(t *corev1.PodAffinityTerm) { t.NamespaceSelector = &metav1.LabelSelector{MatchLabels: match} }
}

func term(key string, match map[string]string, opts []TermOpt) corev1.PodAffinityTerm {
	t := corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: match}}
	for _, o := range opts {
		o(&t)
	}
	return t
}

func (p *PodWrapper) affinity() *corev1.Affinity {
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &corev1.Affinity{}
	}
	return p.Spec.Affinity
}

// PodAffinity adds a required podAffinity term: the pod must run in a
// topologyKey domain holding a pod with the labels in match.
func (p *PodWrapper) PodAffinity(key string, match map[string]string, opts ...TermOpt) *PodWrapper {
	a := p.affinity()
	if a.PodAffinity == nil {
		a.PodAffinity = &corev1.PodAffinity{}
	}
	a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, term(key, match, opts))
	return p
}

// PodAntiAffinity adds a required podAntiAffinity term: the pod must not
// run in a topologyKey domain holding a pod with the labels in match.
func (p *PodWrapper) PodAntiAffinity(key string, match map[string]string, opts ...TermOpt) *PodWrapper {
	a := p.affinity()
	if a.PodAntiAffinity == nil {
		a.PodAntiAffinity = &corev1.PodAntiAffinity{}
	}
	a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, term(key, match, opts))
	return p
}

// PreferredPodAffinity adds a preferred podAffinity term of weight.
func (p *PodWrapper) PreferredPodAffinity(weight int32, key string, match map[string]string, opts ...TermOpt) *PodWrapper {
	a := p.affinity()
	if a.PodAffinity == nil {
		a.PodAffinity = &corev1.PodAffinity{}
	}
	a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
		corev1.WeightedPodAffinityTerm{Weight: weight, PodAffinityTerm: term(key, match, opts)})
	return p
}

// PreferredPodAntiAffinity adds a preferred podAntiAffinity term of weight.
func (p *PodWrapper) PreferredPodAntiAffinity(weight int32, key string, match map[string]string, opts ...TermOpt) *PodWrapper {
	a := p.affinity()
	if a.PodAntiAffinity == nil {
		a.PodAntiAffinity = &corev1.PodAntiAffinity{}
	}
	a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
		corev1.WeightedPodAffinityTerm{Weight: weight, PodAffinityTerm: term(key, match, opts)})
	return p
}

// SpreadOpt changes one spread constraint.
type SpreadOpt func(*corev1.TopologySpreadConstraint)

// MinDomains sets minDomains.
func MinDomains(n int32) SpreadOpt {
	return func(c *corev1.TopologySpreadConstraint) { c.MinDomains = &n }
}

// MatchLabelKeys sets matchLabelKeys.
func MatchLabelKeys(keys ...string) SpreadOpt {
	return func(c *corev1.TopologySpreadConstraint) { c.MatchLabelKeys = keys }
}

// NodeAffinityPolicy sets nodeAffinityPolicy.
func NodeAffinityPolicy(p corev1.NodeInclusionPolicy) SpreadOpt {
	return func(c *corev1.TopologySpreadConstraint) { c.NodeAffinityPolicy = &p }
}

// NodeTaintsPolicy sets nodeTaintsPolicy.
func NodeTaintsPolicy(p corev1.NodeInclusionPolicy) SpreadOpt {
	return func(c *corev1.TopologySpreadConstraint) { c.NodeTaintsPolicy = &p }
}

// Spread adds a topology spread constraint selecting pods with the labels
// in match.
func (p *PodWrapper) Spread(maxSkew int32, key string, when corev1.UnsatisfiableConstraintAction, match map[string]string, opts ...SpreadOpt) *PodWrapper {
	c := corev1.TopologySpreadConstraint{MaxSkew: maxSkew, TopologyKey: key, WhenUnsatisfiable: when,
		LabelSelector: &metav1.LabelSelector{MatchLabels: match}}
	for _, o := range opts {
		o(&c)
	}
	p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, c)
	return p
}

// NodeWrapper builds a node.
type NodeWrapper struct{ corev1.Node }

// MakeNode starts a node with 8 CPUs, 32 GiB and 110 pods allocatable.
func MakeNode() *NodeWrapper {
	return (&NodeWrapper{}).Capacity("8", "32Gi", "110")
}

// Obj returns the node.
func (n *NodeWrapper) Obj() *corev1.Node { return &n.Node }

// Name sets the name and the hostname label.
func (n *NodeWrapper) Name(name string) *NodeWrapper {
	n.Node.Name = name
	return n.Label("kubernetes.io/hostname", name)
}

// Label adds a label.
func (n *NodeWrapper) Label(k, v string) *NodeWrapper {
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels[k] = v
	return n
}

// Capacity sets capacity and allocatable.
func (n *NodeWrapper) Capacity(cpu, mem, pods string) *NodeWrapper {
	r := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse(mem),
		corev1.ResourcePods:   resource.MustParse(pods),
	}
	n.Status.Capacity, n.Status.Allocatable = r, r
	return n
}

// Allocatable sets the allocatable (and capacity) of resource name to q.
func (n *NodeWrapper) Allocatable(name corev1.ResourceName, q string) *NodeWrapper {
	n.Status.Capacity = n.Status.Capacity.DeepCopy()
	n.Status.Capacity[name] = resource.MustParse(q)
	n.Status.Allocatable = n.Status.Capacity.DeepCopy()
	return n
}

// Taint adds a taint.
func (n *NodeWrapper) Taint(key, value string, effect corev1.TaintEffect) *NodeWrapper {
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	return n
}

// Unschedulable cordons the node.
func (n *NodeWrapper) Unschedulable() *NodeWrapper { n.Spec.Unschedulable = true; return n }
