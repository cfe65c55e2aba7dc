package checker

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podsafe/podsafe/history"
)

const prioNS = "prio"

// smallNode is a node with one CPU.
func smallNode(name string) *corev1.Node {
	n := mkNode(name)
	n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("1")
	return n
}

func prioPod(name string, prio int32, cpu string) *corev1.Pod {
	p := mkPod(prioNS, name, "app", name)
	p.Spec.Priority = &prio
	p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
	return p
}

func nominated(p *corev1.Pod, node string) *corev1.Pod {
	q := p.DeepCopy()
	q.Status.NominatedNodeName = node
	return q
}

// markedPreempted is p as the scheduler's mark leaves it: condition
// DisruptionTarget=True, reason PreemptionByScheduler.
func markedPreempted(p *corev1.Pod) *corev1.Pod {
	q := p.DeepCopy()
	q.Status.Conditions = append(q.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: corev1.PodReasonPreemptionByScheduler, Message: "default-scheduler: preempting to accommodate a higher priority pod"})
	return q
}

// preempted records the scheduler's preemption of victim v at at as it
// writes it: the mark (status patch), the deletion, the Event on v.
func (b *schedHist) preempted(at float64, v *corev1.Pod) {
	b.call(at, identityScheduler, "patch", "pods", "status", v.Namespace, v.Name, history.StatusOK, string(v.UID))
	m := markedPreempted(v)
	b.pod(at+0.005, m)
	b.call(at+0.01, identityScheduler, "delete", "pods", "", v.Namespace, v.Name, history.StatusOK, string(v.UID))
	b.pod(at+0.015, deleting(m))
	b.call(at+0.02, identityScheduler, "create", "events", "", v.Namespace, v.Name+".1a", history.StatusOK, "")
}

// preemptCase is one node n1 (and n2 when set) with a low-priority victim
// running on victimNode from 1 s, a preemptor pending from 10 s, and the
// scheduler's preemption at 10.99 s as it writes it: the victim's mark,
// deletion and Event, then the preemptor's FailedScheduling Event and
// status patch with the nomination (patch), which the store shows when
// the patch succeeded.
type preemptCase struct {
	victim, preemptor *corev1.Pod
	victimNode        string
	n2                *corev1.Node
	others            []*corev1.Pod // bound from 1 s
	patch             history.Status
	nominate          string // the node the patch names; "" for n1
	noPatch           bool
	// n1 replaces the default n1 when set.
	n1 *corev1.Node
	// created is when the preemptor is created (default 10 s); deletedAt,
	// when set, when its deletion begins.
	created, deletedAt float64
	before             func(b *schedHist) // runs after the cluster is set up
}

func (c preemptCase) history(t *testing.T) *history.History {
	b := newSchedHist(t)
	if c.n1 == nil {
		c.n1 = smallNode("n1")
	}
	b.node(0, c.n1)
	if c.n2 != nil {
		b.node(0, c.n2)
	}
	vn := c.victimNode
	if vn == "" {
		vn = "n1"
	}
	v := onNode(c.victim, vn)
	b.pod(1, v)
	for _, o := range c.others {
		b.pod(1, o)
	}
	if c.created == 0 {
		c.created = 10
	}
	p := c.preemptor
	b.pod(c.created, p)
	if c.deletedAt != 0 {
		p = deleting(p)
		b.pod(c.deletedAt, p)
	}
	if c.before != nil {
		c.before(b)
	}
	b.preempted(10.99, v)
	b.call(11.03, identityScheduler, "create", "events", "", p.Namespace, p.Name+".2b", history.StatusOK, "")
	if !c.noPatch {
		status := c.patch
		if status == "" {
			status = history.StatusOK
		}
		b.call(11.04, identityScheduler, "patch", "pods", "status", p.Namespace, p.Name, status, string(p.UID))
		if status == history.StatusOK {
			node := c.nominate
			if node == "" {
				node = "n1"
			}
			b.pod(11.045, nominated(p, node))
		}
	}
	b.podGone(12, v)
	h := b.history()
	h.End = schedSec(60) // the run goes on well after the preemption
	return h
}

