package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/podsafe/podsafe/cluster"
)

// Partitions of the control plane. Each cuts links between members (raft,
// store forwarding and member-to-member HTTP alike, since they share a host)
// and heals exactly the links it cut. Clients and components keep reaching
// every member's API: a request sent to the wrong side must stall or fail,
// never succeed stale.
func init() {
	register("partition", isolateLeader{}, isolateOne{}, halves{}, majorityMinority{}, bridge{}, ring{},
		oneWayMember{}, apiStore{})
}

// isolateLeader cuts the current raft leader from every other member. Clients
// keep reaching it: reads and writes sent there must stall or fail, never
// succeed stale.
type isolateLeader struct{}

func (isolateLeader) Name() string { return "isolate-leader" }
func (isolateLeader) Describe() string {
	return "cut the raft leader from the other control-plane members (clients still reach it)"
}
func (isolateLeader) Available(c *cluster.Cluster) bool { return c.Members() > 1 }
func (isolateLeader) Inject(ctx context.Context, c *cluster.Cluster, rng *rand.Rand) (Injection, error) {
	return isolateMember(c, leaderOrAny(c, rng), "isolate leader")
}

// isolateOne cuts one random member from the others.
type isolateOne struct{}

func (isolateOne) Name() string { return "isolate-one" }
func (isolateOne) Describe() string {
	return "cut one random control-plane member from the others (clients still reach it)"
}
func (isolateOne) Available(c *cluster.Cluster) bool { return c.Members() > 1 }
func (isolateOne) Inject(ctx context.Context, c *cluster.Cluster, rng *rand.Rand) (Injection, error) {
	return isolateMember(c, rng.IntN(c.Members()), "isolate member")
}

func isolateMember(c *cluster.Cluster, i int, what string) (Injection, error) {
	hosts := c.MemberHosts()
	target := hosts[i]
	rest := slices.DeleteFunc(slices.Clone(hosts), func(h string) bool { return h == target })
	return partitionHosts(c, fmt.Sprintf("%s %s", what, target), []string{target}, rest), nil
}

// leaderOrAny is the leader's index, or a random member while none is known.
func leaderOrAny(c *cluster.Cluster, rng *rand.Rand) int {
	if l := c.LeaderIndex(); l >= 0 {
		return l
	}
	return rng.IntN(c.Members())
}

// halves splits the members into a random majority and minority.
type halves struct{}

func (halves) Name() string { return "halves" }
func (halves) Describe() string {
	return "split the control-plane members into a random majority and minority"
}
func (halves) Available(c *cluster.Cluster) bool { return c.Members() > 2 }
func (halves) Inject(ctx context.Context, c *cluster.Cluster, rng *rand.Rand) (Injection, error) {
	hosts := shuffled(c.MemberHosts(), rng)
	minority := hosts[:len(hosts)/2]
	majority := hosts[len(hosts)/2:]
	desc := fmt.Sprintf("halves %s | %s", strings.Join(minority, ","), strings.Join(majority, ","))
	return partitionHosts(c, desc, minority, majority), nil
}

// majorityMinority puts the leader in the minority, with as many followers
// as a minority holds: the old leader keeps followers to talk to (and, with
// stale reads planted, to serve stale data with) while the majority elects a
// new leader.
type majorityMinority struct{}

func (majorityMinority) Name() string { return "majority-minority" }
func (majorityMinority) Describe() string {
	return "split the control-plane members into a majority and a minority that holds the raft leader"
}
func (majorityMinority) Available(c *cluster.Cluster) bool { return c.Members() > 2 }
func (majorityMinority) Inject(ctx context.Context, c *cluster.Cluster, rng *rand.Rand) (Injection, error) {
	hosts := c.MemberHosts()
	leader := hosts[leaderOrAny(c, rng)]
	others := shuffled(slices.DeleteFunc(slices.Clone(hosts), func(h string) bool { return h == leader }), rng)
	k := len(hosts)/2 - 1 // followers that join the leader's minority
	minority := append([]string{leader}, others[:k]...)
	majority := others[k:]
	desc := fmt.Sprintf("minority %s (leader %s) | majority %s", strings.Join(minority, ","), leader, strings.Join(majority, ","))
	return partitionHosts(c, desc, minority, majority), nil
}

// bridge is Jepsen's bridge: two halves cut from each other, and one member
// in neither that reaches both, so each side may see it as part of its
// majority.
type bridge struct{}

func (bridge) Name() string { return "bridge" }
func (bridge) Describe() string {
	return "cut the control plane into two halves joined by one member that reaches both"
}
func (bridge) Available(c *cluster.Cluster) bool { return c.Members() > 2 }
func (bridge) Inject(ctx context.Context, c *cluster.Cluster, rng *rand.Rand) (Injection, error) {
	hosts := shuffled(c.MemberHosts(), rng)
	mid := len(hosts) / 2
	a, via, b := hosts[:mid], hosts[mid], hosts[mid+1:]
	inj := partitionHosts(c, fmt.Sprintf("bridge %s | %s | %s", strings.Join(a, ","), via, strings.Join(b, ",")), a, b)
	inj.Targets = c.MemberHosts()
	return inj, nil
}

