package scheduler

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsafe/podsafe/scheduler/framework"
)

// Cache is the scheduler's own view of nodes and the pods that hold their
// resources: bound pods from the informer and assumed pods whose binding is
// under way. Snapshots are refreshed from it incrementally. Safe for
// concurrent use.
type Cache struct {
	mu    sync.Mutex
	nodes map[string]*framework.NodeInfo
	pods  map[types.UID]string // pod -> node it is counted on
	gen   int64
	// removed is set when a node went away since the last snapshot.
	removed bool
}

// NewCache returns an empty cache.
func NewCache() *Cache {
	return &Cache{nodes: map[string]*framework.NodeInfo{}, pods: map[types.UID]string{}}
}

func (c *Cache) infoLocked(name string) *framework.NodeInfo {
	ni, ok := c.nodes[name]
	if !ok {
		ni = &framework.NodeInfo{}
		c.nodes[name] = ni
	}
	c.gen++
	ni.Generation = c.gen
	return ni
}

// SetNode adds or updates a node.
func (c *Cache) SetNode(node *corev1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.infoLocked(node.Name).SetNode(node)
}

// RemoveNode forgets a node and the pods counted on it.
func (c *Cache) RemoveNode(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ni, ok := c.nodes[name]; ok {
		for _, pi := range ni.Pods {
			delete(c.pods, pi.Pod.UID)
		}
		delete(c.nodes, name)
		c.removed = true
	}
}

// SetPod counts a bound (or assumed) pod on node, replacing any earlier
// version of it.
func (c *Cache) SetPod(pod *corev1.Pod, node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removePodLocked(pod.UID)
	c.infoLocked(node).AddPod(framework.NewPodInfo(pod))
	c.pods[pod.UID] = node
}

// RemovePod stops counting a pod.
func (c *Cache) RemovePod(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removePodLocked(uid)
}

func (c *Cache) removePodLocked(uid types.UID) {
	node, ok := c.pods[uid]
	if !ok {
		return
	}
	delete(c.pods, uid)
	if ni, ok := c.nodes[node]; ok {
		ni.RemovePod(uid)
		c.gen++
		ni.Generation = c.gen
	}
}

// PodNode reports the node a pod is counted on.
func (c *Cache) PodNode(uid types.UID) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.pods[uid]
	return n, ok
}

// UpdateSnapshot brings snap up to date, copying only the nodes that
// changed since snap was last updated.
func (c *Cache) UpdateSnapshot(snap *framework.Snapshot) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.removed || snap.NumNodes() > len(c.nodes) {
		*snap = *framework.NewEmptySnapshot()
		c.removed = false
	}
	for _, ni := range c.nodes {
		if ni.Node() == nil || (ni.Generation <= snap.Generation && snap.Get(ni.Node().Name) != nil) {
			continue
		}
		snap.Set(ni.Clone())
	}
	snap.Generation = c.gen
}
