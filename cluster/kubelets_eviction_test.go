package cluster_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/kubelet"
)

// TestKubeletEvictsUnderMemoryPressure: above the hard threshold the pod
// most above its requests, among the lowest priority, is killed at once and
// left Failed with reason Evicted (PR-14, GP-7); a pod within its requests
// keeps running.
func TestKubeletEvictsUnderMemoryPressure(t *testing.T) {
	ledger := &kubelet.MemoryLedger{}
	c := startCluster(t, cluster.Config{Topology: cluster.DefaultTopology(1, 1, 1), TimeScale: kubeletScale, Ledger: ledger})
	cs := clientset(t, c, apiserver.IdentityAdmin, 0)
	rt, err := c.Runtime("node-0")
	if err != nil {
		t.Fatal(err)
	}
	kcs, err := c.Clientset(apiserver.KubeletIdentity("node-0"), cluster.ClientOptions{Host: "node-0"})
	if err != nil {
		t.Fatal(err)
	}
	k, err := kubelet.New(kubelet.Config{Client: kcs, NodeName: "node-0", Clock: c.Clock(), Runtime: rt,
		EvictionHard: 1 << 30, EvictionEvery: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = k.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	withMem := func(name, mem, request string) *corev1.Pod {
		p := scriptedPod(name, "node-0", 30, map[string]string{"app": "ignore-term mem=" + mem}, "app")
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(request)}
		p.Spec.Priority = ptr.To[int32](0)
		return p
	}
	createPod(t, cs, withMem("within", "600Mi", "600Mi"))
	createPod(t, cs, withMem("greedy", "600Mi", "100Mi"))
	waitFor(t, "greedy evicted", 30*time.Second, func() bool {
		p := getPod(t, cs, "greedy")
		return p.Status.Phase == corev1.PodFailed && p.Status.Reason == kubelet.ReasonEvicted
	})
	if kills := entries(ledger, "greedy", kubelet.ActionKill); len(kills) != 1 || kills[0].Grace != 1 {
		t.Errorf("hard eviction: want one KILL with the 1 s floor, ledger: %+v", entries(ledger, "greedy", ""))
	}
	time.Sleep(c.Clock().WallFor(5 * time.Second))
	if ph, _ := podPhase(t, cs, "within"); ph != corev1.PodRunning || len(entries(ledger, "within", kubelet.ActionTerm)) != 0 {
		t.Errorf("the pod within its requests was touched: phase %s, ledger %+v", ph, entries(ledger, "within", ""))
	}
	// Deleting the evicted pod removes it (it is Failed: at once).
	deletePod(t, cs, "greedy", nil)
	waitFor(t, "greedy removed", 30*time.Second, func() bool { _, exists := podPhase(t, cs, "greedy"); return !exists })
}
