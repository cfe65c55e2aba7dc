// Package scheduling is a differential oracle for podsafe's scheduler
// plugins: it generates randomized scheduling problems, runs each through
// podsafe's plugins (scheduler/framework and scheduler/plugins/...) and
// through the upstream kube-scheduler plugins of the pinned Kubernetes
// release (k8s.io/kubernetes v1.37.2), and reports every verdict on which
// they disagree, shrunk to a minimal reproducer printed as a Go table-test
// literal.
//
// The package lives in its own module (oracle/) so that the main module
// never depends on k8s.io/kubernetes. TestOracle runs it: one subtest per
// compared part (filter, score, preemption), so one part can be rerun on
// its own:
//
//	cd oracle && go test -count=1 -run 'TestOracle/preemption' ./scheduling/
//	cd oracle && go test -run TestOracle ./scheduling/ -oracle.seed 2049 -oracle.cases 1
//
// Flags: -oracle.seed (first seed, 1), -oracle.cases (3000),
// -oracle.reproducers (failures shrunk and printed per part, 3) and
// -oracle.bound-pod-level (bound pods with sidecars and pod-level
// requests, which podsafe's framework does not account yet).
package scheduling

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Epoch is the time every generated timestamp is an offset from, so
// problems (and their printed reproducers) are the same on every run.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Problem is one scheduling decision: a cluster, its budgets and the pod to
// place. Its objects are ordinary Kubernetes objects, so a reproducer can
// be pasted into a plugin test as is.
type Problem struct {
	Nodes []*corev1.Node
	// Pods are the pods already bound to nodes (spec.nodeName set).
	Pods []*corev1.Pod
	PDBs []*policyv1.PodDisruptionBudget
	// Services, ReplicaSets, StatefulSets and ReplicationControllers are
	// the workloads the cluster's default spread constraints take their
	// selector from (TS-9).
	Services               []*corev1.Service
	ReplicaSets            []*appsv1.ReplicaSet
	StatefulSets           []*appsv1.StatefulSet
	ReplicationControllers []*corev1.ReplicationController
	// Pod is the incoming, unbound pod.
	Pod *corev1.Pod
}

// Clone returns a deep copy, which shrinking may change freely.
func (p *Problem) Clone() *Problem {
	out := &Problem{Pod: p.Pod.DeepCopy()}
	for _, n := range p.Nodes {
		out.Nodes = append(out.Nodes, n.DeepCopy())
	}
	for _, pod := range p.Pods {
		out.Pods = append(out.Pods, pod.DeepCopy())
	}
	for _, pdb := range p.PDBs {
		out.PDBs = append(out.PDBs, pdb.DeepCopy())
	}
	for _, o := range p.Services {
		out.Services = append(out.Services, o.DeepCopy())
	}
	for _, o := range p.ReplicaSets {
		out.ReplicaSets = append(out.ReplicaSets, o.DeepCopy())
	}
	for _, o := range p.StatefulSets {
		out.StatefulSets = append(out.StatefulSets, o.DeepCopy())
	}
	for _, o := range p.ReplicationControllers {
		out.ReplicationControllers = append(out.ReplicationControllers, o.DeepCopy())
	}
	return out
}

// The label keys problems use.
const (
	LabelHostname = corev1.LabelHostname
	LabelZone     = corev1.LabelTopologyZone
	LabelRegion   = corev1.LabelTopologyRegion
	LabelRack     = "example.com/rack"
	LabelDisk     = "example.com/disk"
)

// NewNode returns a node with its hostname label and allocatable CPU (in
// millicores), memory (in MiB) and pod slots; a negative amount leaves that
// resource out of allocatable.
func NewNode(name string, milliCPU, memMiB, pods int64) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("node-" + name),
		Labels: map[string]string{LabelHostname: name}}}
	alloc := corev1.ResourceList{}
	if milliCPU >= 0 {
		alloc[corev1.ResourceCPU] = *resource.NewMilliQuantity(milliCPU, resource.DecimalSI)
	}
	if memMiB >= 0 {
		alloc[corev1.ResourceMemory] = *resource.NewQuantity(memMiB<<20, resource.BinarySI)
	}
	if pods >= 0 {
		alloc[corev1.ResourcePods] = *resource.NewQuantity(pods, resource.DecimalSI)
	}
	n.Status.Capacity, n.Status.Allocatable = alloc, alloc.DeepCopy()
	return n
}

// NewPod returns a pod of one container with the given requests (zero
// leaves a request out).
func NewPod(ns, name string, milliCPU, memMiB int64) *corev1.Pod {
	req := corev1.ResourceList{}
	if milliCPU > 0 {
		req[corev1.ResourceCPU] = *resource.NewMilliQuantity(milliCPU, resource.DecimalSI)
	}
	if memMiB > 0 {
		req[corev1.ResourceMemory] = *resource.NewQuantity(memMiB<<20, resource.BinarySI)
	}
	c := corev1.Container{Name: "c", Image: "pause"}
	if len(req) > 0 {
		c.Resources.Requests = req
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{c}},
	}
}

// At is Epoch plus minutes, as an API timestamp.
func At(minutes int) metav1.Time {
	return metav1.NewTime(Epoch.Add(time.Duration(minutes) * time.Minute))
}

// NewPDB returns a budget in ns selecting sel that allows allowed more
// disruptions.
func NewPDB(ns, name string, sel *metav1.LabelSelector, allowed int32) *policyv1.PodDisruptionBudget {
	one := intstr.FromInt32(1)
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("pdb-" + ns + "-" + name)},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: sel, MinAvailable: &one},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed},
	}
}

// String names the problem's shape for logs.
func (p *Problem) String() string {
	return fmt.Sprintf("%d nodes, %d pods, %d budgets, %d workloads, %d constraints", len(p.Nodes), len(p.Pods), len(p.PDBs),
		len(p.Services)+len(p.ReplicaSets)+len(p.StatefulSets)+len(p.ReplicationControllers), len(p.Pod.Spec.TopologySpreadConstraints))
}

// Owner makes kind/name (a ReplicaSet, StatefulSet or
// ReplicationController) the controller of pod.
func Owner(pod *corev1.Pod, apiVersion, kind, name string) {
	yes := true
	pod.OwnerReferences = append(pod.OwnerReferences, metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name,
		UID: types.UID("uid-" + kind + "-" + name), Controller: &yes})
}
