package nemesis_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestFakePartitions: each shape cuts exactly the links between the hosts
// of members on different sides, a member being all its hosts (store and
// API server apart), and heals exactly those.
func TestFakePartitions(t *testing.T) {
	f := kubeLike(everything())
	tgt := richTarget{f}
	rng := seeded()
	memberHosts := func(i int) []string { return []string{fmt.Sprintf("etcd-%d", i), fmt.Sprintf("api-%d", i)} }
	others := func(i int) []string {
		var out []string
		for j := range 3 {
			if j != i {
				out = append(out, memberHosts(j)...)
			}
		}
		return out
	}

	t.Run("isolate-leader", func(t *testing.T) {
		inj, calls := fakeInject(t, tgt, f, "isolate-leader", rng)
		if diff := cmp.Diff(sortedLinks(both(memberHosts(1), others(1))), sortedLinks(inj.Links)); diff != "" {
			t.Errorf("isolating leader etcd-1 cut (-want +got):\n%s", diff)
		}
		if inj.Params["member"] != "1" || !slices.Equal(calls, []string{"cut 16"}) {
			t.Errorf("params %v, calls %v; want member 1 and one cut of 16 links", inj.Params, calls)
		}
		if calls := fakeHeal(t, f, inj); !slices.Equal(calls, []string{"heal 16"}) {
			t.Errorf("heal calls %v", calls)
		}
	})

	t.Run("isolate-one", func(t *testing.T) {
		inj, _ := fakeInject(t, tgt, f, "isolate-one", rng)
		i, _ := strconv.Atoi(inj.Params["member"])
		if diff := cmp.Diff(sortedLinks(both(memberHosts(i), others(i))), sortedLinks(inj.Links)); diff != "" {
			t.Errorf("isolating member %d cut (-want +got):\n%s", i, diff)
		}
		fakeHeal(t, f, inj)
	})

	for _, name := range []string{"halves", "majority-minority"} {
		t.Run(name, func(t *testing.T) {
			inj, _ := fakeInject(t, tgt, f, name, rng)
			minority, majority := strings.Split(inj.Params["minority"], ","), strings.Split(inj.Params["majority"], ",")
			if len(minority) != 2 || len(majority) != 4 {
				t.Fatalf("sides %v | %v: want one member (two hosts) against two", minority, majority)
			}
			if name == "majority-minority" && !slices.Equal(minority, memberHosts(1)) {
				t.Errorf("minority %v, want the leader's hosts %v", minority, memberHosts(1))
			}
			if diff := cmp.Diff(sortedLinks(both(minority, majority)), sortedLinks(inj.Links)); diff != "" {
				t.Errorf("cut (-want +got):\n%s", diff)
			}
			fakeHeal(t, f, inj)
		})
	}

	t.Run("one-way-member", func(t *testing.T) {
		inj, _ := fakeInject(t, tgt, f, "one-way-member", rng)
		i, _ := strconv.Atoi(inj.Params["member"])
		for _, l := range inj.Links {
			from, to := slices.Contains(memberHosts(i), l.From), slices.Contains(memberHosts(i), l.To)
			if from == to || (inj.Params["direction"] == "outbound") != from {
				t.Errorf("%s link %s of member %d", inj.Params["direction"], l, i)
			}
		}
		if len(inj.Links) != 8 {
			t.Errorf("cut %d links, want 8 (two hosts to four)", len(inj.Links))
		}
		fakeHeal(t, f, inj)
	})

	t.Run("api-store", func(t *testing.T) {
		inj, calls := fakeInject(t, tgt, f, "api-store", rng)
		i, _ := strconv.Atoi(inj.Params["member"])
		if i == f.leader {
			t.Errorf("api-store cut the leader's API")
		}
		if diff := cmp.Diff(tgt.APIStoreLinks(i), inj.Links); diff != "" || !slices.Equal(calls, []string{"cut 3"}) {
			t.Errorf("api-store of member %d cut (-want +got):\n%s\ncalls %v", i, diff, calls)
		}
		fakeHeal(t, f, inj)
	})

	t.Run("partition-node", func(t *testing.T) {
		inj, _ := fakeInject(t, tgt, f, "partition-node", rng)
		cp := append(append(memberHosts(0), memberHosts(1)...), memberHosts(2)...)
		if diff := cmp.Diff(sortedLinks(both([]string{inj.Params["node"]}, cp)), sortedLinks(inj.Links)); diff != "" {
			t.Errorf("cut (-want +got):\n%s", diff)
		}
		fakeHeal(t, f, inj)
	})

	t.Run("one-way-node", func(t *testing.T) {
		inj, _ := fakeInject(t, tgt, f, "one-way-node", rng)
		if len(inj.Links) != 6 {
			t.Errorf("cut %v, want the node's six links to the control plane one way", inj.Links)
		}
		for _, l := range inj.Links {
			if (inj.Params["direction"] == "outbound") != (l.From == inj.Params["node"]) {
				t.Errorf("%s link %s of node %s", inj.Params["direction"], l, inj.Params["node"])
			}
		}
		fakeHeal(t, f, inj)
	})

	t.Run("partition-node-node", func(t *testing.T) {
		inj, _ := fakeInject(t, tgt, f, "partition-node-node", rng)
		if diff := cmp.Diff([]string{"n0->n1", "n1->n0"}, sortedLinks(inj.Links)); diff != "" {
			t.Errorf("cut (-want +got):\n%s", diff)
		}
		fakeHeal(t, f, inj)
	})

	t.Run("partition-storage", func(t *testing.T) {
		inj, _ := fakeInject(t, tgt, f, "partition-storage", rng)
		if diff := cmp.Diff(sortedLinks(both([]string{inj.Params["node"]}, []string{"nfs"})), sortedLinks(inj.Links)); diff != "" {
			t.Errorf("cut (-want +got):\n%s", diff)
		}
		fakeHeal(t, f, inj)
	})
}