// ring arranges the members in a random ring and lets each reach only its
// two neighbours: with five members every member sees a majority (itself and
// its neighbours), but no two members see the same one.
type ring struct{}

func (ring) Name() string { return "ring" }
func (ring) Describe() string {
	return "let each control-plane member reach only its two neighbours in a random ring (5 members)"
}

// Available needs five members: in a ring of three every member neighbours
// both others and nothing is cut.
func (ring) Available(c *cluster.Cluster) bool { return c.Members() >= 5 }
func (ring) Inject(ctx context.Context, c *cluster.Cluster, rng *rand.Rand) (Injection, error) {
	hosts := shuffled(c.MemberHosts(), rng)
	n := len(hosts)
	var links [][2]string
	for i := range hosts {
		for j := range hosts {
			if d := (j - i + n) % n; d > 1 && d < n-1 {
				links = append(links, [2]string{hosts[i], hosts[j]})
			}
		}
	}
	return cutLinks(c, "ring "+strings.Join(hosts, "-"), c.MemberHosts(), links), nil
}

// oneWayMember cuts one direction only between a member and the others:
// either they never hear it (a leader whose heartbeats are lost, so the
// others elect a new one) or it never hears them. Open connections carry the
// other direction until simnet's detection timeout fails them; new dials
// need both directions (see oneWayNode).
type oneWayMember struct{}

func (oneWayMember) Name() string { return "one-way-member" }
func (oneWayMember) Describe() string {
	return "cut one direction only between a random control-plane member and the others"
}
func (oneWayMember) Available(c *cluster.Cluster) bool { return c.Members() > 1 }
func (oneWayMember) Inject(ctx context.Context, c *cluster.Cluster, rng *rand.Rand) (Injection, error) {
	hosts := c.MemberHosts()
	target := hosts[rng.IntN(len(hosts))]
	outbound := rng.IntN(2) == 0
	var links [][2]string
	for _, h := range hosts {
		if h == target {
			continue
		}
		if outbound {
			links = append(links, [2]string{target, h})
		} else {
			links = append(links, [2]string{h, target})
		}
	}
	desc := fmt.Sprintf("cut %s -> other members", target)
	if !outbound {
		desc = fmt.Sprintf("cut other members -> %s", target)
	}
	return cutLinks(c, desc, []string{target}, links), nil
}

// apiStore cuts a member's API server from the store while its raft member
// stays in the cluster. The API server and the raft member share the host
// cp-i, and the API reaches the store in-process: a follower's store serves
// the API's reads and writes by forwarding them to the leader over the
// forward port. So the fault cuts, port by port, the flows from cp-i to every
// other member's forward port, and leaves the raft port open: the member's
// replica keeps up (and its watches keep flowing from it), while every read
// and write sent to its API stalls and fails. It picks a follower; should the
// member become leader during the fault, its API reaches its own store again,
// as an API server co-located with the etcd leader would.
type apiStore struct{}

func (apiStore) Name() string { return "api-store" }
func (apiStore) Describe() string {
	return "cut one member's API server from the raft peers (its store forwarding) while its raft member keeps replicating"
}
func (apiStore) Available(c *cluster.Cluster) bool { return c.Members() > 1 }
func (apiStore) Inject(ctx context.Context, c *cluster.Cluster, rng *rand.Rand) (Injection, error) {
	hosts := c.MemberHosts()
	leader := c.LeaderIndex()
	var followers []int
	for i := range hosts {
		if i != leader {
			followers = append(followers, i)
		}
	}
	target := hosts[followers[rng.IntN(len(followers))]]
	net := c.Network()
	var cut []string
	for _, h := range hosts {
		if h == target {
			continue
		}
		addr := h + ":" + cluster.ForwardPort
		if err := net.CutPort(target, addr); err != nil {
			return Injection{}, err
		}
		cut = append(cut, addr)
	}
	return Injection{
		Description: fmt.Sprintf("cut the API of %s from the store (forwarding to %s)", target, strings.Join(cut, ",")),
		Targets:     []string{target},
		Heal: func() error {
			var err error
			for _, addr := range cut {
				if e := net.HealPort(target, addr); e != nil && err == nil {
					err = e
				}
			}
			return err
		},
	}, nil
}

// partitionHosts cuts every link between a and b both ways and returns the
// injection that heals exactly those links.
func partitionHosts(c *cluster.Cluster, desc string, a, b []string) Injection {
	var links [][2]string
	for _, x := range a {
		for _, y := range b {
			links = append(links, [2]string{x, y}, [2]string{y, x})
		}
	}
	return cutLinks(c, desc, append(slices.Clone(a), b...), links)
}

// cutLinks cuts each one-way link (from, to) and returns the injection that
// heals exactly those links.
func cutLinks(c *cluster.Cluster, desc string, targets []string, links [][2]string) Injection {
	net := c.Network()
	for _, l := range links {
		net.Cut(l[0], l[1])
	}
	return Injection{
		Description: desc,
		Targets:     targets,
		Heal: func() error {
			for _, l := range links {
				net.Heal(l[0], l[1])
			}
			return nil
		},
	}
}

// shuffled returns a shuffled copy of s.
func shuffled(s []string, rng *rand.Rand) []string {
	s = slices.Clone(s)
	rng.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
	return s
}
