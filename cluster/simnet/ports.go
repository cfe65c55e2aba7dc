package simnet

import (
	"cmp"
	"fmt"
	"slices"
)

// Host rules cut every byte between two hosts, but one host often runs more
// than one server: a control-plane member serves raft, store forwarding and
// the API under one name. Port rules act on one flow, the connections dialled
// from one host to one listening address, as a firewall rule naming a
// destination port would, so that, say, a member's store forwarding can be cut
// while its raft traffic flows.
//
// Every connection travels on the links of its flow. A flow's link in each
// direction is cut while the host link in that direction is cut, or while a
// port rule or a hold covers the flow (both directions then). Host rules keep
// the flows in step (syncFlowsLocked), so a connection sees one state, read
// lock-free like any link.
//
// Holds are the second layer: a hold blackholes a flow, or every flow of a
// host, until it is released, and no Heal, HealAll, Reset, HealPort or
// UnfenceHost lifts it. They model a process that has stopped (paused)
// rather than a network fault, so ordinary heals must leave them alone.
// Holds are counted: each Hold needs its own Release.

// flowKey names the connections dialled from one host to one address.
type flowKey struct {
	from string
	to   Addr
}

func (k flowKey) String() string { return k.from + "->" + k.to.String() }

// flow holds the links its connections use.
type flow struct {
	key    flowKey
	ab, ba *link // dialler->listener and back
}

// portState is the Network's per-flow state; guarded by Network.mu.
type portState struct {
	flows    map[flowKey]*flow
	byHosts  map[linkKey][]*flow // by {from, to.Host}
	cut      map[flowKey]bool    // CutPort
	held     map[flowKey]int     // HoldPort
	heldHost map[string]int      // HoldHost
}

func (s *portState) init() {
	if s.flows == nil {
		s.flows = map[flowKey]*flow{}
		s.byHosts = map[linkKey][]*flow{}
		s.cut = map[flowKey]bool{}
		s.held = map[flowKey]int{}
		s.heldHost = map[string]int{}
	}
}

// PortRule is one active port rule or hold, as reported by Network.PortRules.
type PortRule struct {
	// From is the dialling host; To is the listening address ("host:port"),
	// or just a host for a HoldHost, which covers every flow from or to it
	// (From is then empty).
	From, To string
	// Cut is set by CutPort; ordinary heals lift it.
	Cut bool
	// Holds counts HoldPort or HoldHost calls not yet released.
	Holds int
}

// String renders the rule for logs, such as "cp-0->cp-1:7001 cut".
func (r PortRule) String() string {
	s := r.From + "->" + r.To
	if r.From == "" {
		s = r.To
	}
	if r.Cut {
		s += " cut"
	}
	if r.Holds > 0 {
		s += fmt.Sprintf(" held×%d", r.Holds)
	}
	return s
}

// CutPort blackholes the connections dialled from host from to address to
// ("host:port"), both ways, as a firewall dropping that destination port
// would: their bytes are held and they fail after the detection timeout, and
// dials stall. Other traffic between the two hosts flows. HealPort, HealAll
// and Reset lift it. Safe for concurrent use.
func (n *Network) CutPort(from, to string) error {
	return n.portRule("cut port", from, to, func(s *portState, k flowKey) { s.cut[k] = true })
}

// HealPort lifts CutPort(from, to). Safe for concurrent use.
func (n *Network) HealPort(from, to string) error {
	return n.portRule("heal port", from, to, func(s *portState, k flowKey) { delete(s.cut, k) })
}

// HoldPort blackholes the connections dialled from host from to address to,
// both ways, like CutPort, until as many ReleasePort calls as HoldPort calls
// were made; no ordinary heal lifts it. Safe for concurrent use.
func (n *Network) HoldPort(from, to string) error {
	return n.portRule("hold port", from, to, func(s *portState, k flowKey) { s.held[k]++ })
}

// ReleasePort undoes one HoldPort(from, to). Safe for concurrent use.
func (n *Network) ReleasePort(from, to string) error {
	return n.portRule("release port", from, to, func(s *portState, k flowKey) {
		if s.held[k]--; s.held[k] <= 0 {
			delete(s.held, k)
		}
	})
}

// HoldHost blackholes every connection from or to host, both ways, including
// connections and hosts that appear later, until as many ReleaseHost calls as
// HoldHost calls were made; no ordinary heal lifts it. Unlike FenceHost it
// leaves the host rules alone, so when it is released the links are as the
// other rules say. Safe for concurrent use.
func (n *Network) HoldHost(host string) {
	n.update("hold host", func() {
		n.addHostLocked(host)
		n.ports.init()
		n.ports.heldHost[host]++
		n.syncHostFlowsLocked(host)
	}, host)
}

