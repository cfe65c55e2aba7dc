package cluster_test

import (
	"context"
	"errors"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/kubelet"
)

// leaseRenewed returns node's lease renew time (zero if it cannot be read).
func leaseRenewed(cs kubernetes.Interface, node string) time.Time {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := cs.CoordinationV1().Leases(apiserver.KubeLeaseNamespace).Get(ctx, node, metav1.GetOptions{})
	if err != nil || l.Spec.RenewTime == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Time
}

// TestPauseKubelet: a paused kubelet renews no lease and reacts to no
// deletion, its containers keep running, a network heal does not resume it;
// on Resume it renews and finishes the deletion.
func TestPauseKubelet(t *testing.T) {
	c, ledger, cs := startKubeletCluster(t, 1)
	comp := cluster.KubeletComponent("node-0")
	createPod(t, cs, scriptedPod("p", "node-0", 5, nil, "app"))
	waitFor(t, "running", 20*time.Second, func() bool { p, _ := podPhase(t, cs, "p"); return p == corev1.PodRunning })
	waitFor(t, "a lease", 10*time.Second, func() bool { return !leaseRenewed(cs, "node-0").IsZero() })

	if err := c.Pause(comp); err != nil {
		t.Fatal(err)
	}
	if !c.Paused(comp) || !c.ComponentClock(comp).Paused() {
		t.Fatalf("Paused(%s) = %v, clock paused = %v; want both", comp, c.Paused(comp), c.ComponentClock(comp).Paused())
	}
	// Let a renewal in flight land, then watch for more.
	time.Sleep(c.Clock().WallFor(5 * time.Second))
	before := leaseRenewed(cs, "node-0")
	deletePod(t, cs, "p", nil)
	c.Network().HealAll() // an ordinary heal must not resume it
	time.Sleep(c.Clock().WallFor(60 * time.Second))
	if after := leaseRenewed(cs, "node-0"); !after.Equal(before) {
		t.Errorf("a paused kubelet renewed its lease: %s -> %s", before, after)
	}
	if got := entries(ledger, "p", kubelet.ActionTerm); len(got) != 0 {
		t.Errorf("a paused kubelet signalled: %+v", got)
	}
	rt, _ := c.Runtime("node-0")
	if rt.Running() != 1 {
		t.Errorf("running containers on a paused kubelet's node = %d, want 1", rt.Running())
	}

	if err := c.Resume(comp); err != nil {
		t.Fatal(err)
	}
	if c.Paused(comp) || c.ComponentClock(comp).Paused() || len(c.Network().PortRules()) != 0 {
		t.Errorf("after Resume: paused %v, clock paused %v, port rules %v", c.Paused(comp), c.ComponentClock(comp).Paused(), c.Network().PortRules())
	}
	waitFor(t, "a renewal after Resume", 30*time.Second, func() bool { return leaseRenewed(cs, "node-0").After(before) })
	waitFor(t, "the deletion finished after Resume", 30*time.Second, func() bool { _, exists := podPhase(t, cs, "p"); return !exists })
}

// TestPauseControllerManager: paused controllers write nothing (a new
// ReplicaSet gets no pods) and act once resumed.
func TestPauseControllerManager(t *testing.T) {
	env := startCtlCluster(t, 1)
	c, cs := env.c, env.cs
	ctx := context.Background()
	if err := c.Pause(cluster.ComponentControllerManager); err != nil {
		t.Fatal(err)
	}
	for _, n := range cluster.ControllerNames {
		if !c.ComponentClock(cluster.ControllerComponent(n)).Paused() {
			t.Errorf("clock of controller %s not paused", n)
		}
	}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: "default"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}},
			Template: ctlSimTemplate("api"),
		},
	}
	if _, err := cs.AppsV1().ReplicaSets("default").Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := func() int {
		l, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=api"})
		if err != nil {
			return -1
		}
		return len(l.Items)
	}
	c.Network().HealAll()
	time.Sleep(c.Clock().WallFor(30 * time.Second))
	if n := pods(); n != 0 {
		t.Fatalf("paused controllers created %d pods", n)
	}
	if err := c.Resume(cluster.ComponentControllerManager); err != nil {
		t.Fatal(err)
	}
	ctlWait(t, "two replicas after Resume", 30*time.Second, func() bool { return pods() == 2 })
}

