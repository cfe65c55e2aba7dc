package checker

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podsafe/podsafe/history"
)

// nodeHist builds a history of node n1's Lease renewals and statuses, with
// resourceVersions in commit order and the grace period stated.
type nodeHist struct {
	t  *testing.T
	h  history.History
	rv int
}

func newNodeHist(t *testing.T, grace time.Duration) *nodeHist {
	b := &nodeHist{t: t, h: history.History{Meta: history.Meta{RunID: "test"}}}
	if grace > 0 {
		b.h.Logs = append(b.h.Logs, history.LogEntry{Msg: "kube target started", Attrs: map[string]string{LogNodeMonitorGrace: grace.String()}})
	}
	return b
}

func (b *nodeHist) add(at float64, typ history.StoreEventType, resource, ns, name string, obj any) {
	raw, err := json.Marshal(obj)
	if err != nil {
		b.t.Fatal(err)
	}
	b.rv++
	b.h.Store = append(b.h.Store, history.StoreEvent{T: schedSec(at), Type: typ, Resource: resource, Namespace: ns, Name: name,
		RV: strconv.Itoa(b.rv), Object: raw})
}

// renew renews n1's Lease at each of the times.
func (b *nodeHist) renew(times ...float64) *nodeHist {
	for _, at := range times {
		renew := metav1.NewMicroTime(time.Unix(1000, 0).Add(time.Duration(at * float64(time.Second))))
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: nodeLeaseNamespace, Name: "n1"},
			Spec: coordinationv1.LeaseSpec{RenewTime: &renew}}
		typ := history.StoreModified
		if b.rv == 0 {
			typ = history.StoreAdded
		}
		b.add(at, typ, "leases.coordination.k8s.io", nodeLeaseNamespace, "n1", l)
	}
	return b
}

// status records n1 with its Ready condition.
func (b *nodeHist) status(at float64, ready corev1.ConditionStatus, reason string, heartbeat float64) *nodeHist {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: ready, Reason: reason,
		LastHeartbeatTime: metav1.NewTime(time.Unix(0, 0).Add(time.Duration(heartbeat * float64(time.Second)))),
	}}}}
	b.add(at, history.StoreModified, "nodes", "", "n1", n)
	return b
}

// every returns the times from..to by step.
func every(from, to, step float64) []float64 {
	var out []float64
	for t := from; t <= to+1e-9; t += step {
		out = append(out, t)
	}
	return out
}

