package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/podsafe/podsafe/cluster"
)

func init() {
	register("partition", isolateLeader{}, isolateOne{}, halves{})
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
	l := c.LeaderIndex()
	if l < 0 {
		l = rng.IntN(c.Members())
	}
	return isolateMember(c, l, "isolate leader")
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
	var rest []string
	for _, h := range hosts {
		if h != target {
			rest = append(rest, h)
		}
	}
	return partitionHosts(c, fmt.Sprintf("%s %s", what, target), []string{target}, rest), nil
}

// halves splits the members into a random majority and minority.
type halves struct{}

func (halves) Name() string { return "halves" }
func (halves) Describe() string {
	return "split the control-plane members into a random majority and minority"
}
func (halves) Available(c *cluster.Cluster) bool { return c.Members() > 2 }
func (halves) Inject(ctx context.Context, c *cluster.Cluster, rng *rand.Rand) (Injection, error) {
	hosts := c.MemberHosts()
	rng.Shuffle(len(hosts), func(i, j int) { hosts[i], hosts[j] = hosts[j], hosts[i] })
	minority := hosts[:len(hosts)/2]
	majority := hosts[len(hosts)/2:]
	desc := fmt.Sprintf("halves %s | %s", strings.Join(minority, ","), strings.Join(majority, ","))
	return partitionHosts(c, desc, minority, majority), nil
}

// partitionHosts cuts every link between a and b both ways and returns the
// injection that heals exactly those links.
func partitionHosts(c *cluster.Cluster, desc string, a, b []string) Injection {
	net := c.Network()
	for _, x := range a {
		for _, y := range b {
			net.CutBoth(x, y)
		}
	}
	targets := append(append([]string{}, a...), b...)
	return Injection{
		Description: desc,
		Targets:     targets,
		Heal: func() error {
			for _, x := range a {
				for _, y := range b {
					net.Heal(x, y)
					net.Heal(y, x)
				}
			}
			return nil
		},
	}
}
