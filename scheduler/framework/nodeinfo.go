package framework

import (
	"maps"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
)

// Resource is an amount of the resources the scheduler accounts for, as
// kube-scheduler's NodeInfo does: CPU, memory, pod slots, ephemeral storage
// and the scalar resources (extended resources such as example.com/gpu,
// hugepages, attachable volumes).
type Resource struct {
	MilliCPU         int64
	Memory           int64
	Pods             int64
	EphemeralStorage int64
	// Scalar holds the scalar resources by name, nil when there are none.
	// Add and Sub change the map in place: a Resource that is shared (a
	// PodInfo's Requests, a NodeInfo's Allocatable) is only ever read, and
	// NodeInfo.Clone copies Requested's map.
	Scalar map[corev1.ResourceName]int64
}

// Add adds r2 to r.
func (r *Resource) Add(r2 Resource) {
	r.MilliCPU += r2.MilliCPU
	r.Memory += r2.Memory
	r.Pods += r2.Pods
	r.EphemeralStorage += r2.EphemeralStorage
	if len(r2.Scalar) > 0 && r.Scalar == nil {
		r.Scalar = make(map[corev1.ResourceName]int64, len(r2.Scalar))
	}
	for name, v := range r2.Scalar {
		r.Scalar[name] += v
	}
}

// Sub subtracts r2 from r.
func (r *Resource) Sub(r2 Resource) {
	r.MilliCPU -= r2.MilliCPU
	r.Memory -= r2.Memory
	r.Pods -= r2.Pods
	r.EphemeralStorage -= r2.EphemeralStorage
	for name, v := range r2.Scalar {
		if left := r.Scalar[name] - v; left != 0 {
			r.Scalar[name] = left
		} else {
			delete(r.Scalar, name)
		}
	}
}

// Clone returns a copy of r that shares nothing with it.
func (r Resource) Clone() Resource {
	if r.Scalar != nil {
		r.Scalar = maps.Clone(r.Scalar)
	}
	return r
}

// IsScalarResourceName reports whether the scheduler accounts for name as
// a scalar resource: an extended resource (a domain-prefixed name outside
// the "requests." quota prefix, kubernetes.io/ ones included), hugepages
// or attachable volumes, as kube-scheduler's IsScalarResourceName has it.
// Other names, which the API would refuse in requests, are ignored.
func IsScalarResourceName(name corev1.ResourceName) bool {
	n := string(name)
	switch {
	case strings.HasPrefix(n, corev1.ResourceHugePagesPrefix), strings.HasPrefix(n, corev1.ResourceAttachableVolumesPrefix):
		return true
	}
	return strings.Contains(n, "/") && !strings.HasPrefix(n, corev1.DefaultResourceRequestsPrefix)
}

// ResourceFromList reads a resource list: CPU, memory, pods, ephemeral
// storage and scalar resources; other names are ignored.
func ResourceFromList(l corev1.ResourceList) Resource {
	var r Resource
	for name, q := range l {
		switch name {
		case corev1.ResourceCPU:
			r.MilliCPU = q.MilliValue()
		case corev1.ResourceMemory:
			r.Memory = q.Value()
		case corev1.ResourcePods:
			r.Pods = q.Value()
		case corev1.ResourceEphemeralStorage:
			r.EphemeralStorage = q.Value()
		default:
			if IsScalarResourceName(name) {
				if r.Scalar == nil {
					r.Scalar = map[corev1.ResourceName]int64{}
				}
				r.Scalar[name] = q.Value()
			}
		}
	}
	return r
}

// PodRequests is what a pod asks of a node, as Kubernetes computes it
// (component-helpers' PodRequests): its pod-level requests where set;
// otherwise its containers' plus its restartable (sidecar) init
// containers', at least what any init container needs on top of the
// sidecars started before it; plus its overhead; and one pod slot. Bound
// and incoming pods are counted alike.
func PodRequests(pod *corev1.Pod) Resource {
	r := ResourceFromList(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}))
	r.Pods = 1
	return r
}

// PodInfo is a pod with the values the plugins need computed once.
type PodInfo struct {
	Pod      *corev1.Pod
	Requests Resource
	Priority int32
	// StartTime is status.startTime, zero while the kubelet has not started
	// the pod; kept here so that preemption, which reads it for every pod
	// of every candidate node, need not touch the pod object.
	StartTime time.Time
	// Affinity holds the pod's inter-pod affinity terms, nil if it has none
	// (or only invalid ones, which the API would have refused).
	Affinity *AffinityTerms
}

