package scheduler

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsafe/podsafe/scheduler/framework"
)

// Nominator remembers which pending pods were nominated to which node by
// preemption, so filters can hold the room for them (PR-4, PR-5). Safe for
// concurrent use.
type Nominator struct {
	mu     sync.Mutex
	byNode map[string][]*framework.PodInfo
	byPod  map[types.UID]string
}

// NewNominator returns an empty nominator.
func NewNominator() *Nominator {
	return &Nominator{byNode: map[string][]*framework.PodInfo{}, byPod: map[types.UID]string{}}
}

// Set records pod as nominated to node; an empty node removes it.
func (n *Nominator) Set(pod *corev1.Pod, node string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.deleteLocked(pod.UID)
	if node == "" {
		return
	}
	n.byPod[pod.UID] = node
	n.byNode[node] = append(n.byNode[node], framework.NewPodInfo(pod))
}

// Delete forgets pod's nomination.
func (n *Nominator) Delete(uid types.UID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.deleteLocked(uid)
}

func (n *Nominator) deleteLocked(uid types.UID) {
	node, ok := n.byPod[uid]
	if !ok {
		return
	}
	delete(n.byPod, uid)
	list := n.byNode[node]
	for i, pi := range list {
		if pi.Pod.UID == uid {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(n.byNode, node)
	} else {
		n.byNode[node] = list
	}
}

// NodeOf returns the node pod is nominated to, "" if none.
func (n *Nominator) NodeOf(uid types.UID) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.byPod[uid]
}

// ForNode lists the pods nominated to node.
func (n *Nominator) ForNode(node string) []*framework.PodInfo {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]*framework.PodInfo(nil), n.byNode[node]...)
}
