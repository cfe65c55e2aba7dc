package noderesources

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/podsafe/podsafe/scheduler/framework"
)

// podRequests is what an incoming pod asks of a node: CPU, memory and one
// pod slot, which NodeInfo accounts for, and the other resources Fit
// checks (ephemeral storage and scalar resources), which it does not.
type podRequests struct {
	framework.Resource
	// other lists the requested amounts of the other resources, by name.
	other []amount
}

// amount is a quantity of one resource: millicores for CPU, the value
// (bytes, devices) otherwise.
type amount struct {
	name  corev1.ResourceName
	value int64
}

// Clone implements framework.StateData: the requests never change.
func (r *podRequests) Clone() framework.StateData { return r }

// requestsOf computes the pod's effective requests as Kubernetes does:
// pod-level requests where set; otherwise its containers' plus its
// restartable (sidecar) init containers', at least what any init container
// needs on top of the sidecars started before it; plus the pod's overhead.
func requestsOf(pod *corev1.Pod) *podRequests {
	list := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	r := &podRequests{Resource: framework.Resource{MilliCPU: list.Cpu().MilliValue(), Memory: list.Memory().Value(), Pods: 1}}
	for name, q := range list {
		if checkedOther(name) && q.Sign() > 0 {
			r.other = append(r.other, amount{name: name, value: q.Value()})
		}
	}
	sort.Slice(r.other, func(i, j int) bool { return r.other[i].name < r.other[j].name })
	return r
}

// checkedOther reports whether Fit checks resource name beyond CPU, memory
// and pods: ephemeral storage and the scalar resources (extended resources
// such as example.com/gpu, hugepages, attachable volumes). Other names,
// which the API would refuse in requests, are ignored.
func checkedOther(name corev1.ResourceName) bool {
	n := string(name)
	switch {
	case name == corev1.ResourceEphemeralStorage:
		return true
	case strings.HasPrefix(n, corev1.ResourceHugePagesPrefix), strings.HasPrefix(n, corev1.ResourceAttachableVolumesPrefix):
		return true
	}
	return strings.Contains(n, "/") && !strings.HasPrefix(n, corev1.DefaultResourceRequestsPrefix)
}

// otherShortage returns the reasons why ni cannot hold the other resources
// of req, and whether one of them exceeds the node's allocatable outright.
// It sums the requests of the node's pods itself, as NodeInfo does not
// account for these resources; it runs only for pods that request them.
func otherShortage(req *podRequests, ni *framework.NodeInfo) (reasons []string, tooBig bool) {
	if len(req.other) == 0 {
		return nil, false
	}
	used := make([]int64, len(req.other))
	for _, pi := range ni.Pods {
		list := resourcehelper.PodRequests(pi.Pod, resourcehelper.PodResourcesOptions{})
		for i, o := range req.other {
			if q, ok := list[o.name]; ok {
				used[i] += q.Value()
			}
		}
	}
	alloc := ni.Node().Status.Allocatable
	for i, o := range req.other {
		var have int64
		if q, ok := alloc[o.name]; ok {
			have = q.Value()
		}
		if o.value > have-used[i] {
			reasons = append(reasons, "Insufficient "+string(o.name))
			tooBig = tooBig || o.value > have
		}
	}
	return reasons, tooBig
}
