package fencing

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// episode is one stretch of time a node is a fencing candidate, from the
// first sync that found it so until it is fenced or stops being one.
type episode struct {
	detected time.Time       // when fencing became justified; zero before
	noted    map[string]bool // event reasons already recorded
}

// episodeLocked returns node's current episode, starting one if needed.
// Callers hold c.mu.
func (c *Controller) episodeLocked(node string) *episode {
	ep := c.episodes[node]
	if ep == nil {
		ep = &episode{noted: map[string]bool{}}
		c.episodes[node] = ep
	}
	return ep
}

// detect returns when fencing node became justified in this episode.
func (c *Controller) detect(node string, now time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ep := c.episodeLocked(node)
	if ep.detected.IsZero() {
		ep.detected = now
		c.log.Warn("node needs fencing", "node", node)
	}
	return ep.detected
}

// endEpisode ends node's candidacy and, if release, gives back its unit of
// the budget.
func (c *Controller) endEpisode(node string, release bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.episodes, node)
	if release {
		delete(c.reserved, node)
	}
}

// standDown records that node, still a candidate, no longer needs fencing
// (no pod on it justifies it): it gives back its unit of the budget, and a
// later need counts as a new detection.
func (c *Controller) standDown(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.reserved, node)
	if ep := c.episodes[node]; ep != nil {
		ep.detected = time.Time{}
	}
}

// forget drops everything known about a deleted node but its records.
func (c *Controller) forget(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.obs, node)
	delete(c.episodes, node)
	delete(c.reserved, node)
	delete(c.announce, node)
}

// reserve takes a unit of the budget for node, unless the nodes fenced and
// not unfenced plus those being fenced already use it all; then it returns
// them. A node keeps its unit while its fence is under way (even across
// agent failures) and while it is fenced; it gives it back when it stops
// being a candidate that should be fenced.
func (c *Controller) reserve(node string) ([]string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reserved[node] {
		return nil, true
	}
	held := map[string]bool{}
	for n := range c.reserved {
		held[n] = true
	}
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return nil, false
	}
	for _, n := range nodes {
		if Fenced(n) {
			held[n.Name] = true
		}
	}
	if len(held) >= c.cfg.Budget {
		names := make([]string, 0, len(held))
		for n := range held {
			names = append(names, n)
		}
		slices.Sort(names)
		return names, false
	}
	c.reserved[node] = true
	return nil, true
}

// noteOnce records an Event on node, once per episode and reason.
func (c *Controller) noteOnce(ctx context.Context, node *corev1.Node, eventType, reason, msg string) {
	c.mu.Lock()
	ep := c.episodeLocked(node.Name)
	seen := ep.noted[reason]
	ep.noted[reason] = true
	c.mu.Unlock()
	if seen {
		return
	}
	c.log.Info("fencing decision", "node", node.Name, "reason", reason, "message", msg)
	c.event(nodeRef(node), eventType, reason, msg)
}
