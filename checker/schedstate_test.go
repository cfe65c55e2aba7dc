package checker

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsafe/podsafe/history"
)

// schedHist builds histories of store events and scheduler calls. Times
// are seconds since the recorder's start.
type schedHist struct {
	t  testing.TB
	h  history.History
	rv int
	// last holds the type of the last store event of each object.
	last map[string]history.StoreEventType
}

// checkSched compares the verdict of res, a scheduling checker's result,
// with want; for Illegal it also wants the first evidence to name what
// (named tells) and to contain each of the words.
func checkSched(t *testing.T, res Result, want Verdict, what string, named func(Evidence) bool, words ...string) Result {
	t.Helper()
	if res.Verdict != want {
		t.Fatalf("verdict %s, want %s: %s; evidence %+v", res.Verdict, want, res.Summary, res.Evidence)
	}
	if want == Illegal {
		if len(res.Evidence) == 0 {
			t.Fatalf("Illegal without evidence: %s", res.Summary)
		}
		ev := res.Evidence[0]
		if !named(ev) {
			t.Errorf("evidence does not name %s: %+v", what, ev)
		}
		for _, w := range words {
			if !strings.Contains(ev.Description, w) {
				t.Errorf("evidence %q lacks %q", ev.Description, w)
			}
		}
	}
	return res
}

func newSchedHist(t testing.TB) *schedHist {
	return &schedHist{t: t, h: history.History{Meta: history.Meta{RunID: "test"}}}
}

func schedSec(s float64) int64 { return int64(s * float64(time.Second)) }

func (b *schedHist) store(at float64, typ history.StoreEventType, resource, ns, name string, obj any) {
	b.t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		b.t.Fatal(err)
	}
	b.rv++
	if b.last == nil {
		b.last = map[string]history.StoreEventType{}
	}
	b.last[resource+"/"+ns+"/"+name] = typ
	b.h.Store = append(b.h.Store, history.StoreEvent{Type: typ, Resource: resource, Namespace: ns, Name: name,
		RV: strconv.Itoa(b.rv), Object: raw, T: schedSec(at)})
	b.h.End = max(b.h.End, schedSec(at))
}

// node adds (or changes) a node at time at.
func (b *schedHist) node(at float64, n *corev1.Node) *schedHist {
	typ := history.StoreAdded
	if _, ok := b.last["nodes//"+n.Name]; ok {
		typ = history.StoreModified
	}
	b.store(at, typ, "nodes", "", n.Name, n)
	return b
}

// pod writes a version of a pod at time at: ADDED the first time its
// name is seen (or after a deletion), MODIFIED after.
func (b *schedHist) pod(at float64, p *corev1.Pod) *schedHist {
	typ := history.StoreAdded
	if last, ok := b.last["pods/"+p.Namespace+"/"+p.Name]; ok && last != history.StoreDeleted {
		typ = history.StoreModified
	}
	b.store(at, typ, "pods", p.Namespace, p.Name, p)
	return b
}

func (b *schedHist) podGone(at float64, p *corev1.Pod) *schedHist {
	b.store(at, history.StoreDeleted, "pods", p.Namespace, p.Name, p)
	return b
}

// call records an API call of identity lasting 10 ms from at.
func (b *schedHist) call(at float64, identity, verb, resource, sub, ns, name string, outcome history.Status, uid string) *schedHist {
	c := history.APICall{Identity: identity, Verb: verb, Resource: resource, Subresource: sub, Namespace: ns, Name: name,
		Invoke: schedSec(at), Return: schedSec(at + 0.01), Outcome: outcome, UID: uid}
	if outcome == history.StatusOK {
		c.Code = 200
		c.ResourceVersion = strconv.Itoa(b.rv + 1)
	}
	b.h.API = append(b.h.API, c)
	b.h.End = max(b.h.End, c.Return)
	return b
}

// bind records the scheduler's binding of p to node: the call at at, the
// store change 5 ms later.
func (b *schedHist) bind(at float64, p *corev1.Pod, node string) *corev1.Pod {
	b.call(at, identityScheduler, "create", "pods", "binding", p.Namespace, p.Name, history.StatusOK, "")
	q := p.DeepCopy()
	q.Spec.NodeName = node
	b.pod(at+0.005, q)
	return q
}

