package fencing

import "context"

// Agent fences one node by one means: power (IPMI, a PDU, a cloud API's
// force shutdown), a storage firewall, a network cut. The controller runs
// every configured agent, in order, for every fence, and counts a fence as
// confirmed only when every agent returned nil. See the package
// documentation for the full contract and an example.
//
// Implementations must be safe for concurrent use: the controller may fence
// several nodes at once (within its budget), and an admin may call Unfence.
type Agent interface {
	// Name identifies the agent in conditions, events and logs ("power",
	// "storage", "network"). It should be a short constant word.
	Name() string
	// Fence makes sure nothing of node can run or write any more, by this
	// agent's means, and returns nil only once that is confirmed (the
	// power is observed off, the firewall rule is observed installed). It
	// must be idempotent, since a controller that crashed after an agent
	// confirmed calls it again, and it must honour ctx. token is the fence
	// token: cluster-wide, strictly increasing across fences, so a storage
	// server that records it can refuse writes carrying an older one.
	Fence(ctx context.Context, node string, token int64) error
	// Unfence undoes Fence. Only an admin action (the package's Unfence
	// function) calls it, never the controller: a fenced node must not come
	// back by itself (PS-14).
	Unfence(ctx context.Context, node string) error
}

// agentNames lists the names of agents in order.
func agentNames(agents []Agent) []string {
	names := make([]string, len(agents))
	for i, a := range agents {
		names[i] = a.Name()
	}
	return names
}
