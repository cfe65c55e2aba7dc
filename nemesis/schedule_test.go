package nemesis_test

import (
	"context"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/history"
	"github.com/podsafe/podsafe/nemesis"
)

// TestScheduleComposesFaults: a schedule of several named faults, as
// `--nemesis a,b,c` gives it, injects each of them, records each as a
// healed interval, and leaves nothing in force when it ends.
func TestScheduleComposesFaults(t *testing.T) {
	c := startNodes(t, 3, 2, durable(t), withScheduler, withControllers)
	names := []string{"partition-node", "kill-kubelet", "pause-kubelet", "clock-skew", "api-store", "kill-member",
		"pause-controller", "lose-node", "clock-strobe", "partition-storage"}
	fs, err := nemesis.Lookup(strings.Join(names, ","))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "history.jsonl")
	rec, err := history.Create(path, history.Meta{Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	s := &nemesis.Schedule{Faults: fs, Interval: 40 * time.Millisecond, Recorder: rec}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, cluster.AsTarget(c), rand.New(rand.NewPCG(5, 6))) }()
	eventually(t, "every fault injected", 60*time.Second, func() bool {
		counts := s.Counts()
		for _, n := range names {
			if counts[n] == 0 {
				return false
			}
		}
		return true
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("injections: %v", s.Counts())

	// Nothing is left in force.
	if got := cutLinks(c); len(got) != 0 {
		t.Errorf("links still cut: %v", got)
	}
	if got := c.Network().PortRules(); len(got) != 0 {
		t.Errorf("port rules left: %v", got)
	}
	if got := c.PausedComponents(); len(got) != 0 {
		t.Errorf("still paused: %v", got)
	}
	if len(s.Active()) != 0 {
		t.Errorf("active faults after the end: %v", s.Active())
	}
	for _, comp := range c.ClockComponents() {
		if off := c.ComponentClock(comp).Offset(); off != 0 {
			t.Errorf("clock of %s still off by %s", comp, off)
		}
	}
	for i := range c.Members() {
		if !c.MemberUp(i) {
			t.Errorf("member %d still down", i)
		}
	}
	for _, n := range []string{"node-0", "node-1"} {
		if c.PoweredOff(n) || !c.KubeletRunning(n) {
			t.Errorf("%s: powered off %v, kubelet running %v", n, c.PoweredOff(n), c.KubeletRunning(n))
		}
	}
	if diff := cmp.Diff(slices.Sorted(slices.Values(cluster.ControllerNames)), c.RunningControllers()); diff != "" {
		t.Errorf("running controllers (-want +got):\n%s", diff)
	}

	// Every injection is a healed interval of one of the named faults.
	h, err := history.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[string]bool{}
	for _, iv := range h.Nemesis {
		recorded[iv.Name] = true
		if !iv.Healed {
			t.Errorf("interval %+v was never healed", iv)
		}
		checkStructured(t, iv)
	}
	if diff := cmp.Diff(slices.Sorted(slices.Values(names)), slices.Sorted(maps.Keys(recorded))); diff != "" {
		t.Errorf("recorded faults (-want +got):\n%s", diff)
	}
	if len(h.Nemesis) != s.Injected() {
		t.Errorf("%d intervals recorded for %d injections", len(h.Nemesis), s.Injected())
	}
	// The schedule's fault time covers the recorded intervals' union (a
	// run waits on it for the convergence checker, which reads the
	// intervals), and no more than the history's span.
	var union, coveredTo int64
	for _, iv := range h.Nemesis {
		if start := max(iv.Start, coveredTo); iv.End > start {
			union += iv.End - start
			coveredTo = iv.End
		}
	}
	if ft := s.FaultTime(); ft < time.Duration(union) || ft > time.Duration(h.End) {
		t.Errorf("fault time %s, want between the intervals' union %s and the history's span %s", ft, time.Duration(union), time.Duration(h.End))
	}

	// The cluster settles: a leader, and every node Ready again.
	cs := admin(t, c)
	eventually(t, "every node Ready", 60*time.Second, func() bool {
		nodes, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		ready := 0
		for _, n := range nodes.Items {
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready == 2
	})
}

// checkStructured checks the structured record of one interval of the
// embedded cluster: what a fault of its kind cut or acted on.
func checkStructured(t *testing.T, iv history.Interval) {
	t.Helper()
	switch iv.Name {
	case "partition-node", "partition-storage":
		node := iv.Params["node"]
		if node == "" || len(iv.Links) == 0 {
			t.Errorf("%s (%s): params %v, links %v; want the node and the links cut", iv.Name, iv.Description, iv.Params, iv.Links)
		}
		for _, l := range iv.Links {
			if l.From != node && l.To != node {
				t.Errorf("%s of %s records link %s", iv.Name, node, l)
			}
			if iv.Name == "partition-storage" && l.From != cluster.StorageHost && l.To != cluster.StorageHost {
				t.Errorf("partition-storage records link %s, not to the storage", l)
			}
		}
	case "api-store":
		member := cluster.MemberHost(atoi(t, iv.Params["member"]))
		if len(iv.Links) != 2 {
			t.Errorf("api-store records links %v, want the member's two forwarding flows", iv.Links)
		}
		for _, l := range iv.Links {
			if l.From != member || l.Port != cluster.ForwardPort {
				t.Errorf("api-store of %s records link %s, want a flow from it to a forward port", member, l)
			}
		}
	case "kill-member":
		if want := cluster.MemberHost(atoi(t, iv.Params["member"])); !slices.Equal(iv.Components, []string{want}) {
			t.Errorf("kill-member records components %v, params %v", iv.Components, iv.Params)
		}
	case "kill-kubelet", "pause-kubelet":
		if want := cluster.KubeletComponent(iv.Params["node"]); !slices.Equal(iv.Components, []string{want}) {
			t.Errorf("%s records components %v, params %v", iv.Name, iv.Components, iv.Params)
		}
	case "pause-controller":
		if !slices.Equal(iv.Components, []string{cluster.ComponentControllerManager}) {
			t.Errorf("pause-controller records components %v", iv.Components)
		}
	case "clock-skew", "clock-strobe":
		if len(iv.Components) != 1 || iv.Params["offset"] == "" {
			t.Errorf("%s records components %v, params %v", iv.Name, iv.Components, iv.Params)
		}
	case "lose-node":
		if !slices.Equal(iv.Targets, []string{iv.Params["node"]}) || !slices.Equal(iv.Components, []string{cluster.KubeletComponent(iv.Params["node"])}) {
			t.Errorf("lose-node records targets %v, components %v, params %v", iv.Targets, iv.Components, iv.Params)
		}
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	i, err := strconv.Atoi(s)
	if err != nil {
		t.Errorf("%q is not a member index", s)
	}
	return i
}
