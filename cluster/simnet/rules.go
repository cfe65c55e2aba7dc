package simnet

import (
	"cmp"
	"fmt"
	"slices"
	"sync/atomic"
	"time"
)

// linkKey names one direction between two hosts.
type linkKey struct{ from, to string }

// link is the state of one direction between two hosts. Connections read it
// on every operation without the Network's lock, so the fields they read are
// atomic; they change only under Network.mu.
type link struct {
	// state is gen<<1 | cut. gen counts the cuts so far, so bytes written
	// during one cut stay held until that cut heals even if the link is cut
	// again before they are read.
	state   atomic.Uint64
	delayNS atomic.Int64

	since time.Time // when the rule on this link last changed; guarded by Network.mu
}

// held returns the generation of the cut in force, or 0 if the link is up.
func (l *link) held() uint64 {
	if s := l.state.Load(); s&1 == 1 {
		return s >> 1
	}
	return 0
}

func (l *link) latency() time.Duration { return time.Duration(l.delayNS.Load()) }

// setCut reports whether the state changed.
func (l *link) setCut(cut bool) bool {
	s := l.state.Load()
	if (s&1 == 1) == cut {
		return false
	}
	if cut {
		l.state.Store((s>>1+1)<<1 | 1)
	} else {
		l.state.Store(s &^ 1)
	}
	return true
}

// Rule is one active rule on one direction between two hosts, as reported by
// Network.Rules.
type Rule struct {
	From, To string
	// Cut means bytes From->To are blackholed.
	Cut bool
	// Delay is the added one-way latency From->To.
	Delay time.Duration
	// Since is when the rule on this direction last changed (wall time).
	Since time.Time
}

// String renders the rule for logs, such as "cp-0->cp-1 cut" or
// "cp-0->cp-1 delay=50ms".
func (r Rule) String() string {
	s := r.From + "->" + r.To
	if r.Cut {
		s += " cut"
	}
	if r.Delay > 0 {
		s += fmt.Sprintf(" delay=%s", r.Delay)
	}
	return s
}

// Cut blackholes bytes flowing from one host to another: they are buffered,
// not delivered, and connections between the two fail after the detection
// timeout. Dials between the two stall in both directions, since a handshake
// needs both. Cutting a host from itself does nothing. Safe for concurrent use.
func (n *Network) Cut(from, to string) {
	n.update("cut", func() { n.setCutLocked(from, to, true) }, from, to)
}

// CutLinks cuts every link from l[0] to l[1] in one change of the rules, and
// HealLinks heals them: the open connections are looked at once, not once per
// link, which is what lets a whole zone of thousands of nodes be cut from
// the control plane at once (a change per link costs a pass over every
// connection, with the network's lock held). Safe for concurrent use.
func (n *Network) CutLinks(links [][2]string) {
	n.update("cut links", func() {
		for _, l := range links {
			n.setCutLocked(l[0], l[1], true)
		}
	}, len(links))
}

// HealLinks removes the cuts CutLinks made (see Heal). Safe for concurrent use.
func (n *Network) HealLinks(links [][2]string) {
	n.update("heal links", func() {
		for _, l := range links {
			n.setCutLocked(l[0], l[1], false)
		}
	}, len(links))
}

// CutBoth cuts both directions between a and b. Safe for concurrent use.
func (n *Network) CutBoth(a, b string) {
	n.update("cut both", func() {
		n.setCutLocked(a, b, true)
		n.setCutLocked(b, a, true)
	}, a, b)
}

// Heal removes the cut from one host to another; buffered bytes flow again on
// connections that have not yet failed. Safe for concurrent use.
func (n *Network) Heal(from, to string) {
	n.update("heal", func() { n.setCutLocked(from, to, false) }, from, to)
}

// HealAll removes every cut, port cuts included; delays stay (see Delay and
// Reset), and so do fences and holds. Safe for concurrent use.
func (n *Network) HealAll() {
	n.update("heal all", func() {
		for k := range n.links {
			n.setCutLocked(k.from, k.to, false)
		}
		n.healPortsLocked()
	})
}

// Reset removes every rule, cuts, port cuts and delays, but not fences and
// holds. Safe for concurrent use.
func (n *Network) Reset() {
	n.update("reset", func() {
		for k := range n.links {
			n.setCutLocked(k.from, k.to, false)
			n.setDelayLocked(k.from, k.to, 0)
		}
		n.healPortsLocked()
	})
}

// Delay adds one-way latency d to bytes sent from one host to another,
// including the handshake of new dials; 0 removes it. Bytes already sent keep
// the latency they were sent with, and order is always preserved. Safe for
// concurrent use.
func (n *Network) Delay(from, to string, d time.Duration) {
	n.update("delay", func() { n.setDelayLocked(from, to, d) }, from, to, d.String())
}

// Partition cuts, both ways, every pair of hosts that are in different groups.
// Hosts named in no group keep all their links. It adds to the rules already
// in force; call HealAll first to replace them. Safe for concurrent use.
func (n *Network) Partition(groups ...[]string) {
	n.update("partition", func() {
		for i, g := range groups {
			for _, h := range groups[i+1:] {
				for _, a := range g {
					for _, b := range h {
						n.setCutLocked(a, b, true)
						n.setCutLocked(b, a, true)
					}
				}
			}
		}
	}, fmt.Sprint(groups))
}

