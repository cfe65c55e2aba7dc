package checker

import (
	"context"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/podsafe/podsafe/history"
)

const zoneKey = corev1.LabelTopologyZone

// spreadOn is a constraint on key selecting foo=bar.
func spreadOn(key string, skew int32) corev1.TopologySpreadConstraint {
	return corev1.TopologySpreadConstraint{MaxSkew: skew, TopologyKey: key, WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"foo": "bar"}}}
}

// spreadCase is a cluster at t=0, foo=bar pods already running on the
// nodes listed (one entry per pod), and the incoming pod created at 10 s
// and bound by the scheduler at 11 s.
type spreadCase struct {
	nodes []*corev1.Node
	on    []string
	pod   *corev1.Pod
}

func (c spreadCase) history(t *testing.T, target string) *history.History {
	b := newSchedHist(t)
	for _, n := range c.nodes {
		b.node(0, n)
	}
	for i, node := range c.on {
		b.pod(1, onNode(mkPod("default", "old-"+string(rune('a'+i)), "foo", "bar"), node))
	}
	b.pod(10, c.pod)
	b.bind(11, c.pod, target)
	return b.history()
}

func incoming(cs ...corev1.TopologySpreadConstraint) *corev1.Pod {
	p := mkPod("default", "mypod", "foo", "bar")
	p.Spec.TopologySpreadConstraints = cs
	return p
}

func zones(names ...string) []*corev1.Node {
	var out []*corev1.Node
	for i := 0; i+1 < len(names); i += 2 {
		out = append(out, mkNode(names[i], zoneKey, names[i+1]))
	}
	return out
}

// checkSpread runs CheckSpread and compares the verdict; for Illegal it
// also wants evidence naming the pod and containing each of the words.
func checkSpread(t *testing.T, h *history.History, want Verdict, words ...string) Result {
	t.Helper()
	return checkSched(t, CheckSpread(context.Background(), h, Options{}), want, "the pod and its binding", func(ev Evidence) bool {
		return ev.Key == "default/mypod" && len(ev.API) == 1 && ev.API[0].Subresource == "binding"
	}, words...)
}

// TestSpreadWorkedExamples runs TS-E's examples: every node the example
// admits is Ok, every other one Illegal.
func TestSpreadWorkedExamples(t *testing.T) {
	four := zones("node1", "zoneA", "node2", "zoneA", "node3", "zoneB", "node4", "zoneB")
	notInC := incoming(spreadOn(zoneKey, 1))
	notInC.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: zoneKey, Operator: corev1.NodeSelectorOpNotIn, Values: []string{"zoneC"}}}}}}}}
	for _, tc := range []struct {
		name  string
		c     spreadCase
		admit map[string]bool
	}{
		{"one zone constraint", spreadCase{four, []string{"node1", "node2", "node3"}, incoming(spreadOn(zoneKey, 1))},
			map[string]bool{"node3": true, "node4": true}},
		{"zone and node constraints", spreadCase{four, []string{"node1", "node2", "node3"}, incoming(spreadOn(zoneKey, 1), spreadOn(corev1.LabelHostname, 1))},
			map[string]bool{"node4": true}},
		// 3 nodes in 2 zones: zone skew admits only zoneB (node3), node skew
		// only node2: the constraints conflict and nothing is admissible.
		{"conflicting constraints", spreadCase{zones("node1", "zoneA", "node2", "zoneA", "node3", "zoneB"),
			[]string{"node1", "node1", "node1", "node3", "node3"}, incoming(spreadOn(zoneKey, 1), spreadOn(corev1.LabelHostname, 1))},
			map[string]bool{}},
		// 5 nodes in zones A–C, the pod's affinity excludes zoneC (Honor):
		// the minimum is taken over A and B only, so zoneB.
		{"node affinity NotIn zoneC", spreadCase{zones("node1", "zoneA", "node2", "zoneA", "node3", "zoneB", "node4", "zoneB", "node5", "zoneC"),
			[]string{"node1", "node2", "node3"}, notInC},
			map[string]bool{"node3": true, "node4": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, n := range tc.c.nodes {
				want := Illegal
				if tc.admit[n.Name] {
					want = Ok
				}
				if tc.name == "node affinity NotIn zoneC" && n.Name == "node5" {
					// Node affinity's own filter keeps it off zoneC; the
					// spread rule alone would admit it (its count is the
					// minimum, 0) but its domain takes no part in the skew.
					want = Ok
				}
				t.Run(n.Name, func(t *testing.T) {
					checkSpread(t, tc.c.history(t, n.Name), want, "skew", "maxSkew")
				})
			}
		})
	}
}