func TestNodeHealth(t *testing.T) {
	const grace = 10 * time.Second
	mark := func(b *nodeHist, at float64) *nodeHist {
		return b.status(at, corev1.ConditionUnknown, nodeReasonStatusUnknown, 0)
	}
	tests := []struct {
		name  string
		build func() *nodeHist
		want  Verdict
		words []string
	}{
		{"a node that stopped heart-beating", func() *nodeHist {
			b := newNodeHist(t, grace).status(0.5, corev1.ConditionTrue, "KubeletReady", 0.5).renew(every(1, 20, 2)...)
			return mark(b, 31)
		}, Ok, []string{"every one of 1 node mark", "grace period (10s"}},
		// kubernetes#138698: the Lease kept being renewed, the
		// controller's cache of it did not move.
		{"a heart-beating node (stale Lease cache)", func() *nodeHist {
			b := newNodeHist(t, grace).status(0.5, corev1.ConditionTrue, "KubeletReady", 0.5).renew(every(1, 30, 2)...)
			b = mark(b, 31)
			return b.renew(every(32, 40, 2)...)
		}, Illegal, []string{"node n1's health unknown", "2s after its Lease renewed at 29s", "under its grace period of 10s"}},
		// A Lease written again without a later renewTime is no renewal.
		{"a Lease rewritten without renewing", func() *nodeHist {
			b := newNodeHist(t, grace).status(0.5, corev1.ConditionTrue, "KubeletReady", 0.5).renew(every(1, 19, 2)...)
			b.renew(19, 19, 19)
			b.h.Store[len(b.h.Store)-1].T = schedSec(30)
			return mark(b, 31)
		}, Ok, []string{"every one of 1 node mark"}},
		// A pause of the controller-manager in the grace period: it acts
		// on the view it had when it resumes. Its only mark excused,
		// nothing was judged.
		{"the controller-manager was paused", func() *nodeHist {
			b := newNodeHist(t, grace).status(0.5, corev1.ConditionTrue, "KubeletReady", 0.5).renew(every(1, 30, 2)...)
			b.h.Nemesis = append(b.h.Nemesis, history.Interval{Name: "pause-controller", Components: []string{"kube-controller-manager-0"},
				Start: schedSec(15), End: schedSec(30), Healed: true})
			return mark(b, 31)
		}, Unknown, []string{"no node mark judged (1 mark not judged: a fault was on the controller-manager"}},
		// One mark excused, a later one judged: the judged one makes the
		// verdict.
		{"one mark excused, one judged", func() *nodeHist {
			b := newNodeHist(t, grace).status(0.5, corev1.ConditionTrue, "KubeletReady", 0.5).renew(every(1, 30, 2)...)
			b.h.Nemesis = append(b.h.Nemesis, history.Interval{Name: "pause-controller", Components: []string{"kube-controller-manager-0"},
				Start: schedSec(15), End: schedSec(30), Healed: true})
			b = mark(b, 31)
			b = b.status(32, corev1.ConditionTrue, "KubeletReady", 32).renew(every(33, 90, 2)...)
			return mark(b, 111)
		}, Ok, []string{"every one of 1 node mark", "(1 mark not judged"}},
		// The Lease stopped, but the kubelet's status heart-beat came
		// 3 s before the mark.
		{"a status heart-beat within the grace", func() *nodeHist {
			b := newNodeHist(t, grace).status(0.5, corev1.ConditionTrue, "KubeletReady", 0.5).renew(every(1, 15, 2)...)
			b = b.status(28, corev1.ConditionTrue, "KubeletReady", 28)
			return mark(b, 31)
		}, Illegal, []string{"3s after its kubelet posted a status with heart-beat"}},
		// Within the recorder's slack of the grace: not judged premature.
		{"just at the grace", func() *nodeHist {
			b := newNodeHist(t, grace).status(0.5, corev1.ConditionTrue, "KubeletReady", 0.5).renew(every(1, 21, 2)...)
			return mark(b, 30)
		}, Ok, []string{"every one of 1 node mark"}},
		// Heart-beats and no mark: the record shows the controller left a
		// live node alone.
		{"no mark", func() *nodeHist {
			return newNodeHist(t, grace).status(0.5, corev1.ConditionTrue, "KubeletReady", 0.5).renew(every(1, 30, 2)...)
		}, Ok, []string{"declared no node's health unknown; 1 node heart-beating through the record (14 heart-beats"}},
		{"no grace period stated", func() *nodeHist {
			b := newNodeHist(t, 0).renew(every(1, 30, 2)...)
			return mark(b, 31)
		}, Unknown, []string{"does not state the node controller's grace period"}},
		{"a mark before the Lease record began", func() *nodeHist {
			b := mark(newNodeHist(t, grace), 0.5)
			return b.renew(every(1, 30, 2)...)
		}, Unknown, []string{"no node mark judged"}},
		{"lost store events", func() *nodeHist {
			b := newNodeHist(t, grace).renew(every(1, 30, 2)...)
			b = mark(b, 31)
			b.h.Logs = append(b.h.Logs, history.LogEntry{Msg: history.LogStoreEventsLost, Attrs: map[string]string{"resource": "leases.coordination.k8s.io"}})
			return b
		}, Unknown, []string{"store events were lost"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.build().h
			if !nodeHealthApplies(&h) {
				t.Fatal("the checker does not apply to a history with node Leases")
			}
			res := CheckNodeHealth(context.Background(), &h, Options{})
			if res.Verdict != tc.want {
				t.Fatalf("verdict %s, want %s: %s", res.Verdict, tc.want, res.Summary)
			}
			text := res.Summary
			if tc.want == Illegal {
				if len(res.Evidence) == 0 || res.Evidence[0].Key != "n1" {
					t.Fatalf("evidence %+v does not name node n1", res.Evidence)
				}
				text = res.Evidence[0].Description
			}
			for _, w := range tc.words {
				if !strings.Contains(text, w) {
					t.Errorf("%q does not say %q", text, w)
				}
			}
		})
	}
	// Without node Leases in the record it does not apply.
	b := newNodeHist(t, grace).status(0.5, corev1.ConditionUnknown, nodeReasonStatusUnknown, 0)
	if nodeHealthApplies(&b.h) {
		t.Error("applies without node Leases")
	}
}

// taints records n1 with the NoExecute taints named (none: untainted).
func (b *nodeHist) taints(at float64, keys ...string) *nodeHist {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	for _, k := range keys {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: k, Effect: corev1.TaintEffectNoExecute})
	}
	b.add(at, history.StoreModified, "nodes", "", "n1", n)
	return b
}

// evicted records pod p on n1 marked by the taint eviction controller.
func (b *nodeHist) evicted(at float64, name string, tols ...corev1.Toleration) *nodeHist {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: "uid-" + types.UID(name)},
		Spec: corev1.PodSpec{NodeName: "n1", Tolerations: tols}}
	b.add(at-0.5, history.StoreAdded, "pods", "default", name, p)
	q := p.DeepCopy()
	q.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: podReasonTaintManager}}
	b.add(at, history.StoreModified, "pods", "default", name, q)
	return b
}