// Isolate cuts host from every other host known so far, both ways. A host
// becomes known when it listens, dials or is dialled, appears in a rule, or is
// named to AddHost; hosts that appear later are not cut. Safe for concurrent
// use.
func (n *Network) Isolate(host string) {
	n.update("isolate", func() {
		n.addHostLocked(host)
		for h := range n.hosts {
			n.setCutLocked(host, h, true)
			n.setCutLocked(h, host, true)
		}
	}, host)
}

// FenceHost cuts host from every other host, both ways, including hosts that
// appear later, and keeps it cut: Heal, HealAll, Reset and Partition leave a
// fenced host's links cut until UnfenceHost. This is a network fence (PS-14):
// unlike a nemesis partition, no ordinary heal undoes it. Safe for concurrent
// use.
func (n *Network) FenceHost(host string) {
	n.update("fence", func() {
		n.addHostLocked(host)
		n.fenced[host] = true
		for h := range n.hosts {
			n.setCutLocked(host, h, true)
			n.setCutLocked(h, host, true)
		}
	}, host)
}

// UnfenceHost lifts host's fence: every link to and from host heals (except
// links to other fenced hosts). Safe for concurrent use.
func (n *Network) UnfenceHost(host string) {
	n.update("unfence", func() {
		if !n.fenced[host] {
			return
		}
		delete(n.fenced, host)
		for h := range n.hosts {
			n.setCutLocked(host, h, false)
			n.setCutLocked(h, host, false)
		}
	}, host)
}

// Fenced reports whether host is fenced. Safe for concurrent use.
func (n *Network) Fenced(host string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.fenced[host]
}

// Rules returns a snapshot of the active rules, sorted by From then To. Safe
// for concurrent use.
func (n *Network) Rules() []Rule {
	n.mu.Lock()
	defer n.mu.Unlock()
	var rules []Rule
	for k, l := range n.links {
		r := Rule{From: k.from, To: k.to, Cut: l.held() != 0, Delay: l.latency(), Since: l.since}
		if r.Cut || r.Delay > 0 {
			rules = append(rules, r)
		}
	}
	slices.SortFunc(rules, func(a, b Rule) int {
		return cmp.Or(cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To))
	})
	return rules
}

// update applies a change of rules under the lock, then lets every stalled
// dial and blocked connection re-examine its links.
func (n *Network) update(op string, apply func(), args ...any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	apply()
	close(n.changed)
	n.changed = make(chan struct{})
	for p := range n.pairs {
		n.watchLocked(p)
		p.wake()
	}
	n.log.Debug("network rules changed", "op", op, "args", args)
}

func (n *Network) setCutLocked(from, to string, cut bool) {
	if from == to {
		return
	}
	n.addHostLocked(from)
	n.addHostLocked(to)
	if !cut && (n.fenced[from] || n.fenced[to]) {
		return // a fence outlasts every heal
	}
	l := n.linkLocked(from, to)
	if l.setCut(cut) {
		l.since = time.Now()
		n.syncFlowsLocked(from, to)
	}
}

func (n *Network) setDelayLocked(from, to string, d time.Duration) {
	if from == to {
		return
	}
	d = max(d, 0)
	n.addHostLocked(from)
	n.addHostLocked(to)
	l := n.linkLocked(from, to)
	if l.delayNS.Swap(int64(d)) != int64(d) {
		l.since = time.Now()
		n.syncFlowsLocked(from, to)
	}
}

// linkLocked returns the state of from->to, creating it. A host's link to
// itself is shared and never cut or delayed.
func (n *Network) linkLocked(from, to string) *link {
	k := linkKey{from, to}
	l := n.links[k]
	if l == nil {
		l = &link{}
		n.links[k] = l
	}
	return l
}

// watchLocked starts the detection timer of a connection that a cut now
// crosses, in either direction, and stops it once no cut does: a connection
// fails only after being cut for a whole DetectTimeout.
func (n *Network) watchLocked(p *pair) {
	cut := p.ab.held() != 0 || p.ba.held() != 0
	switch {
	case cut && p.detect == nil:
		gen := p.detectGen
		p.detect = time.AfterFunc(n.opts.DetectTimeout, func() { n.detected(p, gen) })
	case !cut && p.detect != nil:
		p.detect.Stop()
		p.detect = nil
		p.detectGen++
	}
}

// detected fails a connection whose cut outlasted the detection timeout,
// unless it healed or closed in the meantime.
func (n *Network) detected(p *pair, gen uint64) {
	n.mu.Lock()
	if p.done || p.detectGen != gen {
		n.mu.Unlock()
		return
	}
	n.dropLocked(p)
	n.mu.Unlock()
	n.log.Debug("connection failed across a cut", "local", p.a.local.String(), "remote", p.a.remote.String())
	p.fail(errTimedOut)
}
