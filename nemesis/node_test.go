package nemesis_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestLoseNode: the lost node is powered off and its Node object is gone,
// pod GC force deletes its pod (PS-10), and the heal brings a replacement
// that registers a Ready Node of the same name.
func TestLoseNode(t *testing.T) {
	c := startNodes(t, 1, 2, withControllers)
	cs := admin(t, c)
	ctx := context.Background()
	runPod(t, c, cs, "on-0", "node-0")
	runPod(t, c, cs, "on-1", "node-1")
	inj := inject(t, c, "lose-node", seeded())
	node := inj.Targets[0]
	if !c.PoweredOff(node) || c.KubeletRunning(node) || running(t, c, node) != 0 {
		t.Errorf("lost node %s: powered off %v, kubelet running %v, containers %d; want off, stopped, none",
			node, c.PoweredOff(node), c.KubeletRunning(node), running(t, c, node))
	}
	if _, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Get of the lost node = %v, want NotFound", err)
	}
	pod := "on-0"
	if node == "node-1" {
		pod = "on-1"
	}
	eventually(t, "pod GC removing "+pod, 30*time.Second, func() bool {
		_, err := cs.CoreV1().Pods("default").Get(ctx, pod, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	heal(t, inj)
	if c.PoweredOff(node) {
		t.Errorf("%s still powered off after the heal", node)
	}
	eventually(t, "the replacement's Node Ready", 30*time.Second, func() bool {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	})
}