func (b *schedHist) fault(start, end float64, name string) *schedHist {
	b.h.Nemesis = append(b.h.Nemesis, history.Interval{Name: name, Start: schedSec(start), End: schedSec(end), Healed: true})
	return b
}

func (b *schedHist) history() *history.History {
	h := b.h
	return &h
}

// mkNode builds a node with labels (pairs) and 4 CPUs, 8 GiB, 110 pods.
func mkNode(name string, kv ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"),
			corev1.ResourcePods: resource.MustParse("110")}}}
	for i := 0; i+1 < len(kv); i += 2 {
		n.Labels[kv[i]] = kv[i+1]
	}
	return n
}

// mkPod builds a pending pod with labels (pairs) in ns.
func mkPod(ns, name string, kv ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name),
		Labels: map[string]string{}},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending}}
	for i := 0; i+1 < len(kv); i += 2 {
		p.Labels[kv[i]] = kv[i+1]
	}
	return p
}

func onNode(p *corev1.Pod, node string) *corev1.Pod {
	q := p.DeepCopy()
	q.Spec.NodeName = node
	q.Status.Phase = corev1.PodRunning
	return q
}

func deleting(p *corev1.Pod) *corev1.Pod {
	q := p.DeepCopy()
	now := metav1.NewTime(time.Unix(0, 0))
	q.DeletionTimestamp = &now
	return q
}

func TestSchedStateReplay(t *testing.T) {
	b := newSchedHist(t)
	p := mkPod("ns", "a", "app", "x")
	p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	p.Spec.InitContainers = []corev1.Container{{Name: "i", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}}
	prio := int32(7)
	p.Spec.Priority = &prio
	b.node(0, mkNode("n1", corev1.LabelTopologyZone, "a")).pod(1, p)
	bound := b.bind(2, p, "n1")
	b.pod(3, deleting(bound)).podGone(4, bound)
	r := newSchedReplay(b.history())
	var binds int
	for {
		ch, ok, err := r.step()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if ch.binding() {
			binds++
			got := r.state.pods["ns/a"]
			if got.node != "n1" || got.priority != 7 || !got.requests.equal(schedRes{milliCPU: 2000, memory: 1 << 30, pods: 1}) {
				t.Errorf("bound pod = %+v", got)
			}
			if len(r.state.byNode["n1"]) != 1 || len(r.state.byNS["ns"]) != 1 {
				t.Errorf("indexes: byNode %v byNS %v", r.state.byNode, r.state.byNS)
			}
		}
		if ch.idx == 3 && !ch.podAfter.deleting {
			t.Errorf("deletionTimestamp not seen")
		}
	}
	if binds != 1 {
		t.Errorf("bindings = %d, want 1", binds)
	}
	if len(r.state.pods) != 0 || len(r.state.byNode) != 0 || len(r.state.byNS["ns"]) != 0 {
		t.Errorf("pod left after deletion: %v", r.state.pods)
	}
	if n := r.state.nodes["n1"]; n == nil || n.alloc.milliCPU != 4000 || n.labels[corev1.LabelTopologyZone] != "a" {
		t.Errorf("node = %+v", n)
	}
	if got := r.firstAtOrAfter(schedSec(2)); got != 2 {
		t.Errorf("firstAtOrAfter(2s) = %d, want 2", got)
	}
}