// ReleaseHost undoes one HoldHost(host). Safe for concurrent use.
func (n *Network) ReleaseHost(host string) {
	n.update("release host", func() {
		n.ports.init()
		if n.ports.heldHost[host]--; n.ports.heldHost[host] <= 0 {
			delete(n.ports.heldHost, host)
		}
		n.syncHostFlowsLocked(host)
	}, host)
}

// Held reports whether host is held by HoldHost. Safe for concurrent use.
func (n *Network) Held(host string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ports.heldHost[host] > 0
}

// PortRules returns a snapshot of the port rules and holds in force, sorted
// by From then To. Host rules are in Rules. Safe for concurrent use.
func (n *Network) PortRules() []PortRule {
	n.mu.Lock()
	defer n.mu.Unlock()
	byKey := map[flowKey]*PortRule{}
	get := func(k flowKey) *PortRule {
		if r := byKey[k]; r != nil {
			return r
		}
		r := &PortRule{From: k.from, To: k.to.String()}
		byKey[k] = r
		return r
	}
	for k := range n.ports.cut {
		get(k).Cut = true
	}
	for k, c := range n.ports.held {
		get(k).Holds = c
	}
	rules := make([]PortRule, 0, len(byKey)+len(n.ports.heldHost))
	for _, r := range byKey {
		rules = append(rules, *r)
	}
	for h, c := range n.ports.heldHost {
		rules = append(rules, PortRule{To: h, Holds: c})
	}
	slices.SortFunc(rules, func(a, b PortRule) int {
		return cmp.Or(cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To))
	})
	return rules
}

// portRule applies a change to the rule of flow from->to.
func (n *Network) portRule(op, from, to string, apply func(*portState, flowKey)) error {
	a, err := parseAddr(to)
	if err == nil && from == "" {
		err = fmt.Errorf("port rule from an unnamed host: %w", ErrBadAddress)
	}
	if err != nil {
		return err
	}
	k := flowKey{from: from, to: a}
	n.update(op, func() {
		n.ports.init()
		apply(&n.ports, k)
		n.syncFlowLocked(n.flowLocked(k))
	}, k.String())
	return nil
}

// flowLinksLocked returns the links a new connection from host from to addr
// travels on.
func (n *Network) flowLinksLocked(from string, to Addr) (ab, ba *link) {
	f := n.flowLocked(flowKey{from: from, to: to})
	return f.ab, f.ba
}

// flowLocked returns the flow of k, creating it in step with the rules.
func (n *Network) flowLocked(k flowKey) *flow {
	n.ports.init()
	if f := n.ports.flows[k]; f != nil {
		return f
	}
	f := &flow{key: k, ab: &link{}, ba: &link{}}
	n.ports.flows[k] = f
	hk := linkKey{k.from, k.to.Host}
	n.ports.byHosts[hk] = append(n.ports.byHosts[hk], f)
	n.syncFlowLocked(f)
	return f
}

// syncFlowsLocked brings the flows between hosts a and b, either way, in step
// with the host links after a host rule changed.
func (n *Network) syncFlowsLocked(a, b string) {
	for _, f := range n.ports.byHosts[linkKey{a, b}] {
		n.syncFlowLocked(f)
	}
	for _, f := range n.ports.byHosts[linkKey{b, a}] {
		n.syncFlowLocked(f)
	}
}

// syncHostFlowsLocked brings every flow from or to host in step.
func (n *Network) syncHostFlowsLocked(host string) {
	for k, fs := range n.ports.byHosts {
		if k.from == host || k.to == host {
			for _, f := range fs {
				n.syncFlowLocked(f)
			}
		}
	}
}

// healPortsLocked lifts every CutPort, leaving holds.
func (n *Network) healPortsLocked() {
	if len(n.ports.cut) == 0 {
		return
	}
	cut := n.ports.cut
	n.ports.cut = map[flowKey]bool{}
	for k := range cut {
		if f := n.ports.flows[k]; f != nil {
			n.syncFlowLocked(f)
		}
	}
}

// syncFlowLocked sets f's links from the host links and the flow's rules.
func (n *Network) syncFlowLocked(f *flow) {
	k := f.key
	blocked := n.ports.cut[k] || n.ports.held[k] > 0 || n.ports.heldHost[k.from] > 0 || n.ports.heldHost[k.to.Host] > 0
	for _, d := range []struct {
		fl   *link
		host *link
	}{{f.ab, n.linkLocked(k.from, k.to.Host)}, {f.ba, n.linkLocked(k.to.Host, k.from)}} {
		d.fl.setCut(blocked || d.host.held() != 0)
		d.fl.delayNS.Store(int64(d.host.latency()))
	}
}