// checkPreemption runs CheckPreemption and compares the verdict; for
// Illegal it also wants evidence naming the victim and its deletion and
// containing each of the words.
func checkPreemption(t *testing.T, h *history.History, want Verdict, words ...string) Result {
	t.Helper()
	return checkSched(t, CheckPreemption(context.Background(), h, Options{}), want, "the victim and its deletion", func(ev Evidence) bool {
		return ev.Key == prioNS+"/victim" && len(ev.API) > 0 && ev.API[0].Verb == "delete"
	}, words...)
}

func TestPreemptionRules(t *testing.T) {
	base := func() preemptCase {
		return preemptCase{victim: prioPod("victim", 1000, "800m"), preemptor: prioPod("pre", 3000, "500m")}
	}
	for _, tc := range []struct {
		name  string
		edit  func(c *preemptCase)
		want  Verdict
		words []string
	}{
		{"legal", func(*preemptCase) {}, Ok, nil},
		{"PR-10 equal priority", func(c *preemptCase) { c.victim = prioPod("victim", 3000, "800m") }, Illegal,
			[]string{"PR-10", "priority 3000", "not strictly lower"}},
		{"PR-10 higher priority", func(c *preemptCase) { c.victim = prioPod("victim", 5000, "800m") }, Illegal, []string{"PR-10"}},
		{"PR-10 no preemptor", func(c *preemptCase) { c.noPatch = true }, Illegal, []string{"PR-10", "no pod was nominated to n1"}},
		{"nomination patch failed", func(c *preemptCase) { c.patch = history.StatusFail }, Ok, nil},
		{"nomination patch unknown", func(c *preemptCase) { c.patch = history.StatusUnknown }, Ok, nil},
		{"already nominated, no patch", func(c *preemptCase) {
			c.noPatch = true
			c.before = func(b *schedHist) { b.pod(10.5, nominated(c.preemptor, "n1")) }
		}, Ok, nil},
		{"PR-12 preemptionPolicy Never", func(c *preemptCase) {
			never := corev1.PreemptNever
			c.preemptor.Spec.PreemptionPolicy = &never
		}, Illegal, []string{"PR-12", "preemptionPolicy Never"}},
		{"PR-9 victim on another node", func(c *preemptCase) {
			c.n2 = smallNode("n2")
			c.victimNode = "n2"
			// n1 is full of pods the preemptor cannot remove.
			c.others = []*corev1.Pod{onNode(prioPod("big", 9000, "900m"), "n1")}
		}, Illegal, []string{"PR-9", "on node n2", "pre→n1"}},
		{"PR-8 no room even without lower pods", func(c *preemptCase) { c.preemptor = prioPod("pre", 3000, "1500m") }, Illegal,
			[]string{"PR-8", "requests cpu 1500m"}},
		{"PR-8 higher-priority pods keep the room", func(c *preemptCase) {
			c.victim = prioPod("victim", 1000, "100m")
			c.others = []*corev1.Pod{onNode(prioPod("keeper", 5000, "700m"), "n1")}
		}, Illegal, []string{"PR-8", "use at least cpu 700m"}},
		{"PR-8 untolerated taint", func(c *preemptCase) {
			c.n1 = smallNode("n1")
			c.n1.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
		}, Illegal, []string{"PR-8", "taints"}},
		{"PR-8 cordoned node (UnschedulableAndUnresolvable)", func(c *preemptCase) {
			c.n1 = smallNode("n1")
			c.n1.Spec.Unschedulable = true
		}, Illegal, []string{"PR-8", "cordon"}},
		{"PR-8 node affinity not met (UnschedulableAndUnresolvable)", func(c *preemptCase) {
			c.preemptor.Spec.NodeSelector = map[string]string{"disk": "ssd"}
		}, Illegal, []string{"PR-8", "affinity"}},
		{"PR-8 node affinity met", func(c *preemptCase) {
			c.n1 = smallNode("n1")
			c.n1.Labels["disk"] = "ssd"
			c.preemptor.Spec.NodeSelector = map[string]string{"disk": "ssd"}
		}, Ok, nil},
		{"PR-8 taint tolerated", func(c *preemptCase) {
			c.n1 = smallNode("n1")
			c.n1.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
			c.preemptor.Spec.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}}
		}, Ok, nil},
		{"PR-8 taint added just before", func(c *preemptCase) {
			c.before = func(b *schedHist) {
				n := smallNode("n1")
				n.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
				b.node(10.5, n)
			}
		}, Ok, nil},
		{"PR-4 an empty node had room", func(c *preemptCase) { c.n2 = smallNode("n2") }, Illegal,
			[]string{"PR-4", "fit on node n2 without preemption"}},
		{"PR-4 the other node was full", func(c *preemptCase) {
			c.n2 = smallNode("n2")
			c.others = []*corev1.Pod{onNode(prioPod("big", 9000, "900m"), "n2")}
		}, Ok, nil},
		{"PR-4 the other node was full with a pod's sidecar", func(c *preemptCase) {
			// Counted without its sidecar, big would leave n2 500m free.
			c.n2 = smallNode("n2")
			big := onNode(prioPod("big", 9000, "400m"), "n2")
			always := corev1.ContainerRestartPolicyAlways
			big.Spec.InitContainers = []corev1.Container{{Name: "sidecar", RestartPolicy: &always,
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")}}}}
			c.others = []*corev1.Pod{big}
		}, Ok, nil},
		{"PR-4 the other node was full with a pod's pod-level requests", func(c *preemptCase) {
			c.n2 = smallNode("n2")
			big := onNode(prioPod("big", 9000, "100m"), "n2")
			big.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("900m")}}
			c.others = []*corev1.Pod{big}
		}, Ok, nil},
		{"PR-4 the other node lacks the extended resource", func(c *preemptCase) {
			c.n1 = smallNode("n1")
			c.n1.Status.Allocatable["example.com/gpu"] = resource.MustParse("1")
			c.n2 = smallNode("n2")
			c.preemptor.Spec.Containers[0].Resources.Requests["example.com/gpu"] = resource.MustParse("1")
		}, Ok, nil},
		{"PR-4 the other node had the extended resource free", func(c *preemptCase) {
			c.n1 = smallNode("n1")
			c.n1.Status.Allocatable["example.com/gpu"] = resource.MustParse("1")
			c.n2 = smallNode("n2")
			c.n2.Status.Allocatable["example.com/gpu"] = resource.MustParse("1")
			c.preemptor.Spec.Containers[0].Resources.Requests["example.com/gpu"] = resource.MustParse("1")
		}, Illegal, []string{"PR-4", "fit on node n2 without preemption"}},
		{"PR-8 the victim's node lacks the extended resource", func(c *preemptCase) {
			c.preemptor.Spec.Containers[0].Resources.Requests["example.com/gpu"] = resource.MustParse("1")
		}, Illegal, []string{"PR-8", "example.com/gpu 1"}},
		{"PR-4 the other node filled up just before", func(c *preemptCase) {
			c.n2 = smallNode("n2")
			c.before = func(b *schedHist) { b.pod(10.9, onNode(prioPod("late", 9000, "900m"), "n2")) }
		}, Ok, nil},
		{"PR-4 the other node freed up just before", func(c *preemptCase) {
			// The scheduler may not have seen n2 free yet.
			c.n2 = smallNode("n2")
			big := onNode(prioPod("big", 9000, "900m"), "n2")
			c.others = []*corev1.Pod{big}
			c.before = func(b *schedHist) { b.podGone(10.8, big) }
		}, Ok, nil},
		{"PR-4 the other node is cordoned", func(c *preemptCase) {
			c.n2 = smallNode("n2")
			c.n2.Spec.Unschedulable = true
		}, Ok, nil},
		{"PR-4 not judged with inter-pod terms", func(c *preemptCase) {
			c.n2 = smallNode("n2")
			c.preemptor.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{}}
		}, Ok, nil},
		{"PR-10 preemptor bound long before", func(c *preemptCase) {
			c.created = 1
			c.before = func(b *schedHist) { b.pod(2, onNode(c.preemptor, "n9")) }
		}, Illegal, []string{"PR-10", "pending"}},
		{"PR-10 preemptor deleted long before", func(c *preemptCase) { c.created, c.deletedAt = 1, 2 }, Illegal,
			[]string{"PR-10", "pending"}},
		{"preemptor deleted just before", func(c *preemptCase) { c.deletedAt = 10.5 }, Ok, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.edit(&c)
			res := checkPreemption(t, c.history(t), tc.want, tc.words...)
			if res.Stats.Checked != 1 {
				t.Errorf("judged %d preemptions, want 1", res.Stats.Checked)
			}
		})
	}
}

