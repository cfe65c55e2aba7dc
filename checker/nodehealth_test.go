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
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: nodeLeaseNamespace, Name: "n1"}}
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
		}, Ok, []string{"declared no node's health unknown; 1 node heart-beating through the record (16 heart-beats"}},
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
