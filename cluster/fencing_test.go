package cluster_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podsafe/podsafe/apiserver"
	"github.com/podsafe/podsafe/cluster"
	"github.com/podsafe/podsafe/fencing"
	"github.com/podsafe/podsafe/kubelet"
)

// fencingScale is the time scale of the fencing tests: the default 20 s
// threshold is then 400 ms of wall time, enough that a healthy kubelet's
// lease renewal, late on a loaded 2-core machine under -race, is not taken
// for a partition (a false fence is safe but would use up the budget).
const fencingScale = 50

// withFencing enables the fencing controller with the given agents.
func withFencing(agents ...string) func(*cluster.Config) {
	return func(cfg *cluster.Config) {
		cfg.TimeScale = fencingScale
		cfg.Fencing = cluster.FencingOptions{Enabled: true, Agents: agents}
	}
}

// TestFencingRecoversPartitionedPet: PS-14/PS-15 end to end with the default
// agents (storage, then power). The pet's node is cut from the control plane
// but not from the storage. The fencing controller sees its lease go stale,
// firewalls it at the storage, powers it off, records the fence and only
// then force deletes the pet and breaks its volume attachment; the
// replacement runs on the other node while the partition is still in force.
// The ledger shows no overlap of execution and no interleaved writes; the
// recorded API history shows that only the fencing controller force deleted,
// after the fence; after an admin unfences the node, nothing of the old pet
// runs there again.
func TestFencingRecoversPartitionedPet(t *testing.T) {
	env := startCtlCluster(t, 2, withFencing())
	c, cs := env.c, env.cs
	ctx := context.Background()
	if _, err := cs.AppsV1().StatefulSets("default").Create(ctx, ctlPetSet("db", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const volume = "default.data-db-0"
	var old *corev1.Pod
	ctlWait(t, "db-0 running and writing", 30*time.Second, func() bool {
		p, ok := ctlGetPod(cs, "default", "db-0")
		old = p
		return ok && p.Status.Phase == corev1.PodRunning && len(ctlWrites(env.ledger, volume)) > 0
	})
	node := old.Spec.NodeName
	cut := c.Clock().Now()
	ctlPartition(c, node)

	var repl *corev1.Pod
	ctlWait(t, "replacement db-0 running", 60*time.Second, func() bool {
		p, ok := ctlGetPod(cs, "default", "db-0")
		repl = p
		return ok && p.UID != old.UID && p.Status.Phase == corev1.PodRunning
	})
	recovered := c.Clock().Now()
	if repl.Spec.NodeName == node {
		t.Fatalf("the replacement runs on the fenced node %s", node)
	}
	if !c.PoweredOff(node) {
		t.Errorf("node %s is not powered off after its fence", node)
	}
	if other, err := cs.CoreV1().Nodes().Get(ctx, repl.Spec.NodeName, metav1.GetOptions{}); err != nil || fencing.Fenced(other) {
		t.Errorf("the healthy node %s was fenced (err %v): a false fence", repl.Spec.NodeName, err)
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !fencing.Fenced(n) {
		t.Errorf("node %s does not carry %s=True: %+v", node, apiserver.FencedCondition, n.Status.Conditions)
	}
	token, ok := fencing.FenceToken(n)
	if !ok || token < 1 {
		t.Errorf("node %s fence token = %d, %v", node, token, ok)
	}
	if got := mustStorage(t, c).Fences()[node]; got != token {
		t.Errorf("storage fence token of %s = %d, want the node's %d", node, got, token)
	}
	t.Logf("PS-14 time to recovery with fencing: partition -> replacement Running %.0f scaled s", recovered.Sub(cut).Seconds())

	// The ledger: the old pet was powered off before the replacement
	// started, and the volume's writers took turns.
	ctlWait(t, "replacement writing the volume", 30*time.Second, func() bool {
		return len(ctlWritersOf(ctlWrites(env.ledger, volume))) == 2
	})
	if ov := ctlOverlaps(ctlExecutions(env.ledger)["default/db-0"]); len(ov) > 0 {
		t.Errorf("pet db-0 ran twice at once: %+v", ov)
	}
	if bad := ctlInterleaved(ctlWrites(env.ledger, volume)); len(bad) > 0 {
		t.Errorf("PS-15: writes to %s interleaved: %v", volume, bad)
	}
	if n := len(entriesOf(env.ledger, string(old.UID), kubelet.ActionPowerOff)); n != 1 {
		t.Errorf("old pet power-off entries = %d, want 1", n)
	}

	// The recorded API history: only the fencing controller force
	// deleted, only pods of the fenced node; no controller did.
	assertNoControllerForceDelete(t, env)
	for id, pods := range env.audit.forceDeletes() {
		if id != apiserver.IdentityFencingController {
			continue
		}
		for _, p := range pods {
			if p != "default/db-0" {
				t.Errorf("fencing controller force deleted %s, not on the fenced node", p)
			}
		}
	}

	// An admin unfences the node after the partition heals: it comes
	// back empty and runs nothing of the old pet.
	c.Network().HealAll()
	if err := c.Unfence(ctx, node); err != nil {
		t.Fatal(err)
	}
	ctlWait(t, "node back and schedulable", 30*time.Second, func() bool {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		return err == nil && !fencing.Fenced(n) && !n.Spec.Unschedulable && ctlNodeCond(n, corev1.NodeReady).Status == corev1.ConditionTrue
	})
	if c.PoweredOff(node) || !c.KubeletRunning(node) {
		t.Errorf("node %s after unfence: powered off %v, kubelet running %v", node, c.PoweredOff(node), c.KubeletRunning(node))
	}
	time.Sleep(c.Clock().WallFor(20 * time.Second))
	if n := len(entriesOf(env.ledger, string(old.UID), kubelet.ActionStart)); n != 1 {
		t.Errorf("the old pet started %d times; after its fence it must never start again", n)
	}
	if bad := ctlInterleaved(ctlWrites(env.ledger, volume)); len(bad) > 0 {
		t.Errorf("PS-15 after unfence: writes to %s interleaved: %v", volume, bad)
	}
}

// TestStorageFenceRefusesStaleNode: with only the storage agent, the
// partitioned node keeps running its old pet (nothing powers it off), but
// the storage server refuses every write it makes after the fence, so the
// replacement's writes never interleave with the old pet's.
func TestStorageFenceRefusesStaleNode(t *testing.T) {
	env := startCtlCluster(t, 2, withFencing(cluster.FenceAgentStorage))
	c, cs := env.c, env.cs
	ctx := context.Background()
	if _, err := cs.AppsV1().StatefulSets("default").Create(ctx, ctlPetSet("db", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const volume = "default.data-db-0"
	var old *corev1.Pod
	ctlWait(t, "db-0 running and writing", 30*time.Second, func() bool {
		p, ok := ctlGetPod(cs, "default", "db-0")
		old = p
		return ok && p.Status.Phase == corev1.PodRunning && len(ctlWrites(env.ledger, volume)) > 0
	})
	ctlPartition(c, old.Spec.NodeName)
	ctlWait(t, "replacement writing the volume while the old pet still runs", 60*time.Second, func() bool {
		return len(ctlWritersOf(ctlWrites(env.ledger, volume))) == 2
	})
	ctlWait(t, "the old pet's writes refused", 30*time.Second, func() bool {
		return len(entriesOf(env.ledger, string(old.UID), kubelet.ActionWriteRefused)) > 0
	})
	if c.PoweredOff(old.Spec.NodeName) {
		t.Errorf("node %s was powered off, but only the storage agent is configured", old.Spec.NodeName)
	}
	if bad := ctlInterleaved(ctlWrites(env.ledger, volume)); len(bad) > 0 {
		t.Errorf("PS-15: accepted writes to %s interleaved: %v", volume, bad)
	}
	// The old pet is still running: the storage fence stops its writes,
	// not its process.
	if ivs := ctlExecutions(env.ledger)["default/db-0"]; len(ivs) == 0 || !ivs[0].end.IsZero() {
		t.Errorf("the old pet should still run on its storage-fenced node: %+v", ivs)
	}
}

// entriesOf returns uid's ledger entries with action a.
func entriesOf(l *kubelet.MemoryLedger, uid string, a kubelet.LedgerAction) []kubelet.LedgerEntry {
	var out []kubelet.LedgerEntry
	for _, e := range l.Entries() {
		if e.UID == uid && e.Action == a {
			out = append(out, e)
		}
	}
	return out
}

func mustStorage(t *testing.T, c *cluster.Cluster) interface{ Fences() map[string]int64 } {
	t.Helper()
	s, err := c.Storage()
	if err != nil {
		t.Fatal(err)
	}
	return s
}
