package nemesis_test

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/history"
	"github.com/podsafe/podsafe/nemesis"
)

// partitionGroup is the "partition" group: every control-plane shape.
var partitionGroup = []string{"api-store", "bridge", "halves", "isolate-leader", "isolate-one", "majority-minority",
	"one-way-member", "ring"}

func TestLookup(t *testing.T) {
	for _, tc := range []struct {
		names   []string
		want    []string
		wantErr string
	}{
		{names: []string{"partition"}, want: partitionGroup},
		{names: []string{"isolate-leader,halves"}, want: []string{"halves", "isolate-leader"}},
		{names: []string{"partition", "halves"}, want: partitionGroup},
		{names: []string{"partition-node, kill-kubelet"}, want: []string{"kill-kubelet", "partition-node"}},
		{names: []string{"pause"}, want: []string{"pause-controller", "pause-kubelet", "pause-scheduler"}},
		{names: []string{"clock"}, want: []string{"clock-jump", "clock-skew", "clock-strobe"}},
		{names: []string{"kill"}, want: []string{"kill-controller", "kill-controllers", "kill-fencing", "kill-kubelet",
			"kill-leader", "kill-member", "kill-scheduler"}},
		{names: []string{"node-partition"}, want: []string{"one-way-node", "partition-node", "partition-node-node", "partition-storage"}},
		{names: []string{"node"}, want: []string{"kill-kubelet", "lose-node", "one-way-node", "partition-node",
			"partition-node-node", "partition-storage", "pause-kubelet"}},
		{names: []string{"none"}, want: nil},
		{names: nil, want: nil},
		{names: []string{"meteor"}, wantErr: `unknown nemesis "meteor"`},
	} {
		t.Run(strings.Join(tc.names, "+"), func(t *testing.T) {
			fs, err := nemesis.Lookup(tc.names...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Lookup(%v) error = %v, want %q", tc.names, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range fs {
				got = append(got, f.Name())
			}
			sort.Strings(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Lookup(%v) (-want +got):\n%s", tc.names, diff)
			}
		})
	}
}

func startCluster(t *testing.T, members int) *cluster.Cluster {
	t.Helper()
	return cluster.StartForTest(t, cluster.Config{Topology: cluster.DefaultTopology(members, 0, 1)})
}

func cutLinks(c *cluster.Cluster) []string {
	var out []string
	for _, r := range c.Network().Rules() {
		if r.Cut {
			out = append(out, r.From+"->"+r.To)
		}
	}
	sort.Strings(out)
	return out
}

func TestPartitionShapes(t *testing.T) {
	c := startCluster(t, 3)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, name := range []string{"isolate-leader", "isolate-one", "halves"} {
		t.Run(name, func(t *testing.T) {
			fs, err := nemesis.Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			if !fs[0].Available(cluster.AsTarget(c)) {
				t.Fatalf("%s not available on 3 members", name)
			}
			leader := c.LeaderIndex()
			inj, err := fs[0].Inject(ctx, cluster.AsTarget(c), rng)
			if err != nil {
				t.Fatal(err)
			}
			cut := cutLinks(c)
			// One member against two: four one-way cuts, always between members.
			if len(cut) != 4 {
				t.Errorf("%s (%s) cut %v, want 4 one-way links", name, inj.Description, cut)
			}
			for _, l := range cut {
				if !strings.HasPrefix(l, "cp-") || !strings.Contains(l, "->cp-") {
					t.Errorf("%s cut a non-member link %s", name, l)
				}
			}
			if name == "isolate-leader" && leader >= 0 && !strings.Contains(inj.Description, cluster.MemberHost(leader)) {
				t.Errorf("isolate-leader isolated %q, leader was %s", inj.Description, cluster.MemberHost(leader))
			}
			if err := inj.Heal(); err != nil {
				t.Fatal(err)
			}
			if got := cutLinks(c); len(got) != 0 {
				t.Errorf("after heal, still cut: %v", got)
			}
			if err := c.WaitLeader(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestNotAvailableOnOneMember(t *testing.T) {
	c := startCluster(t, 1)
	fs, _ := nemesis.Lookup("partition")
	for _, f := range fs {
		if f.Available(cluster.AsTarget(c)) {
			t.Errorf("%s claims to be available on a one-member cluster", f.Name())
		}
	}
}

// The schedule records every fault as a closed interval and heals everything
// when its context ends.
func TestScheduleRecordsIntervals(t *testing.T) {
	c := startCluster(t, 3)
	path := filepath.Join(t.TempDir(), "history.jsonl")
	rec, err := history.Create(path, history.Meta{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	fs, _ := nemesis.Lookup("partition")
	s := &nemesis.Schedule{Faults: fs, Interval: 40 * time.Millisecond, Recorder: rec}
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel()
	if err := s.Run(ctx, cluster.AsTarget(c), rand.New(rand.NewPCG(3, 4))); err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if got := cutLinks(c); len(got) != 0 {
		t.Errorf("faults left after the schedule ended: %v", got)
	}
	if len(s.Active()) != 0 {
		t.Errorf("active faults after the end: %v", s.Active())
	}
	h, err := history.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Nemesis) < 2 {
		t.Fatalf("only %d fault intervals recorded", len(h.Nemesis))
	}
	for _, iv := range h.Nemesis {
		if !iv.Healed {
			t.Errorf("interval %+v was never healed", iv)
		}
		// Every partition records the links it cut, between members, and
		// the member or sides it drew.
		if len(iv.Links) == 0 || len(iv.Params) == 0 {
			t.Errorf("interval %s (%s) records links %v, params %v", iv.Name, iv.Description, iv.Links, iv.Params)
		}
		for _, l := range iv.Links {
			if !strings.HasPrefix(l.From, "cp-") || !strings.HasPrefix(l.To, "cp-") || (l.Port != "" && l.Port != cluster.ForwardPort) {
				t.Errorf("interval %s records link %s, not between members", iv.Name, l)
			}
		}
	}
}

// Every fault has a unique name and a one-line description for `podsafe
// list`.
func TestCatalog(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range nemesis.All() {
		if seen[f.Name()] {
			t.Errorf("fault %s listed twice", f.Name())
		}
		seen[f.Name()] = true
		if d := f.Describe(); d == "" || strings.Contains(d, "\n") {
			t.Errorf("fault %s: description %q, want one line", f.Name(), d)
		}
	}
	if len(seen) < 27 {
		t.Errorf("%d faults registered, want at least 27", len(seen))
	}
}