// TestTaintEviction: an eviction by the taint eviction controller must come
// while (or just after) the pod's node has a NoExecute taint the pod does
// not tolerate for good (kubernetes#139992).
func TestTaintEviction(t *testing.T) {
	const unreachable = "node.kubernetes.io/unreachable"
	forever := corev1.Toleration{Key: unreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}
	for5 := forever
	for5.TolerationSeconds = ptrInt64(5)
	tests := []struct {
		name  string
		build func() *nodeHist
		want  Verdict
		words []string
	}{
		{"evicted while tainted", func() *nodeHist {
			return newNodeHist(t, 0).taints(1).taints(10, unreachable).evicted(11, "a")
		}, Ok, []string{"every one of 1 judged eviction by the taint eviction controller"}},
		{"evicted after its toleration ran out", func() *nodeHist {
			b := newNodeHist(t, 0).taints(1).evicted(3, "a", for5)
			b.h.Store = b.h.Store[:len(b.h.Store)-1] // bound at 2.5, not yet marked
			return b.taints(10, unreachable).evicted(15.2, "a", for5)
		}, Ok, []string{"every one of 1 judged eviction"}},
		// kubernetes' tolerationSeconds counts from when the node got the
		// taint (or the pod came, if later).
		{"evicted before its toleration ran out", func() *nodeHist {
			b := newNodeHist(t, 0).taints(1).evicted(3, "a", for5)
			b.h.Store = b.h.Store[:len(b.h.Store)-1]
			return b.taints(10, unreachable).evicted(11, "a", for5)
		}, Illegal, []string{"too early: the pod tolerates the node's NoExecute taints for 5s and the controller acted 1s after the node got them at 10s"}},
		{"a pod bound to an already tainted node", func() *nodeHist {
			return newNodeHist(t, 0).taints(1).taints(10, unreachable).evicted(21, "b", for5)
		}, Illegal, []string{"acted 500ms after the pod was bound there at 20.5s"}},
		{"taint removed just before: the controller's view may trail", func() *nodeHist {
			return newNodeHist(t, 0).taints(1).taints(10, unreachable).taints(28).evicted(31, "a")
		}, Ok, []string{"every one of 1 judged eviction"}},
		{"taint long gone (stale node view)", func() *nodeHist {
			return newNodeHist(t, 0).taints(1).taints(10, unreachable).taints(12).evicted(31, "late")
		}, Illegal, []string{"marked pod default/late", "on node n1", "was gone at 12s, 19s before the mark"}},
		{"a taint the pod tolerates for good", func() *nodeHist {
			return newNodeHist(t, 0).taints(1).taints(10, unreachable).evicted(11, "tol", forever)
		}, Illegal, []string{"never had a NoExecute taint the pod does not tolerate for good"}},
		{"the controller was paused", func() *nodeHist {
			b := newNodeHist(t, 0).taints(1).taints(10, unreachable).taints(12).evicted(31, "late")
			b.h.Nemesis = append(b.h.Nemesis, history.Interval{Name: "pause-controller", Components: []string{"kube-controller-manager-0"},
				Start: schedSec(5), End: schedSec(25), Healed: true})
			return b
		}, Unknown, []string{"no eviction by the taint eviction controller judged", "1 eviction not judged: a fault stopped or restarted the controller"}},
		{"a frozen watch is no excuse", func() *nodeHist {
			b := newNodeHist(t, 0).taints(1).taints(10, unreachable).taints(12).evicted(31, "late")
			b.h.Nemesis = append(b.h.Nemesis, history.Interval{Name: "freeze-watch", Components: []string{"kube-controller-manager-0"},
				Start: schedSec(5), End: schedSec(40), Healed: true})
			return b
		}, Illegal, []string{"marked pod default/late"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.build().h
			if !nodeHealthApplies(&h) {
				t.Fatal("the checker does not apply to a history with a taint eviction")
			}
			res := CheckNodeHealth(context.Background(), &h, Options{})
			if res.Verdict != tc.want {
				t.Fatalf("verdict %s, want %s: %s", res.Verdict, tc.want, res.Summary)
			}
			text := res.Summary
			if tc.want == Illegal {
				if len(res.Evidence) == 0 || res.Evidence[0].At == 0 {
					t.Fatalf("evidence %+v has no time", res.Evidence)
				}
				text = res.Evidence[0].Description
			}
			for _, w := range tc.words {
				if !strings.Contains(text, w) {
					t.Errorf("%q does not say %q", text, w)
				}
			}
		})
	}
}

func ptrInt64(v int64) *int64 { return &v }