// TestSpreadSkewArithmetic pins the computation of TS-E's first example.
func TestSpreadSkewArithmetic(t *testing.T) {
	c := spreadCase{zones("node1", "zoneA", "node2", "zoneA", "node3", "zoneB", "node4", "zoneB"), []string{"node1", "node2", "node3"}, incoming(spreadOn(zoneKey, 1))}
	checkSpread(t, c.history(t, "node1"), Illegal, "2 matching pods in topology.kubernetes.io/zone=zoneA + 1 − global minimum 1 = skew 2 > maxSkew 1", "zoneA:2 zoneB:1")
}

func TestSpreadRules(t *testing.T) {
	three := zones("node1", "zoneA", "node2", "zoneB", "node3", "zoneC")
	// TS-5: a node without the key is never a target, whatever the counts.
	t.Run("TS-5 node lacks the key", func(t *testing.T) {
		c := spreadCase{append(zones("node1", "zoneA", "node2", "zoneB"), mkNode("nokey")), nil, incoming(spreadOn(zoneKey, 1))}
		checkSpread(t, c.history(t, "nokey"), Illegal, "lacks topology key")
		checkSpread(t, c.history(t, "node1"), Ok)
	})
	// TS-12: a node that does not exist is no domain.
	t.Run("TS-12 unknown node", func(t *testing.T) {
		c := spreadCase{zones("node1", "zoneA"), nil, incoming(spreadOn(zoneKey, 1))}
		checkSpread(t, c.history(t, "ghost"), Illegal, "does not exist")
	})
	// TS-6: pods of another namespace do not count. A scheduler that
	// counted them would see zoneB full and place the pod in zoneA.
	t.Run("TS-6 other namespaces", func(t *testing.T) {
		c := spreadCase{zones("node1", "zoneA", "node2", "zoneB"), []string{"node1"}, incoming(spreadOn(zoneKey, 1))}
		h := c.history(t, "node1")
		b := &schedHist{t: t, h: *h, rv: len(h.Store)}
		for _, name := range []string{"x", "y", "z"} {
			b.pod(2, onNode(mkPod("other", name, "foo", "bar"), "node2"))
		}
		// Re-sort: the extra pods were written at t=2 with later RVs; the
		// binding must still come last.
		hist := b.history()
		reorderLast(hist, "default", "mypod")
		checkSpread(t, hist, Illegal, "zoneA:1 zoneB:0")
	})
	// TS-7: nodeAffinityPolicy Ignore counts zoneC too (minimum 0).
	t.Run("TS-7 nodeAffinityPolicy Ignore", func(t *testing.T) {
		p := incoming(spreadOn(zoneKey, 1))
		p.Spec.TopologySpreadConstraints[0].NodeAffinityPolicy = ptr.To(corev1.NodeInclusionPolicyIgnore)
		p.Spec.NodeSelector = map[string]string{"disk": "ssd"}
		nodes := zones("node1", "zoneA", "node2", "zoneB")
		nodes[0].Labels["disk"], nodes[1].Labels["disk"] = "ssd", "ssd"
		nodes = append(nodes, mkNode("node3", zoneKey, "zoneC"))
		c := spreadCase{nodes, []string{"node1", "node2"}, p}
		checkSpread(t, c.history(t, "node1"), Illegal, "global minimum 0")
		p2 := p.DeepCopy()
		p2.Spec.TopologySpreadConstraints[0].NodeAffinityPolicy = nil // Honor
		c.pod = p2
		checkSpread(t, c.history(t, "node1"), Ok)
	})
	// TS-8: nodeTaintsPolicy Honor leaves out a tainted node the pod does
	// not tolerate; Ignore (default) keeps it.
	t.Run("TS-8 nodeTaintsPolicy", func(t *testing.T) {
		nodes := zones("node1", "zoneA", "node2", "zoneB", "node3", "zoneC")
		nodes[2].Spec.Taints = []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}}
		p := incoming(spreadOn(zoneKey, 1))
		c := spreadCase{nodes, []string{"node1", "node2"}, p}
		checkSpread(t, c.history(t, "node1"), Illegal, "global minimum 0")
		honor := p.DeepCopy()
		honor.Spec.TopologySpreadConstraints[0].NodeTaintsPolicy = ptr.To(corev1.NodeInclusionPolicyHonor)
		c.pod = honor
		checkSpread(t, c.history(t, "node1"), Ok)
		tolerating := honor.DeepCopy()
		tolerating.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
		c.pod = tolerating
		checkSpread(t, c.history(t, "node1"), Illegal, "global minimum 0")
	})
	// TS-11: pods on a tainted node count.
	t.Run("TS-11 tainted nodes count", func(t *testing.T) {
		nodes := zones("node1", "zoneA", "node2", "zoneB")
		nodes[1].Spec.Taints = []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}}
		c := spreadCase{nodes, []string{"node2", "node2"}, incoming(spreadOn(zoneKey, 1))}
		checkSpread(t, c.history(t, "node1"), Ok)
		c.on = []string{"node1", "node2"}
		checkSpread(t, c.history(t, "node1"), Ok)
		c.on = []string{"node1"}
		checkSpread(t, c.history(t, "node1"), Illegal, "global minimum 0")
	})
	// TS-2 minDomains: with fewer eligible domains than minDomains the
	// global minimum is 0.
	t.Run("TS-2 minDomains", func(t *testing.T) {
		p := incoming(spreadOn(zoneKey, 1))
		c := spreadCase{three[:2], []string{"node1", "node2"}, p}
		checkSpread(t, c.history(t, "node1"), Ok)
		md := p.DeepCopy()
		md.Spec.TopologySpreadConstraints[0].MinDomains = ptr.To(int32(3))
		c.pod = md
		checkSpread(t, c.history(t, "node1"), Illegal, "minDomains 3", "global minimum 0")
	})
	// The pod's own label counts only if its selector matches it.
	t.Run("TS-2 self match", func(t *testing.T) {
		p := incoming(spreadOn(zoneKey, 1))
		p.Labels = map[string]string{"foo": "other"}
		c := spreadCase{three[:2], []string{"node1"}, p}
		checkSpread(t, c.history(t, "node1"), Ok)
	})
	// matchLabelKeys narrows the selector to the pod's own value.
	t.Run("matchLabelKeys", func(t *testing.T) {
		p := incoming(spreadOn(zoneKey, 1))
		p.Labels["rev"] = "2"
		p.Spec.TopologySpreadConstraints[0].MatchLabelKeys = []string{"rev"}
		c := spreadCase{three[:2], []string{"node1"}, p} // old pods lack rev=2
		checkSpread(t, c.history(t, "node1"), Ok)
		p.Spec.TopologySpreadConstraints[0].MatchLabelKeys = nil
		checkSpread(t, c.history(t, "node1"), Illegal)
	})
	// An empty labelSelector counts no pod (the scheduler's rule, as
	// kube-scheduler's), though the incoming pod counts itself: the skew
	// of a zone full of pods is 0 + 1 − 0. With a matchLabelKeys value
	// merged in the selector is no longer empty and pods count again.
	t.Run("empty selector", func(t *testing.T) {
		everything := func(keys ...string) *corev1.Pod {
			p := incoming(corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: zoneKey, WhenUnsatisfiable: corev1.DoNotSchedule,
				LabelSelector: &metav1.LabelSelector{}, MatchLabelKeys: keys})
			p.Labels["rev"] = "2"
			return p
		}
		build := func(p *corev1.Pod, target string) *history.History {
			b := newSchedHist(t)
			for _, n := range append(zones("node1", "zoneA", "node2", "zoneB"), mkNode("nokey")) {
				b.node(0, n)
			}
			b.pod(1, onNode(mkPod("default", "a", "rev", "2"), "node1"))
			b.pod(1, onNode(mkPod("default", "b", "rev", "2"), "node1"))
			b.pod(10, p)
			b.bind(11, p, target)
			return b.history()
		}
		checkSpread(t, build(everything(), "node1"), Ok)
		checkSpread(t, build(everything("rev"), "node1"), Illegal,
			"2 matching pods in topology.kubernetes.io/zone=zoneA + 1 − global minimum 0 = skew 3 > maxSkew 1", "zoneA:2 zoneB:0")
		checkSpread(t, build(everything("rev"), "node2"), Ok)
		checkSpread(t, build(everything(), "nokey"), Illegal, "lacks topology key")
	})
	// Pods being deleted do not count (the scheduler's rule).
	t.Run("terminating pods", func(t *testing.T) {
		c := spreadCase{three[:2], []string{"node2"}, incoming(spreadOn(zoneKey, 1))}
		h := c.history(t, "node2")
		checkSpread(t, h, Illegal)
		b := newSchedHist(t)
		for _, n := range three[:2] {
			b.node(0, n)
		}
		old := onNode(mkPod("default", "old", "foo", "bar"), "node2")
		b.pod(1, old).pod(2, deleting(old)).pod(10, c.pod)
		b.bind(11, c.pod, "node2")
		checkSpread(t, b.history(), Ok)
	})
	// ScheduleAnyway constraints (and so TS-9's defaults) never make a
	// placement illegal.
	t.Run("ScheduleAnyway", func(t *testing.T) {
		soft := spreadOn(zoneKey, 1)
		soft.WhenUnsatisfiable = corev1.ScheduleAnyway
		c := spreadCase{three[:2], []string{"node1", "node1"}, incoming(soft)}
		res := checkSpread(t, c.history(t, "node1"), Ok)
		if res.Stats.Checked != 0 {
			t.Errorf("checked %d bindings, want 0", res.Stats.Checked)
		}
	})
	// A pod placed by someone else than the scheduler is not judged.
	t.Run("not the scheduler's binding", func(t *testing.T) {
		c := spreadCase{three[:2], []string{"node1"}, incoming(spreadOn(zoneKey, 1))}
		h := c.history(t, "node1")
		h.API[0].Identity = "admin"
		if res := checkSpread(t, h, Ok); res.Stats.Ops != 0 {
			t.Errorf("judged %d bindings, want 0", res.Stats.Ops)
		}
	})
}

