package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/podsafe/podsafe/target"
)

// Partitions of the control plane. Each cuts links between members (raft,
// store forwarding and member-to-member HTTP alike, since they share a host)
// and heals exactly the links it cut. Clients and components keep reaching
// every member's API: a request sent to the wrong side must stall or fail,
// never succeed stale.
//
// A member is the group of hosts its components run on
// (target.MemberHosts): one host on the embedded cluster, a store host and
// an API server host where they run apart. Shapes are drawn over members
// and cut every link between the hosts of members on different sides.
func init() {
	register("partition", isolateLeader{}, isolateOne{}, halves{}, majorityMinority{}, bridge{}, ring{},
		oneWayMember{}, apiStore{})
}

// needsNetwork is what every partition needs.
var needsNetwork = []target.Capability{target.Network}

// isolateLeader cuts the current raft leader from every other member. Clients
// keep reaching it: reads and writes sent there must stall or fail, never
// succeed stale.
type isolateLeader struct{}

func (isolateLeader) Name() string { return "isolate-leader" }
func (isolateLeader) Describe() string {
	return "cut the raft leader from the other control-plane members (clients still reach it)"
}
func (isolateLeader) Needs() []target.Capability     { return needsNetwork }
func (isolateLeader) Available(t target.Target) bool { return canCutMembers(t, 2) }
func (isolateLeader) Inject(ctx context.Context, t target.Target, rng *rand.Rand) (Injection, error) {
	return isolateMember(ctx, t, leaderOrAny(ctx, t, rng), "isolate leader")
}

// isolateOne cuts one random member from the others.
type isolateOne struct{}

func (isolateOne) Name() string { return "isolate-one" }
func (isolateOne) Describe() string {
	return "cut one random control-plane member from the others (clients still reach it)"
}
func (isolateOne) Needs() []target.Capability     { return needsNetwork }
func (isolateOne) Available(t target.Target) bool { return canCutMembers(t, 2) }
func (isolateOne) Inject(ctx context.Context, t target.Target, rng *rand.Rand) (Injection, error) {
	return isolateMember(ctx, t, rng.IntN(t.Members()), "isolate member")
}

func isolateMember(ctx context.Context, t target.Target, i int, what string) (Injection, error) {
	groups := target.MemberHosts(t)
	iso := groups[i]
	rest := flatten(slices.Delete(slices.Clone(groups), i, i+1))
	return with(map[string]string{"member": member(i)})(
		partitionHosts(ctx, t, fmt.Sprintf("%s %s", what, strings.Join(iso, ",")), iso, rest))
}

// halves splits the members into a random majority and minority.
type halves struct{}

