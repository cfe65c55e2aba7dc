package fencing

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// fencedNode is a node as a finished fence leaves it, with a pending fence
// request and another taint of its own.
func fencedNode(name string) *corev1.Node {
	n := makeNode(name).fenced(4, "power", "storage").annotate(AnnotationFenceRequest, "hung").
		annotate(AnnotationFenceToken, "4").annotate("keep", "me").obj()
	n.Spec.Unschedulable = true
	n.Spec.Taints = []corev1.Taint{
		{Key: "other", Effect: corev1.TaintEffectNoSchedule},
		{Key: TaintFenced, Effect: corev1.TaintEffectNoExecute},
	}
	return n
}

// TestUnfenceOrder: agents are undone in reverse order, then the node is
// written in the order that keeps a running controller from fencing it again
// or re-applying the record: request gone, condition False, marks gone.
func TestUnfenceOrder(t *testing.T) {
	cs := fake.NewClientset(fencedNode("n1"))
	var writes []string
	cs.PrependReactor("update", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		n := a.(k8stesting.UpdateAction).GetObject().(*corev1.Node)
		_, req := n.Annotations[AnnotationFenceRequest]
		_, tok := n.Annotations[AnnotationFenceToken]
		writes = append(writes, fmt.Sprintf("%s fenced=%v request=%v token=%v taint=%v cordon=%v",
			a.GetSubresource(), Fenced(n), req, tok, fencedTaint(n) != nil, n.Spec.Unschedulable))
		return false, nil, nil
	})
	tr := &trace{}
	if err := Unfence(context.Background(), cs, twoAgents(tr), "n1"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"agent storage unfenced n1", "agent power unfenced n1"}, tr.all()); diff != "" {
		t.Errorf("agent calls (-want +got):\n%s", diff)
	}
	want := []string{
		" fenced=true request=false token=true taint=true cordon=true",
		"status fenced=false request=false token=true taint=true cordon=true",
		" fenced=false request=false token=false taint=false cordon=false",
	}
	if diff := cmp.Diff(want, writes); diff != "" {
		t.Errorf("node writes (-want +got):\n%s", diff)
	}
	n, err := cs.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := nodeCondition(n, FencedCondition); c == nil || c.Status != corev1.ConditionFalse || c.Reason != ReasonUnfenced {
		t.Errorf("condition = %+v", c)
	}
	if n.Annotations["keep"] != "me" || len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "other" {
		t.Errorf("unfence touched what is not the fence's: annotations %v, taints %v", n.Annotations, n.Spec.Taints)
	}

	// Again: nothing left to undo, nothing written.
	writes = nil
	if err := Unfence(context.Background(), cs, nil, "n1"); err != nil || len(writes) != 0 {
		t.Errorf("second Unfence = %v, writes %v", err, writes)
	}
}

// TestUnfenceStopsAtAgentFailure: a node an agent could not unfence keeps
// its fence record.
func TestUnfenceStopsAtAgentFailure(t *testing.T) {
	cs := fake.NewClientset(fencedNode("n1"))
	tr := &trace{}
	agents := []Agent{&traceAgent{name: "power", tr: tr}, &failingUnfence{traceAgent{name: "storage", tr: tr}}}
	if err := Unfence(context.Background(), cs, agents, "n1"); !errors.Is(err, ErrAgentFailed) {
		t.Fatalf("Unfence = %v, want ErrAgentFailed", err)
	}
	n, _ := cs.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if !Fenced(n) || len(tr.all()) != 0 {
		t.Errorf("fence undone although storage failed: fenced %v, calls %v", Fenced(n), tr.all())
	}
}

type failingUnfence struct{ traceAgent }

func (*failingUnfence) Unfence(context.Context, string) error {
	return errors.New("storage server unreachable")
}