// TestPauseScheduler: a paused scheduler binds nothing until resumed.
func TestPauseScheduler(t *testing.T) {
	c := startCluster(t, cluster.Config{Topology: cluster.DefaultTopology(1, 1, 1), TimeScale: kubeletScale,
		Kubelets: true, Scheduler: true})
	cs := clientset(t, c, apiserver.IdentityAdmin, 0)
	if err := c.Pause(cluster.ComponentScheduler); err != nil {
		t.Fatal(err)
	}
	createPod(t, cs, scriptedPod("p", "", 5, nil, "app"))
	bound := func() bool {
		p, err := cs.CoreV1().Pods("default").Get(context.Background(), "p", metav1.GetOptions{})
		return err == nil && p.Spec.NodeName != ""
	}
	time.Sleep(c.Clock().WallFor(30 * time.Second))
	if bound() {
		t.Fatal("a paused scheduler bound a pod")
	}
	if err := c.Resume(cluster.ComponentScheduler); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "bound after Resume", 30*time.Second, bound)
}

func TestPauseErrors(t *testing.T) {
	c := startCluster(t, cluster.Config{Topology: cluster.DefaultTopology(1, 1, 1)})
	for _, comp := range []string{"kubelet/node-9", "etcd", ""} {
		if err := c.Pause(comp); !errors.Is(err, cluster.ErrUnknownComponent) {
			t.Errorf("Pause(%q) = %v, want ErrUnknownComponent", comp, err)
		}
	}
	comp := cluster.KubeletComponent("node-0")
	if err := c.Resume(comp); !errors.Is(err, cluster.ErrNotPaused) {
		t.Errorf("Resume of a running component = %v, want ErrNotPaused", err)
	}
	if err := c.Pause(comp); err != nil {
		t.Fatal(err)
	}
	if err := c.Pause(comp); !errors.Is(err, cluster.ErrAlreadyPaused) {
		t.Errorf("second Pause = %v, want ErrAlreadyPaused", err)
	}
	if got := c.PausedComponents(); len(got) != 1 || got[0] != comp {
		t.Errorf("PausedComponents() = %v, want [%s]", got, comp)
	}
	if err := c.Resume(comp); err != nil {
		t.Fatal(err)
	}
	if got := c.PausedComponents(); len(got) != 0 {
		t.Errorf("PausedComponents() after Resume = %v", got)
	}
}

// A paused component can still be stopped (a crash or a power fence does
// not wait for SIGCONT), and one started while paused starts paused.
func TestStopWhilePaused(t *testing.T) {
	env := startCtlCluster(t, 1)
	c := env.c
	for _, comp := range []string{cluster.KubeletComponent("node-0"), cluster.ComponentControllerManager} {
		if err := c.Pause(comp); err != nil {
			t.Fatal(err)
		}
	}
	stopped := make(chan error, 2)
	go func() { stopped <- c.StopKubelet("node-0") }()
	go func() { stopped <- c.StopController(cluster.ControllerNodeLifecycle) }()
	for range 2 {
		select {
		case err := <-stopped:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("stopping a paused component hangs")
		}
	}
	if err := c.StartKubelet("node-0"); err != nil {
		t.Fatal(err)
	}
	if err := c.StartController(cluster.ControllerNodeLifecycle); err != nil {
		t.Fatal(err)
	}
	if !c.ComponentClock(cluster.KubeletComponent("node-0")).Paused() {
		t.Error("a kubelet started while paused runs on a running clock")
	}
	if err := c.PowerOff("node-0"); err != nil {
		t.Fatal(err)
	}
	for _, comp := range c.PausedComponents() {
		if err := c.Resume(comp); err != nil {
			t.Fatal(err)
		}
	}
}
