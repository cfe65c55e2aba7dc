package checker

import (
	"context"
	"strings"
	"testing"

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

// preemptCase is one node n1 (and n2 when set) with a low-priority victim
// running on victimNode from 1 s, a preemptor pending from 10 s, and the
// scheduler's preemption at 11 s: it deletes the victim, records an Event,
// and patches the preemptor's nomination (patch), which the store shows
// when the patch succeeded.
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
	b.call(11, identityScheduler, "delete", "pods", "", v.Namespace, v.Name, history.StatusOK, string(v.UID))
	b.pod(11.005, deleting(v))
	b.call(11.02, identityScheduler, "create", "events", "", v.Namespace, v.Name+".1", history.StatusOK, "")
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

// TestPreemptionSchedulerCalls judges a preemption as the scheduler now
// writes it: the victim's deletion and Event, a FailedScheduling Event,
// then PodScheduled=False and the nomination in one status patch that is
// conditional on the informer's resourceVersion, so it may be refused
// (409) and sent again after a read; later cycles of other pods add their
// own Events and status patches before the preemptor binds.
func TestPreemptionSchedulerCalls(t *testing.T) {
	for _, tc := range []struct {
		name       string
		victimPrio int32
		want       Verdict
		words      []string
	}{
		{name: "lower-priority victim", victimPrio: 1000, want: Ok},
		{name: "PR-10 equal-priority victim", victimPrio: 3000, want: Illegal, words: []string{"PR-10", "not strictly lower"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newSchedHist(t)
			b.node(0, smallNode("n1"))
			v := onNode(prioPod("victim", tc.victimPrio, "800m"), "n1")
			b.pod(1, v)
			pre := prioPod("pre", 3000, "500m")
			b.pod(10, pre)
			other := prioPod("other", 10, "2")
			b.pod(10, other)
			b.call(11, identityScheduler, "delete", "pods", "", v.Namespace, v.Name, history.StatusOK, string(v.UID))
			b.pod(11.005, deleting(v))
			b.call(11.02, identityScheduler, "create", "events", "", v.Namespace, v.Name+".1", history.StatusOK, "")
			b.call(11.03, identityScheduler, "create", "events", "", pre.Namespace, pre.Name+".2", history.StatusOK, "")
			b.call(11.04, identityScheduler, "patch", "pods", "status", pre.Namespace, pre.Name, history.StatusFail, "")
			b.call(11.05, identityScheduler, "get", "pods", "", pre.Namespace, pre.Name, history.StatusOK, string(pre.UID))
			b.call(11.06, identityScheduler, "patch", "pods", "status", pre.Namespace, pre.Name, history.StatusOK, string(pre.UID))
			nom := nominated(pre, "n1")
			nom.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
				Reason: corev1.PodReasonUnschedulable, Message: "0/1 nodes are available: 1 Insufficient cpu."}}
			b.pod(11.065, nom)
			b.call(11.5, identityScheduler, "create", "events", "", other.Namespace, other.Name+".3", history.StatusOK, "")
			b.call(11.51, identityScheduler, "patch", "pods", "status", other.Namespace, other.Name, history.StatusOK, string(other.UID))
			b.podGone(12, v)
			b.bind(13, nom, "n1")
			h := b.history()
			h.End = schedSec(60)
			res := checkPreemption(t, h, tc.want, tc.words...)
			if res.Stats.Checked != 1 {
				t.Errorf("judged %d preemptions, want 1", res.Stats.Checked)
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

func TestPreemptionBatches(t *testing.T) {
	b := newSchedHist(t)
	b.call(1, identityScheduler, "delete", "pods", "", "ns", "v1", history.StatusOK, "u1")
	b.call(1.1, identityScheduler, "create", "events", "", "ns", "v1.x", history.StatusOK, "")
	b.call(1.2, identityScheduler, "delete", "pods", "", "ns", "v2", history.StatusOK, "u2")
	b.call(1.3, identityScheduler, "patch", "pods", "status", "ns", "p", history.StatusOK, "")
	b.call(1.4, identityScheduler, "delete", "pods", "", "ns", "v3", history.StatusOK, "u3")
	b.call(1.5, identityScheduler, "create", "pods", "binding", "ns", "q", history.StatusOK, "")
	b.call(1.6, "admin", "delete", "pods", "", "ns", "v4", history.StatusOK, "u4")
	b.call(1.7, identityScheduler, "get", "pods", "", "ns", "v5", history.StatusOK, "")
	got := preemptBatches(b.history())
	if len(got) != 2 || len(got[0].deletes) != 2 || len(got[0].patches) != 1 || len(got[1].deletes) != 1 || got[1].deletes[0].Name != "v3" {
		t.Fatalf("batches = %+v", got)
	}
	if got[0].td != schedSec(1) || got[0].upper < schedSec(1.31) {
		t.Errorf("batch 0 spans [%d, %d]", got[0].td, got[0].upper)
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