// TestPreemptionSchedulerCalls judges preemptions as the scheduler now
// writes them: each victim marked (DisruptionTarget), deleted and given
// an Event; a lower nomination to the node cleared; the preemptor's
// FailedScheduling Event, then PodScheduled=False and the nomination in
// one status patch that is conditional on the informer's resourceVersion,
// so it may be refused (409) and sent again after a read; later cycles of
// other pods add their own Events and status patches, and a second
// preemptor preempts on n2 before the first binds. The victims pair with
// their own preemptors: a victim of a priority no pending preemptor
// nominated to its node exceeds is Illegal.
func TestPreemptionSchedulerCalls(t *testing.T) {
	for _, tc := range []struct {
		name string
		// victimPrio and secondPrio are the priorities of the first
		// preemption's victims and of the second preemption's.
		victimPrio, secondPrio int32
		// refused: the first preemptor's status patch is refused and sent
		// again after a read (a refused patch makes its pod a candidate
		// preemptor for every node, as its nomination may have landed).
		refused bool
		want    Verdict
		words   []string
	}{
		{name: "lower-priority victims", victimPrio: 1000, secondPrio: 1000, want: Ok},
		{name: "lower-priority victims, the nomination patch refused once", victimPrio: 1000, secondPrio: 1000, refused: true, want: Ok},
		{name: "PR-10 equal-priority victim of the first preemptor", victimPrio: 3000, secondPrio: 1000, want: Illegal,
			words: []string{"PR-10", "on node n1", "not strictly lower"}},
		{name: "PR-10 the second preemptor's victim outranks it", victimPrio: 1000, secondPrio: 2500, want: Illegal,
			words: []string{"PR-10", "on node n2", "not strictly lower"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newSchedHist(t)
			b.node(0, smallNode("n1"))
			b.node(0, smallNode("n2"))
			v1 := onNode(prioPod("victim", tc.victimPrio, "400m"), "n1")
			v2 := onNode(prioPod("victim2", tc.victimPrio, "400m"), "n1")
			v3 := onNode(prioPod("victim3", tc.secondPrio, "800m"), "n2")
			b.pod(1, v1).pod(1, v2).pod(1, v3)
			pre := prioPod("pre", 3000, "700m")
			pre2 := prioPod("pre2", 2000, "500m")
			low := nominated(prioPod("low", 10, "100m"), "n1")
			other := prioPod("other", 10, "2")
			b.pod(10, pre).pod(10, low).pod(10, other).pod(10, pre2)

			b.preempted(11, v1)
			b.preempted(11.1, v2)
			b.call(11.2, identityScheduler, "patch", "pods", "status", low.Namespace, low.Name, history.StatusOK, string(low.UID))
			b.pod(11.205, prioPod("low", 10, "100m"))
			b.call(11.3, identityScheduler, "create", "events", "", pre.Namespace, pre.Name+".2b", history.StatusOK, "")
			if tc.refused {
				b.call(11.4, identityScheduler, "patch", "pods", "status", pre.Namespace, pre.Name, history.StatusFail, "")
				b.call(11.5, identityScheduler, "get", "pods", "", pre.Namespace, pre.Name, history.StatusOK, string(pre.UID))
			}
			b.call(11.6, identityScheduler, "patch", "pods", "status", pre.Namespace, pre.Name, history.StatusOK, string(pre.UID))
			nom := nominated(pre, "n1")
			nom.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
				Reason: corev1.PodReasonUnschedulable, Message: "0/2 nodes are available: 2 Insufficient cpu."}}
			b.pod(11.605, nom)
			b.call(11.7, identityScheduler, "create", "events", "", other.Namespace, other.Name+".3c", history.StatusOK, "")
			b.call(11.8, identityScheduler, "patch", "pods", "status", other.Namespace, other.Name, history.StatusOK, string(other.UID))

			b.preempted(12, v3)
			b.call(12.1, identityScheduler, "create", "events", "", pre2.Namespace, pre2.Name+".4d", history.StatusOK, "")
			b.call(12.2, identityScheduler, "patch", "pods", "status", pre2.Namespace, pre2.Name, history.StatusOK, string(pre2.UID))
			b.pod(12.205, nominated(pre2, "n2"))
			b.call(12.3, identityScheduler, "create", "events", "", other.Namespace, other.Name+".5e", history.StatusOK, "")
			b.call(12.4, identityScheduler, "patch", "pods", "status", other.Namespace, other.Name, history.StatusOK, string(other.UID))

			b.podGone(13, v1).podGone(13, v2).podGone(13, v3)
			b.bind(14, nom, "n1")
			b.bind(14.1, nominated(pre2, "n2"), "n2")
			h := b.history()
			h.End = schedSec(60)
			res := checkSched(t, CheckPreemption(context.Background(), h, Options{}), tc.want, "a victim's deletion", func(ev Evidence) bool {
				return strings.HasPrefix(ev.Key, prioNS+"/victim") && len(ev.API) > 0 && ev.API[0].Verb == "delete"
			}, tc.words...)
			if res.Stats.Checked != 2 {
				t.Errorf("judged %d preemptions, want 2", res.Stats.Checked)
			}
		})
	}
}

