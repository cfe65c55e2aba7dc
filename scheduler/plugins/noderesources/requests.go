package noderesources

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/podsafe/podsafe/scheduler/framework"
)

// podRequests is what an incoming pod asks of a node, as NodeInfo counts
// the pods already there (framework.PodRequests), with the names of the
// scalar resources it requests in order, so that rejections list them
// in a stable order.
type podRequests struct {
	framework.Resource
	scalars []corev1.ResourceName
}

// Clone implements framework.StateData: the requests never change.
func (r *podRequests) Clone() framework.StateData { return r }

// requestsOf computes the pod's requests; a scalar resource requested at
// zero is not checked (kube-scheduler skips it too).
func requestsOf(pod *corev1.Pod) *podRequests {
	r := &podRequests{Resource: framework.PodRequests(pod)}
	for name, v := range r.Scalar {
		if v > 0 {
			r.scalars = append(r.scalars, name)
		}
	}
	slices.Sort(r.scalars)
	return r
}