// reorderLast moves the store events of pod ns/name to the end, giving
// every event fresh RVs in the new order.
func reorderLast(h *history.History, ns, name string) {
	var rest, last []history.StoreEvent
	for _, ev := range h.Store {
		if ev.Namespace == ns && ev.Name == name {
			last = append(last, ev)
		} else {
			rest = append(rest, ev)
		}
	}
	h.Store = append(rest, last...)
	for i := range h.Store {
		h.Store[i].RV = strconv.Itoa(i + 1)
	}
}

// TestSpreadStaleCache: the scheduler decides on a cache that may not have
// seen the latest changes; a placement legal in a state of the last
// schedViewLag is Ok, one only an older state admits is Illegal.
func TestSpreadStaleCache(t *testing.T) {
	build := func(deletedAt float64) *history.History {
		b := newSchedHist(t)
		for _, n := range zones("node1", "zoneA", "node2", "zoneB") {
			b.node(0, n)
		}
		a := onNode(mkPod("default", "a", "foo", "bar"), "node1")
		bp := onNode(mkPod("default", "b", "foo", "bar"), "node2")
		p := incoming(spreadOn(zoneKey, 1))
		b.pod(1, a).pod(1, bp).pod(deletedAt-0.5, p)
		// zoneB's pod starts terminating: from then on zoneB counts 0 and
		// a second pod in zoneA has skew 2.
		b.pod(deletedAt, deleting(bp))
		b.bind(30, p, "node1")
		return b.history()
	}
	t.Run("deletion 1 s before the binding", func(t *testing.T) {
		res := checkSpread(t, build(29), Ok)
		if res.Stats.Checked != 1 || len(res.Figures) != 2 || res.Figures[1].Value != 1 {
			t.Errorf("checked %d, figures %+v; want 1 binding admitted by an earlier state", res.Stats.Checked, res.Figures)
		}
	})
	t.Run("deletion 10 s before the binding", func(t *testing.T) {
		checkSpread(t, build(20), Illegal, "no store state from 24s on")
	})
	t.Run("deletion 10 s before, scheduler paused", func(t *testing.T) {
		h := build(20)
		h.Nemesis = []history.Interval{{Name: "pause-scheduler", Start: schedSec(19), End: schedSec(29), Healed: true}}
		checkSpread(t, h, Ok)
	})
}