// TestSchedRequests: a pod's requests are decoded as the scheduler now
// computes them (component-helpers' PodRequests): sidecars add up with the
// containers, plain init containers raise the floor, pod-level requests
// replace the containers' CPU and memory, overhead is added, and ephemeral
// storage and extended resources are counted; a node's allocatable holds
// the same resources.
func TestSchedRequests(t *testing.T) {
	const gpu corev1.ResourceName = "example.com/gpu"
	always := corev1.ContainerRestartPolicyAlways
	reqs := func(kv ...string) corev1.ResourceList {
		l := corev1.ResourceList{}
		for i := 0; i+1 < len(kv); i += 2 {
			l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return l
	}
	pod := func(containers corev1.ResourceList, edit func(*corev1.Pod)) *corev1.Pod {
		p := mkPod("ns", "p")
		p.Spec.Containers[0].Resources.Requests = containers
		if edit != nil {
			edit(p)
		}
		return p
	}
	initC := func(l corev1.ResourceList, policy *corev1.ContainerRestartPolicy) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "i", RestartPolicy: policy,
				Resources: corev1.ResourceRequirements{Requests: l}})
		}
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want schedRes
	}{
		{"containers", pod(reqs("cpu", "500m", "memory", "1Gi"), nil), schedRes{milliCPU: 500, memory: 1 << 30, pods: 1}},
		{"an init container sets the floor", pod(reqs("cpu", "500m"), initC(reqs("cpu", "2"), nil)), schedRes{milliCPU: 2000, pods: 1}},
		{"a sidecar adds up", pod(reqs("cpu", "500m"), initC(reqs("cpu", "250m"), &always)), schedRes{milliCPU: 750, pods: 1}},
		{"pod-level requests replace the containers'", pod(reqs("cpu", "250m", "memory", "256Mi", "ephemeral-storage", "1Gi"), func(p *corev1.Pod) {
			p.Spec.Resources = &corev1.ResourceRequirements{Requests: reqs("cpu", "1200m", "memory", "384Mi")}
		}), schedRes{milliCPU: 1200, memory: 384 << 20, ephemeral: 1 << 30, pods: 1}},
		{"overhead", pod(reqs("cpu", "500m"), func(p *corev1.Pod) { p.Spec.Overhead = reqs("cpu", "100m") }), schedRes{milliCPU: 600, pods: 1}},
		{"ephemeral storage and an extended resource", pod(reqs("ephemeral-storage", "512Mi", string(gpu), "2"), nil),
			schedRes{ephemeral: 512 << 20, pods: 1, scalar: map[corev1.ResourceName]int64{gpu: 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := json.Marshal(tc.pod)
			if err != nil {
				t.Fatal(err)
			}
			got, err := decodeSchedPod(raw)
			if err != nil {
				t.Fatal(err)
			}
			if !got.requests.equal(tc.want) {
				t.Errorf("requests = %s, want %s", got.requests, tc.want)
			}
		})
	}
	n := mkNode("n1")
	n.Status.Allocatable[gpu] = resource.MustParse("4")
	n.Status.Allocatable[corev1.ResourceEphemeralStorage] = resource.MustParse("10Gi")
	raw, err := json.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeSchedNode(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := schedRes{milliCPU: 4000, memory: 8 << 30, pods: 110, ephemeral: 10 << 30, scalar: map[corev1.ResourceName]int64{gpu: 4}}
	if !got.alloc.equal(want) {
		t.Errorf("allocatable = %s, want %s", got.alloc, want)
	}
	if small := (schedRes{pods: 1, scalar: map[corev1.ResourceName]int64{gpu: 1}}); small.fits(schedRes{scalar: map[corev1.ResourceName]int64{gpu: 4}}, want) {
		t.Error("a gpu fits on a node whose gpus are all taken")
	}
	if eph := (schedRes{pods: 1, ephemeral: 1 << 30}); eph.fits(schedRes{ephemeral: 10 << 30}, want) {
		t.Error("ephemeral storage fits on a node whose storage is all taken")
	}
}

func TestSchedWindowStart(t *testing.T) {
	h := &history.History{Nemesis: []history.Interval{{Name: "pause-scheduler", Start: schedSec(100), End: schedSec(130), Healed: true}}}
	for _, tc := range []struct {
		at, want float64
	}{
		{50, 44},   // no fault near: 5 s of lag and 1 s of recording slack
		{120, 94},  // during the fault
		{160, 94},  // healed 30 s ago: the watches may still be catching up
		{200, 194}, // long after
	} {
		if got := schedWindowStart(h, schedSec(tc.at)); got != schedSec(tc.want) {
			t.Errorf("schedWindowStart(%vs) = %v, want %vs", tc.at, time.Duration(got), tc.want)
		}
	}
}
