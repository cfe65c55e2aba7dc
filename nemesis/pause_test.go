package nemesis_test

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/podsafe/podsafe/cluster"
)

func TestPauseFaults(t *testing.T) {
	c := startNodes(t, 1, 1, withScheduler, withControllers)
	cs := admin(t, c)
	rng := seeded()
	ctx := context.Background()

	t.Run("pause-kubelet", func(t *testing.T) {
		runPod(t, c, cs, "paused", "node-0")
		inj := inject(t, c, "pause-kubelet", rng)
		comp := cluster.KubeletComponent("node-0")
		if !c.Paused(comp) || inj.Targets[0] != comp {
			t.Fatalf("%s not paused (targets %v)", comp, inj.Targets)
		}
		before := assertLeaseFrozen(t, c, cs, "node-0")
		if running(t, c, "node-0") == 0 {
			t.Error("the containers of a paused kubelet stopped")
		}
		heal(t, inj)
		if c.Paused(comp) || len(c.Network().PortRules()) != 0 {
			t.Errorf("after heal: paused %v, port rules %v", c.Paused(comp), c.Network().PortRules())
		}
		eventually(t, "a renewal after resume", 30*time.Second, func() bool { return leaseRenewed(cs, "node-0").After(before) })
	})

	t.Run("pause-controller", func(t *testing.T) {
		inj := inject(t, c, "pause-controller", rng)
		rs := &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: "rs", Namespace: "default"},
			Spec: appsv1.ReplicaSetSpec{
				Replicas: ptr.To[int32](2),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "rs"}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "rs"}},
					Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](5),
						Containers: []corev1.Container{{Name: "app", Image: "sim"}}},
				},
			},
		}
		if _, err := cs.AppsV1().ReplicaSets("default").Create(ctx, rs, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pods := func() int {
			l, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=rs"})
			if err != nil {
				return -1
			}
			return len(l.Items)
		}
		scaled(c, 30*time.Second)
		if n := pods(); n != 0 {
			t.Errorf("paused controllers created %d pods", n)
		}
		heal(t, inj)
		eventually(t, "the replicas after resume", 30*time.Second, func() bool { return pods() == 2 })
	})

	t.Run("pause-scheduler", func(t *testing.T) {
		inj := inject(t, c, "pause-scheduler", rng)
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "unbound", Namespace: "default"},
			Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](5),
				Containers: []corev1.Container{{Name: "app", Image: "sim"}}},
		}
		if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		bound := func() bool {
			got, err := cs.CoreV1().Pods("default").Get(ctx, "unbound", metav1.GetOptions{})
			return err == nil && got.Spec.NodeName != ""
		}
		scaled(c, 30*time.Second)
		if bound() {
			t.Error("a paused scheduler bound a pod")
		}
		heal(t, inj)
		eventually(t, "the pod bound after resume", 30*time.Second, bound)
	})
}

// A pause outlasts the heal of every other fault, and the heal of a
// partition injected on top of it.
func TestPauseOutlastsOtherHeals(t *testing.T) {
	c := startNodes(t, 1, 1)
	cs := admin(t, c)
	rng := seeded()
	eventually(t, "a lease", 10*time.Second, func() bool { return !leaseRenewed(cs, "node-0").IsZero() })
	pause := inject(t, c, "pause-kubelet", rng)
	part := inject(t, c, "partition-node", rng)
	heal(t, part)
	c.Network().HealAll()
	c.Network().Reset()
	if !c.Paused(cluster.KubeletComponent("node-0")) || len(c.Network().PortRules()) == 0 {
		t.Fatalf("other heals lifted the pause: paused %v, port rules %v", c.Paused(cluster.KubeletComponent("node-0")), c.Network().PortRules())
	}
	before := assertLeaseFrozen(t, c, cs, "node-0")
	heal(t, pause)
	eventually(t, "a renewal after resume", 30*time.Second, func() bool { return leaseRenewed(cs, "node-0").After(before) })
}