// spreadBenchHistory is a synthetic run: 100 nodes in 10 zones, pods in 10
// namespaces with a zone constraint (maxSkew 1), each created, bound by
// the scheduler to a node of its namespace's least-loaded zone, running,
// deleted and gone: five store events per pod, about 1,000 pods live.
func spreadBenchHistory(tb testing.TB, podEvents int) *history.History {
	b := newSchedHist(tb)
	const nodes, zoneCount, namespaces, live = 100, 10, 10, 1000
	for i := range nodes {
		b.node(0, mkNode("node-"+strconv.Itoa(i), zoneKey, "zone-"+strconv.Itoa(i%zoneCount)))
	}
	counts := make([][zoneCount]int, namespaces)
	next := make([]int, zoneCount)
	type livePod struct {
		pod  *corev1.Pod
		zone int
	}
	var running []livePod
	at := 1.0
	tick := func() float64 { at += 0.001; return at }
	for i := 0; len(b.h.Store) < podEvents; i++ {
		ns := i % namespaces
		p := mkPod("ns-"+strconv.Itoa(ns), "p-"+strconv.Itoa(i), "app", "web")
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: zoneKey,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
		b.pod(tick(), p)
		zone := 0
		for z := range zoneCount {
			if counts[ns][z] < counts[ns][zone] {
				zone = z
			}
		}
		node := "node-" + strconv.Itoa(zone+zoneCount*(next[zone]%(nodes/zoneCount)))
		next[zone]++
		bound := b.bind(tick(), p, node)
		counts[ns][zone]++
		run := bound.DeepCopy()
		run.Status.Phase = corev1.PodRunning
		b.pod(tick(), run)
		running = append(running, livePod{run, zone})
		if len(running) > live {
			old := running[0]
			running = running[1:]
			// Taking the oldest pod away keeps every namespace within skew 1:
			// its zone is among the fullest of its namespace.
			b.pod(tick(), deleting(old.pod))
			b.podGone(tick(), old.pod)
			counts[(i-live)%namespaces][old.zone]--
		}
	}
	return b.history()
}

// BenchmarkCheckSpread replays a synthetic history and judges every
// binding; events/s counts store events.
func BenchmarkCheckSpread(b *testing.B) {
	h := spreadBenchHistory(b, 100_000)
	b.ResetTimer()
	for range b.N {
		res := CheckSpread(context.Background(), h, Options{Timeout: time.Hour})
		if res.Verdict != Ok || res.Stats.Checked == 0 {
			b.Fatalf("verdict %s after %d: %s", res.Verdict, res.Stats.Checked, res.Summary)
		}
	}
	b.ReportMetric(float64(len(h.Store))*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

func TestSpreadApplies(t *testing.T) {
	c := spreadCase{zones("node1", "zoneA"), nil, incoming(spreadOn(zoneKey, 1))}
	if !spreadApplies(c.history(t, "node1")) {
		t.Error("a history with a constrained pod does not apply")
	}
	c.pod = mkPod("default", "mypod")
	if spreadApplies(c.history(t, "node1")) {
		t.Error("a history without constraints applies")
	}
}