func (halves) Name() string { return "halves" }
func (halves) Describe() string {
	return "split the control-plane members into a random majority and minority"
}
func (halves) Needs() []target.Capability     { return needsNetwork }
func (halves) Available(t target.Target) bool { return canCutMembers(t, 3) }
func (halves) Inject(ctx context.Context, t target.Target, rng *rand.Rand) (Injection, error) {
	groups := shuffled(target.MemberHosts(t), rng)
	minority := flatten(groups[:len(groups)/2])
	majority := flatten(groups[len(groups)/2:])
	desc := fmt.Sprintf("halves %s | %s", strings.Join(minority, ","), strings.Join(majority, ","))
	return with(sides("minority", minority, "majority", majority))(partitionHosts(ctx, t, desc, minority, majority))
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
func (majorityMinority) Needs() []target.Capability     { return needsNetwork }
func (majorityMinority) Available(t target.Target) bool { return canCutMembers(t, 3) }
func (majorityMinority) Inject(ctx context.Context, t target.Target, rng *rand.Rand) (Injection, error) {
	groups := target.MemberHosts(t)
	l := leaderOrAny(ctx, t, rng)
	leaderHosts := groups[l]
	others := shuffled(slices.Delete(slices.Clone(groups), l, l+1), rng)
	k := len(groups)/2 - 1 // followers that join the leader's minority
	minority := flatten(append([][]string{leaderHosts}, others[:k]...))
	majority := flatten(others[k:])
	desc := fmt.Sprintf("minority %s (leader %s) | majority %s", strings.Join(minority, ","), strings.Join(leaderHosts, ","), strings.Join(majority, ","))
	params := sides("minority", minority, "majority", majority)
	params["leader"] = member(l)
	return with(params)(partitionHosts(ctx, t, desc, minority, majority))
}

// bridge is Jepsen's bridge: two halves cut from each other, and one member
// in neither that reaches both, so each side may see it as part of its
// majority.
type bridge struct{}

func (bridge) Name() string { return "bridge" }
func (bridge) Describe() string {
	return "cut the control plane into two halves joined by one member that reaches both"
}
func (bridge) Needs() []target.Capability     { return needsNetwork }
func (bridge) Available(t target.Target) bool { return canCutMembers(t, 3) }
func (bridge) Inject(ctx context.Context, t target.Target, rng *rand.Rand) (Injection, error) {
	groups := shuffled(target.MemberHosts(t), rng)
	mid := len(groups) / 2
	a, via, b := flatten(groups[:mid]), groups[mid], flatten(groups[mid+1:])
	desc := fmt.Sprintf("bridge %s | %s | %s", strings.Join(a, ","), strings.Join(via, ","), strings.Join(b, ","))
	inj, err := partitionHosts(ctx, t, desc, a, b)
	if err != nil {
		return Injection{}, err
	}
	inj.Targets = flatten(target.MemberHosts(t))
	inj.Params = sides("a", a, "b", b)
	inj.Params["bridge"] = strings.Join(via, ",")
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
func (ring) Needs() []target.Capability { return needsNetwork }

// Available needs five members: in a ring of three every member neighbours
// both others and nothing is cut.
func (ring) Available(t target.Target) bool { return canCutMembers(t, 5) }
func (ring) Inject(ctx context.Context, t target.Target, rng *rand.Rand) (Injection, error) {
	groups := shuffled(target.MemberHosts(t), rng)
	n := len(groups)
	var links []target.Link
	for i := range groups {
		for j := range groups {
			if d := (j - i + n) % n; d > 1 && d < n-1 {
				links = append(links, between(groups[i], groups[j])...)
			}
		}
	}
	order := make([]string, n)
	for i, g := range groups {
		order[i] = strings.Join(g, ",")
	}
	return with(map[string]string{"ring": strings.Join(order, "-")})(
		cut(ctx, t, "ring "+strings.Join(order, "-"), flatten(target.MemberHosts(t)), links))
}

// oneWayMember cuts one direction only between a member and the others:
// either they never hear it (a leader whose heartbeats are lost, so the
// others elect a new one) or it never hears them. Open connections carry the
// other direction until the target notices (simnet's detection timeout, TCP
// keep-alives); new dials need both directions (see oneWayNode).
type oneWayMember struct{}

func (oneWayMember) Name() string { return "one-way-member" }
func (oneWayMember) Describe() string {
	return "cut one direction only between a random control-plane member and the others"
}
func (oneWayMember) Needs() []target.Capability     { return needsNetwork }
func (oneWayMember) Available(t target.Target) bool { return canCutMembers(t, 2) }
func (oneWayMember) Inject(ctx context.Context, t target.Target, rng *rand.Rand) (Injection, error) {
	groups := target.MemberHosts(t)
	i := rng.IntN(len(groups))
	hosts := groups[i]
	outbound := rng.IntN(2) == 0
	var links []target.Link
	for j, g := range groups {
		if j == i {
			continue
		}
		if outbound {
			links = append(links, between(hosts, g)...)
		} else {
			links = append(links, between(g, hosts)...)
		}
	}
	name := strings.Join(hosts, ",")
	desc := fmt.Sprintf("cut %s -> other members", name)
	dir := "outbound"
	if !outbound {
		desc = fmt.Sprintf("cut other members -> %s", name)
		dir = "inbound"
	}
	return with(map[string]string{"member": member(i), "direction": dir})(cut(ctx, t, desc, hosts, links))
}

// apiStore cuts a member's API server from the store while its store member
// stays in the cluster: the target says which links carry that traffic
// (target.APIStore). On the embedded cluster the API server and the raft
// member share the host cp-i and the API reaches the store in-process: a
// follower's store serves the API's reads and writes by forwarding them to
// the leader over the forward port, so the links are the flows from cp-i to
// every other member's forward port, and the raft port stays open: the
// member's replica keeps up (and its watches keep flowing from it), while
// every read and write sent to its API stalls and fails. It picks a
// follower; should the member become leader during the fault, its API
// reaches its own store again, as an API server co-located with the etcd
// leader would.
type apiStore struct{}

func (apiStore) Name() string { return "api-store" }
func (apiStore) Describe() string {
	return "cut one member's API server from the raft peers (its store forwarding) while its raft member keeps replicating"
}
func (apiStore) Needs() []target.Capability { return needsNetwork }
func (apiStore) Available(t target.Target) bool {
	_, ok := t.(target.APIStore)
	return ok && canCutMembers(t, 2)
}
func (apiStore) Inject(ctx context.Context, t target.Target, rng *rand.Rand) (Injection, error) {
	as, ok := t.(target.APIStore)
	if !ok {
		return Injection{}, fmt.Errorf("api-store: %w", target.ErrUnsupported)
	}
	l := leader(ctx, t)
	// A follower whose API server reaches the store over the network (a
	// member may have no API server of its own).
	var followers []int
	for i := range t.Members() {
		if i != l && len(as.APIStoreLinks(i)) > 0 {
			followers = append(followers, i)
		}
	}
	if len(followers) == 0 {
		return Injection{}, fmt.Errorf("api-store: no follower's API server reaches the store over links that can be cut")
	}
	i := followers[rng.IntN(len(followers))]
	links := as.APIStoreLinks(i)
	var from, to []string
	for _, k := range links {
		if !slices.Contains(from, k.From) {
			from = append(from, k.From)
		}
		dst := k.To
		if k.Port != "" {
			dst += ":" + k.Port
		}
		to = append(to, dst)
	}
	desc := fmt.Sprintf("cut the API of %s from the store (to %s)", strings.Join(from, ","), strings.Join(to, ","))
	return with(map[string]string{"member": member(i)})(cut(ctx, t, desc, from, links))
}

// with sets the Params of a successful injection.
func with(params map[string]string) func(Injection, error) (Injection, error) {
	return func(inj Injection, err error) (Injection, error) {
		if err != nil {
			return Injection{}, err
		}
		inj.Params = params
		return inj, nil
	}
}

// sides renders the two sides of a partition for Params.
func sides(an string, a []string, bn string, b []string) map[string]string {
	return map[string]string{an: strings.Join(a, ","), bn: strings.Join(b, ",")}
}

// between is every link from a host of from to a host of to.
func between(from, to []string) []target.Link {
	var out []target.Link
	for _, x := range from {
		for _, y := range to {
			out = append(out, target.Link{From: x, To: y})
		}
	}
	return out
}

// partitionHosts cuts every link between a and b both ways and returns the
// injection that heals exactly those links.
func partitionHosts(ctx context.Context, t target.Target, desc string, a, b []string) (Injection, error) {
	var links []target.Link
	for _, x := range a {
		for _, y := range b {
			links = append(links, target.Link{From: x, To: y}, target.Link{From: y, To: x})
		}
	}
	return cut(ctx, t, desc, append(slices.Clone(a), b...), links)
}

// cut cuts links through t's Networker and returns the injection that heals
// exactly those links.
func cut(ctx context.Context, t target.Target, desc string, targets []string, links []target.Link) (Injection, error) {
	net, ok := t.(target.Networker)
	if !ok {
		return Injection{}, fmt.Errorf("%s: %w", desc, target.ErrUnsupported)
	}
	heal, err := net.Cut(ctx, links)
	if err != nil {
		return Injection{}, fmt.Errorf("%s: %w", desc, err)
	}
	return Injection{Description: desc, Targets: targets, Links: links, Heal: heal}, nil
}

// shuffled returns a shuffled copy of s.
func shuffled[T any](s []T, rng *rand.Rand) []T {
	s = slices.Clone(s)
	rng.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
	return s
}
