package fencing

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// fenceMessage is the message of a True FencedCondition; parseFenceMessage
// reads it back, so a restarted controller recovers token and agents from
// the API alone.
func fenceMessage(token int64, agents []string) string {
	return fmt.Sprintf("fence token %d confirmed by %s", token, strings.Join(agents, ","))
}

// parseFenceMessage reads a fenceMessage. It is pure.
func parseFenceMessage(msg string) (token int64, agents []string, ok bool) {
	rest, found := strings.CutPrefix(msg, "fence token ")
	if !found {
		return 0, nil, false
	}
	num, list, found := strings.Cut(rest, " confirmed by ")
	if !found {
		return 0, nil, false
	}
	token, err := strconv.ParseInt(num, 10, 64)
	if err != nil || token <= 0 {
		return 0, nil, false
	}
	if list != "" {
		agents = strings.Split(list, ",")
	}
	return token, agents, true
}

// recordedFence is a fence as the API records it on a Node.
type recordedFence struct {
	token     int64
	agents    []string
	confirmed time.Time // the condition's lastTransitionTime
}

// recordedFenceOf reads the fence recorded on node: FencedCondition True,
// with the token from its message (or, failing that, from
// AnnotationFenceToken). It is pure.
func recordedFenceOf(node *corev1.Node) (recordedFence, bool) {
	c := nodeCondition(node, FencedCondition)
	if c == nil || c.Status != corev1.ConditionTrue {
		return recordedFence{}, false
	}
	rf := recordedFence{confirmed: c.LastTransitionTime.Time}
	token, agents, ok := parseFenceMessage(c.Message)
	if !ok {
		token, ok = FenceToken(node)
	}
	if !ok {
		// Set by hand (admin) without a token: still a confirmed fence.
		token = 0
	}
	rf.token, rf.agents = token, agents
	return rf, true
}

// recordFence writes a confirmed fence into node's status: FencedCondition
// True, reason ReasonFenced. A node already recorded as fenced is left as
// it is (a retry whose first write succeeded unseen). It returns the node
// as stored afterwards.
func recordFence(ctx context.Context, client kubernetes.Interface, name string, token int64, agents []string, now time.Time) (*corev1.Node, error) {
	var out *corev1.Node
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if Fenced(node) {
			out = node
			return nil
		}
		n := node.DeepCopy()
		t := metav1.NewTime(now)
		setNodeCondition(n, corev1.NodeCondition{
			Type: FencedCondition, Status: corev1.ConditionTrue, Reason: ReasonFenced,
			Message: fenceMessage(token, agents), LastHeartbeatTime: t, LastTransitionTime: t,
		})
		out, err = client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("recording fence of node %s: %w", name, err)
	}
	return out, nil
}

// ensureFenceSpec completes the record of a fenced node's spec:
// AnnotationFenceToken, the TaintFenced NoExecute taint and
// spec.unschedulable. It reads the node from the API (not a cache) and
// writes only while it still carries FencedCondition True, so it never
// re-fences a node an admin just unfenced. It returns the node as the API
// last showed it and whether it is fenced.
func ensureFenceSpec(ctx context.Context, client kubernetes.Interface, name string, now time.Time) (*corev1.Node, bool, error) {
	var out *corev1.Node
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		out = node
		rf, ok := recordedFenceOf(node)
		if !ok {
			return nil
		}
		if specRecorded(node, rf.token) {
			return nil
		}
		n := node.DeepCopy()
		if rf.token > 0 {
			if n.Annotations == nil {
				n.Annotations = map[string]string{}
			}
			n.Annotations[AnnotationFenceToken] = strconv.FormatInt(rf.token, 10)
		}
		if fencedTaint(n) == nil {
			t := metav1.NewTime(now)
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: TaintFenced, Effect: corev1.TaintEffectNoExecute, TimeAdded: &t})
		}
		n.Spec.Unschedulable = true
		out, err = client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("recording fence token, taint and cordon of node %s: %w", name, err)
	}
	return out, Fenced(out), nil
}

// specRecorded reports whether node's spec carries the record of the fence
// with token: the token annotation (unless the token is unknown), the
// TaintFenced taint and the cordon. It is pure.
func specRecorded(node *corev1.Node, token int64) bool {
	if token > 0 {
		if got, ok := FenceToken(node); !ok || got != token {
			return false
		}
	}
	return fencedTaint(node) != nil && node.Spec.Unschedulable
}

// eventSource is the component named on the controller's Events.
const eventSource = "fencing-controller"

// nodeRef refers to a Node in an Event.
func nodeRef(node *corev1.Node) corev1.ObjectReference {
	return corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node.Name, UID: node.UID}
}

// podRef refers to a Pod in an Event.
func podRef(pod *corev1.Pod) corev1.ObjectReference {
	return corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
}