// NewPodInfo computes the PodInfo of pod.
func NewPodInfo(pod *corev1.Pod) *PodInfo {
	aff, err := ParseAffinityTerms(pod)
	if err != nil {
		aff = nil
	}
	pi := &PodInfo{Pod: pod, Requests: PodRequests(pod), Priority: corev1helpers.PodPriority(pod), Affinity: aff}
	if st := pod.Status.StartTime; st != nil {
		pi.StartTime = st.Time
	}
	return pi
}

// hasRequiredAntiAffinity reports whether the pod repels others for good.
func (pi *PodInfo) hasRequiredAntiAffinity() bool {
	return pi.Affinity != nil && len(pi.Affinity.RequiredAntiAffinity) > 0
}

// NodeInfo is a node and the pods the scheduler counts on it: bound pods,
// pods it has assumed while their binding is under way, and terminating pods
// until they are gone (their resources are not free yet).
type NodeInfo struct {
	node *corev1.Node
	Pods []*PodInfo
	// PodsWithAffinity are the pods of Pods with any inter-pod affinity term,
	// and PodsWithRequiredAntiAffinity those with a required anti-affinity
	// term, so inter-pod affinity need not look at every pod every cycle.
	PodsWithAffinity             []*PodInfo
	PodsWithRequiredAntiAffinity []*PodInfo
	Requested                    Resource
	Allocatable                  Resource
	// Generation grows with every change; snapshots copy only changed nodes.
	Generation int64
}

// NewNodeInfo returns a NodeInfo holding pods (node set separately).
func NewNodeInfo(pods ...*corev1.Pod) *NodeInfo {
	n := &NodeInfo{}
	for _, p := range pods {
		n.AddPod(NewPodInfo(p))
	}
	return n
}

// Node returns the node, or nil if only its pods are known so far.
func (n *NodeInfo) Node() *corev1.Node {
	if n == nil {
		return nil
	}
	return n.node
}

// SetNode sets the node and its allocatable resources.
func (n *NodeInfo) SetNode(node *corev1.Node) {
	n.node = node
	n.Allocatable = ResourceFromList(node.Status.Allocatable)
}

// AddPod counts pi on the node.
func (n *NodeInfo) AddPod(pi *PodInfo) {
	n.Pods = append(n.Pods, pi)
	n.Requested.Add(pi.Requests)
	if pi.Affinity != nil {
		n.PodsWithAffinity = append(n.PodsWithAffinity, pi)
		if pi.hasRequiredAntiAffinity() {
			n.PodsWithRequiredAntiAffinity = append(n.PodsWithRequiredAntiAffinity, pi)
		}
	}
}

// RemovePod stops counting the pod with uid, reporting whether it was there.
func (n *NodeInfo) RemovePod(uid types.UID) bool {
	var gone *PodInfo
	if n.Pods, gone = removeFrom(n.Pods, uid, false); gone == nil {
		return false
	}
	n.Requested.Sub(gone.Requests)
	if len(n.PodsWithAffinity) > 0 {
		// Clones share these lists' arrays: copy rather than shuffle in place.
		n.PodsWithAffinity, _ = removeFrom(n.PodsWithAffinity, uid, true)
		n.PodsWithRequiredAntiAffinity, _ = removeFrom(n.PodsWithRequiredAntiAffinity, uid, true)
	}
	return true
}

// removeFrom drops the pod with uid from list and returns it too (nil if it
// was not there); with fresh it returns a new slice instead of changing
// list's array.
func removeFrom(list []*PodInfo, uid types.UID, fresh bool) ([]*PodInfo, *PodInfo) {
	for i, pi := range list {
		if pi.Pod.UID != uid {
			continue
		}
		if fresh {
			out := make([]*PodInfo, 0, len(list)-1)
			return append(append(out, list[:i]...), list[i+1:]...), pi
		}
		last := len(list) - 1
		list[i] = list[last]
		list[last] = nil
		return list[:last], pi
	}
	return list, nil
}

// Clone returns a copy whose pod lists can change independently; the pods
// and the node themselves are shared and must not be modified.
func (n *NodeInfo) Clone() *NodeInfo {
	out := *n
	out.Requested = n.Requested.Clone()
	out.Pods = make([]*PodInfo, len(n.Pods), len(n.Pods)+1)
	copy(out.Pods, n.Pods)
	// Appending must not write into n's arrays; RemovePod copies them.
	out.PodsWithAffinity = n.PodsWithAffinity[:len(n.PodsWithAffinity):len(n.PodsWithAffinity)]
	out.PodsWithRequiredAntiAffinity = n.PodsWithRequiredAntiAffinity[:len(n.PodsWithRequiredAntiAffinity):len(n.PodsWithRequiredAntiAffinity)]
	return &out
}
