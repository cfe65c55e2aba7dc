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
	// assumed marks the pods counted only because this scheduler is
	// binding them; the informer's version of a pod replaces the mark.
	assumed map[types.UID]bool
	gen     int64
	// removed is set when a node went away since the last snapshot.
	removed bool
}

// NewCache returns an empty cache.
func NewCache() *Cache {
	return &Cache{nodes: map[string]*framework.NodeInfo{}, pods: map[types.UID]string{}, assumed: map[types.UID]bool{}}
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
			delete(c.assumed, pi.Pod.UID)
		}
		delete(c.nodes, name)
		c.removed = true
	}
}

// SetPod counts a bound pod, as the informer shows it, on node, replacing
// any earlier version of it, assumed or not.
func (c *Cache) SetPod(pod *corev1.Pod, node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setPodLocked(pod, node)
}

func (c *Cache) setPodLocked(pod *corev1.Pod, node string) {
	c.removePodLocked(pod.UID)
	c.infoLocked(node).AddPod(framework.NewPodInfo(pod))
	c.pods[pod.UID] = node
}

// AssumePod counts a pod on the node it is being bound to, before the
// binding lands, so the next cycle sees the room as taken.
func (c *Cache) AssumePod(pod *corev1.Pod, node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setPodLocked(pod, node)
	c.assumed[pod.UID] = true
}

// ForgetPod stops counting a pod whose binding failed, if it is still only
// assumed: when the informer has shown the pod bound meanwhile (a binding
// whose answer was lost may well have landed), that version stays counted.
// It reports whether the pod was forgotten.
func (c *Cache) ForgetPod(uid types.UID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.assumed[uid] {
		return false
	}
	c.removePodLocked(uid)
	return true
}

// RemovePod stops counting a pod.
func (c *Cache) RemovePod(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removePodLocked(uid)
}

func (c *Cache) removePodLocked(uid types.UID) {
	delete(c.assumed, uid)
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
