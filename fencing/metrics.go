package fencing

import (
	"slices"
	"time"
)

// FenceRecord is one fence as this controller saw it, for reports: the
// times are on the controller's clock.
type FenceRecord struct {
	// Node is the fenced node.
	Node string
	// Token is the fence token the agents were given.
	Token int64
	// Detected is when the controller decided the node needed fencing (its
	// heart-beat stale or a fence requested, and the policy satisfied). It
	// is zero for a fence confirmed by an earlier run of the controller.
	Detected time.Time
	// Confirmed is when the last agent confirmed the fence (for a fence
	// confirmed by an earlier run: the condition's lastTransitionTime, to
	// the second).
	Confirmed time.Time
	// PodsDeleted is when the node was first seen clear: every pod bound to
	// it force deleted and every volume attachment to it broken. Zero until
	// then.
	PodsDeleted time.Time
	// Agents are the agents that confirmed the fence, in order.
	Agents []string
	// Pods are the pods this controller force deleted ("namespace/name").
	Pods []string
}

// clone returns a deep copy of r.
func (r *FenceRecord) clone() FenceRecord {
	out := *r
	out.Agents = slices.Clone(r.Agents)
	out.Pods = slices.Clone(r.Pods)
	return out
}

// Fences returns a copy of every fence this controller confirmed or
// resumed, in the order it first saw them. It is safe to call concurrently
// with Run.
func (c *Controller) Fences() []FenceRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]FenceRecord, len(c.records))
	for i, r := range c.records {
		out[i] = r.clone()
	}
	return out
}

// fenceRecord returns the record of f's fence, creating it (with detected
// as its detection time) if this controller has none. Callers hold c.mu.
func (c *Controller) fenceRecordLocked(f recordedFence, node string, detected time.Time) *FenceRecord {
	if r := c.current[node]; r != nil && r.Token == f.token {
		return r
	}
	r := &FenceRecord{Node: node, Token: f.token, Detected: detected, Confirmed: f.confirmed, Agents: slices.Clone(f.agents)}
	c.records = append(c.records, r)
	c.current[node] = r
	return r
}