// TestPreemptionCutOff: a preemption with no nomination at all is excused
// when a fault or the end of the run may have stopped the scheduler before
// its patch.
func TestPreemptionCutOff(t *testing.T) {
	c := preemptCase{victim: prioPod("victim", 1000, "800m"), preemptor: prioPod("pre", 3000, "500m"), noPatch: true}
	h := c.history(t)
	checkPreemption(t, h, Illegal, "PR-10", "no preemptor")
	h.Nemesis = []history.Interval{{Name: "kill-scheduler", Start: schedSec(11.01), End: schedSec(13), Healed: true}}
	res := checkPreemption(t, h, Ok)
	if !strings.Contains(res.Summary, "excused") {
		t.Errorf("summary does not say the preemption was excused: %s", res.Summary)
	}
	h.Nemesis = nil
	h.End = schedSec(15)
	checkPreemption(t, h, Ok)
}

// TestPreemptionStaleDeletion: a preemptor whose deletion began 9 s
// before is no pending preemptor; under a scheduler pause it may be.
func TestPreemptionStaleDeletion(t *testing.T) {
	c := preemptCase{victim: prioPod("victim", 1000, "800m"), preemptor: prioPod("pre", 3000, "500m"), created: 1, deletedAt: 2}
	h := c.history(t)
	checkPreemption(t, h, Illegal, "PR-10", "pending")
	h.Nemesis = []history.Interval{{Name: "pause-scheduler", Start: schedSec(1.5), End: schedSec(10.9), Healed: true}}
	checkPreemption(t, h, Ok)
}

