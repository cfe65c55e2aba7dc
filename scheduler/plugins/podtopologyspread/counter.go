package podtopologyspread

import (
	"encoding/json"
	"math"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/podsafe/podsafe/scheduler/framework"
)

// maxCounters bounds the number of constraint shapes whose counts are kept
// between cycles; the least recently used is dropped first.
const maxCounters = 64

// domainTable holds the matching-pod count of every domain of one
// constraint over one snapshot. It is immutable once built, so cycle states
// share it and record their own changes beside it (domainCounts).
type domainTable struct {
	ids map[string]int32
	// counts is indexed by ids; -1 means no eligible node carries the domain.
	counts []int32
	// domains is the number of eligible domains.
	domains       int
	min, minCount int
}

// lookup returns the id and count of an eligible domain.
func (t *domainTable) lookup(domain string) (int32, int, bool) {
	id, ok := t.ids[domain]
	if !ok || int(id) >= len(t.counts) || t.counts[id] < 0 {
		return 0, 0, false
	}
	return id, int(t.counts[id]), true
}

// countOf is the count of domain, 0 if it is not eligible.
func (t *domainTable) countOf(domain string) int {
	_, n, _ := t.lookup(domain)
	return n
}

// nodeCount is what one node contributes to a counter.
type nodeCount struct {
	ni     *framework.NodeInfo
	pods   int
	domain int32 // -1: the node takes no part
	count  int32
}

// counter keeps one constraint shape's per-node contributions between
// cycles. Snapshots replace a NodeInfo whenever its pods or node change, so
// a node whose NodeInfo is the same object as last time contributes the
// same count and is not rescanned.
type counter struct {
	used  uint64
	nodes []nodeCount
	ids   map[string]int32
	// idsShared is set once a table holds ids: the map is then copied
	// before it changes.
	idsShared bool
	table     *domainTable
}

// counterSpec says how a counter counts: which nodes take part, which
// label names their domain, and which pods count.
type counterSpec struct {
	eligible    func(*corev1.Node) bool
	topologyKey string
	namespace   string
	selector    labels.Selector
}

// refresh brings the counter up to date with nodes and returns its table.
func (c *counter) refresh(nodes []*framework.NodeInfo, spec counterSpec) *domainTable {
	changed := c.table == nil || len(c.nodes) != len(nodes)
	if len(c.nodes) != len(nodes) {
		grown := make([]nodeCount, len(nodes))
		copy(grown, c.nodes)
		c.nodes = grown
	}
	if c.ids == nil || (c.table != nil && len(c.ids) > 2*c.table.domains+64) {
		// Domains that went away pile up; start afresh now and then.
		c.ids, c.idsShared = map[string]int32{}, false
		for i := range c.nodes {
			c.nodes[i].ni = nil
		}
		changed = true
	}
	for i, ni := range nodes {
		e := &c.nodes[i]
		if e.ni == ni && e.pods == len(ni.Pods) {
			continue
		}
		changed = true
		*e = nodeCount{ni: ni, pods: len(ni.Pods), domain: -1}
		node := ni.Node()
		if node == nil || !spec.eligible(node) {
			continue
		}
		domain := node.Labels[spec.topologyKey]
		id, ok := c.ids[domain]
		if !ok {
			if c.idsShared {
				// Tables in use read the old map: copy before adding.
				c.ids, c.idsShared = cloneIDs(c.ids), false
			}
			id = int32(len(c.ids))
			c.ids[domain] = id
		}
		e.domain = id
		e.count = int32(countMatching(ni.Pods, spec.namespace, spec.selector))
	}
	if !changed {
		return c.table
	}
	t := &domainTable{ids: c.ids, counts: make([]int32, len(c.ids))}
	c.idsShared = true
	for i := range t.counts {
		t.counts[i] = -1
	}
	for i := range c.nodes {
		e := &c.nodes[i]
		if e.domain < 0 {
			continue
		}
		if t.counts[e.domain] < 0 {
			t.counts[e.domain] = 0
			t.domains++
		}
		t.counts[e.domain] += e.count
	}
	t.min, t.minCount = math.MaxInt, 0
	for _, v := range t.counts {
		switch n := int(v); {
		case n < 0:
		case n < t.min:
			t.min, t.minCount = n, 1
		case n == t.min:
			t.minCount++
		}
	}
	c.table = t
	return t
}

func cloneIDs(m map[string]int32) map[string]int32 {
	out := make(map[string]int32, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// counterCache holds the counters of the constraint shapes seen recently.
// Safe for concurrent use.
type counterCache struct {
	mu       sync.Mutex
	tick     uint64
	counters map[string]*counter
}

// table returns the per-domain counts of constraint c over nodes, for a
// constraint group whose topology keys are all required (group, nil when
// none is) and for the incoming pod's namespace and node filter. A node
// lacking c's key (possible only with a nil group) is in domain "".
func (cc *counterCache) table(nodes []*framework.NodeInfo, c constraint, group []constraint, pod *corev1.Pod, f nodeFilter) *domainTable {
	spec := counterSpec{
		eligible: func(node *corev1.Node) bool {
			return hasAllKeys(node, group) && f.includes(c, node)
		},
		topologyKey: c.topologyKey,
		namespace:   pod.Namespace,
		selector:    c.selector,
	}
	key, ok := counterKey(c, group, pod)
	if !ok {
		return (&counter{}).refresh(nodes, spec)
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.counters == nil {
		cc.counters = map[string]*counter{}
	}
	cc.tick++
	ctr, found := cc.counters[key]
	if !found {
		if len(cc.counters) >= maxCounters {
			cc.evictLocked()
		}
		ctr = &counter{}
		cc.counters[key] = ctr
	}
	ctr.used = cc.tick
	return ctr.refresh(nodes, spec)
}

func (cc *counterCache) evictLocked() {
	var oldest string
	var at uint64 = math.MaxUint64
	for k, c := range cc.counters {
		if c.used < at {
			oldest, at = k, c.used
		}
	}
	delete(cc.counters, oldest)
}

// counterKey names everything a count depends on besides the snapshot: the
// namespace, the selector, the topology key, the keys a node must carry,
// and, where a node inclusion policy is honoured, the pod's node
// requirements or tolerations. ok is false when they cannot be named.
func counterKey(c constraint, group []constraint, pod *corev1.Pod) (string, bool) {
	var b strings.Builder
	b.WriteString(pod.Namespace)
	b.WriteByte(0)
	// Everything and Nothing both print as "": Empty tells them apart.
	if c.selector.Empty() {
		b.WriteString("all")
	} else {
		b.WriteString("sel:")
		b.WriteString(c.selector.String())
	}
	b.WriteByte(0)
	b.WriteString(c.topologyKey)
	for _, g := range group {
		b.WriteByte(0)
		b.WriteString(g.topologyKey)
	}
	b.WriteByte(0)
	if c.honorAffinity {
		var required *corev1.NodeSelector
		if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil {
			required = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		}
		if len(pod.Spec.NodeSelector) > 0 || required != nil {
			raw, err := json.Marshal([]any{pod.Spec.NodeSelector, required})
			if err != nil {
				return "", false
			}
			b.WriteString("affinity:")
			b.Write(raw)
		}
	}
	b.WriteByte(0)
	if c.honorTaints {
		raw, err := json.Marshal(pod.Spec.Tolerations)
		if err != nil {
			return "", false
		}
		b.WriteString("taints:")
		b.Write(raw)
	}
	return b.String(), true
}