// TestPreemptionBatches groups the scheduler's calls as it now writes
// them: each victim's mark, deletion and Event, the cleared nominations,
// the preemptor's FailedScheduling Event and status patch; a later
// cycle's Event and patch, a binding or the next preemption's first call
// ends the batch, a failed mark splits none.
func TestPreemptionBatches(t *testing.T) {
	type call struct {
		verb, resource, sub, name string
		status                    history.Status
	}
	mark := func(v string) []call {
		return []call{{"patch", "pods", "status", v, history.StatusOK}, {"delete", "pods", "", v, history.StatusOK},
			{"create", "events", "", v + ".1a2b", history.StatusOK}}
	}
	failed := func(p string) []call {
		return []call{{"create", "events", "", p + ".3c4d", history.StatusOK}, {"patch", "pods", "status", p, history.StatusOK}}
	}
	seq := func(parts ...[]call) []call {
		var out []call
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	// batch is one batch in brief: its deletions, marks and patches by
	// pod name.
	type batch struct{ Deletes, Marks, Patches []string }
	names := func(cs []history.APICall) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Name)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		calls []call
		want  []batch
	}{
		{
			name:  "one preemption, two victims, a cleared nomination, then later cycles",
			calls: seq(mark("v1"), mark("v2"), []call{{"patch", "pods", "status", "low", history.StatusOK}}, failed("pre"), failed("q"), failed("r")),
			want:  []batch{{Deletes: []string{"v1", "v2"}, Marks: []string{"v1", "v2"}, Patches: []string{"low", "pre"}}},
		},
		{
			name:  "the next preemption starts a batch",
			calls: seq(mark("v1"), failed("pre"), mark("v2"), failed("pre2")),
			want: []batch{{Deletes: []string{"v1"}, Marks: []string{"v1"}, Patches: []string{"pre"}},
				{Deletes: []string{"v2"}, Marks: []string{"v2"}, Patches: []string{"pre2"}}},
		},
		{
			name:  "a binding ends the batch",
			calls: seq(mark("v1"), []call{{"create", "pods", "binding", "q", history.StatusOK}}, failed("pre")),
			want:  []batch{{Deletes: []string{"v1"}, Marks: []string{"v1"}}},
		},
		{
			name: "a failed mark splits nothing",
			calls: seq([]call{{"patch", "pods", "status", "v1", history.StatusFail}}, mark("v2"),
				[]call{{"patch", "pods", "status", "v3", history.StatusFail}}, mark("v4"), failed("pre")),
			want: []batch{{Deletes: []string{"v2", "v4"}, Marks: []string{"v2", "v4"}, Patches: []string{"v3", "pre"}}},
		},
		{
			name:  "a victim already deleted: a deletion without its mark",
			calls: seq([]call{{"delete", "pods", "", "v1", history.StatusOK}, {"create", "events", "", "v1.9", history.StatusOK}}, failed("pre")),
			want:  []batch{{Deletes: []string{"v1"}, Patches: []string{"pre"}}},
		},
		{
			name: "the preemptor's patch refused and sent again",
			calls: seq(mark("v1"), []call{{"create", "events", "", "pre.5", history.StatusOK}, {"patch", "pods", "status", "pre", history.StatusFail},
				{"patch", "pods", "status", "pre", history.StatusOK}}, failed("q")),
			want: []batch{{Deletes: []string{"v1"}, Marks: []string{"v1"}, Patches: []string{"pre", "pre"}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newSchedHist(t)
			at := 1.0
			for _, c := range tc.calls {
				b.call(at, identityScheduler, c.verb, c.resource, c.sub, "ns", c.name, c.status, "")
				at += 0.01
			}
			b.call(at, "admin", "delete", "pods", "", "ns", "x", history.StatusOK, "")
			b.call(at+0.01, identityScheduler, "get", "pods", "", "ns", "y", history.StatusOK, "")
			var got []batch
			list := preemptBatches(b.history())
			for _, pb := range list {
				got = append(got, batch{Deletes: names(pb.deletes), Marks: names(pb.marks), Patches: names(pb.patches)})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("batches (-want +got):\n%s", diff)
			}
			for i, pb := range list {
				// The decision came before the batch's first mark or
				// deletion.
				want := pb.deletes[0]
				if len(pb.marks) > 0 {
					want = pb.marks[0]
				}
				if pb.td != want.Invoke || pb.first.Invoke != want.Invoke {
					t.Errorf("batch %d decided at %d (first call at %d), want its first mark or deletion's invoke %d", i, pb.td, pb.first.Invoke, want.Invoke)
				}
			}
		})
	}
}

func TestPreemptApplies(t *testing.T) {
	c := preemptCase{victim: prioPod("victim", 1000, "800m"), preemptor: prioPod("pre", 3000, "500m")}
	h := c.history(t)
	if !preemptApplies(h) {
		t.Error("a history with a scheduler deletion does not apply")
	}
	if preemptApplies(&history.History{}) {
		t.Error("an empty history applies")
	}
}

// kubeEvent records an Event as kube-scheduler writes it: in the
// events.k8s.io group (its recorder is the events/v1 one), named after the
// pod, a dot and a time in hex.
func (b *schedHist) kubeEvent(at float64, ns, pod, suffix string) {
	b.call(at, identityScheduler, "create", "events", "", ns, pod+"."+suffix, history.StatusOK, "")
	b.h.API[len(b.h.API)-1].Group = "events.k8s.io"
}

// kube-scheduler (v1.37) preempts asynchronously: the scheduling cycle
// records the preemptor's FailedScheduling Event and hands its status patch
// (PodScheduled=False and the nomination) to the API dispatcher, while a
// goroutine started in PostFilter marks, deletes and records an Event on
// each victim (pkg/scheduler/framework/preemption/executor.go,
// prepareCandidateAsync). So the nomination may reach the store after a
// victim's deletion and its Event, and the Events are events.k8s.io ones.
// Such a preemption is the preemptor's, judged Ok, as on the embedded
// scheduler; two victims of one preemption stay one batch.
func TestPreemptionKubeScheduler(t *testing.T) {
	for _, tc := range []struct {
		name    string
		victims int
	}{{"one victim", 1}, {"two victims, Events in between", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			b := newSchedHist(t)
			b.node(0, smallNode("n1"))
			var vs []*corev1.Pod
			for i := range tc.victims {
				v := onNode(prioPod(fmt.Sprintf("victim%d", i), 1000, fmt.Sprintf("%dm", 800/tc.victims)), "n1")
				b.pod(1, v)
				vs = append(vs, v)
			}
			p := prioPod("pre", 3000, "500m")
			b.pod(10, p)
			b.kubeEvent(10.98, p.Namespace, p.Name, "18eb0177a4c3ab2a")
			at := 10.99
			for i, v := range vs {
				b.call(at, identityScheduler, "patch", "pods", "status", v.Namespace, v.Name, history.StatusOK, string(v.UID))
				m := markedPreempted(v)
				b.pod(at+0.005, m)
				b.call(at+0.01, identityScheduler, "delete", "pods", "", v.Namespace, v.Name, history.StatusOK, string(v.UID))
				b.pod(at+0.015, deleting(m))
				b.kubeEvent(at+0.02, v.Namespace, v.Name, fmt.Sprintf("18eb0177a899b63%d", i))
				at += 0.03
			}
			// The dispatcher's patch of the preemptor lands last.
			b.call(at+0.01, identityScheduler, "patch", "pods", "status", p.Namespace, p.Name, history.StatusOK, string(p.UID))
			b.pod(at+0.015, nominated(p, "n1"))
			for _, v := range vs {
				b.podGone(12, v)
			}
			// The preemptor waits for the victims: its next cycles fail
			// again.
			b.kubeEvent(12.5, p.Namespace, p.Name, "18eb01782859858c")
			b.kubeEvent(13.5, p.Namespace, p.Name, "18eb01782859859d")
			b.bind(14, nominated(p, "n1"), "n1")
			h := b.history()
			h.End = schedSec(60)
			if got := preemptBatches(h); len(got) != 1 || len(got[0].deletes) != tc.victims || len(got[0].patches) != 1 {
				t.Errorf("%d batches, want one with %d deletions and the preemptor's patch: %+v", len(got), tc.victims, got)
			}
			res := CheckPreemption(context.Background(), h, Options{})
			if res.Verdict != Ok || res.Stats.Checked != 1 {
				t.Errorf("verdict %s, %d judged: %s", res.Verdict, res.Stats.Checked, res.Summary)
			}
		})
	}
}
